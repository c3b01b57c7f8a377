"""A cron's `ingest --from-agents` appends in small row groups, so DuckDB's checkpoints rewrite one small
row group instead of the whole growing records table (its peak memory, `bench/sources.py`)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from test_agent_sources import claude_line, session_file

import expengine.ingest.agents as agents
from expengine.store.db import CRON_ROW_GROUP_ROWS, DB_FILE, close_database, open_database


def attach_options(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return con.execute("SELECT options FROM duckdb_databases() WHERE database_name = current_database()").fetchone()[0]  # type: ignore[index]


@pytest.mark.parametrize("defer_index", [True, False])
def test_only_a_deferred_ingest_attaches_the_store_with_small_row_groups(
    home: Path, make_engine, monkeypatch: pytest.MonkeyPatch, defer_index: bool
):
    session_file(home, [claude_line(n) for n in range(4)])
    seen: list[dict[str, str]] = []
    real = agents.ingest_agents

    def watched(store, *args, **kwargs):
        seen.append(attach_options(store.con))
        return real(store, *args, **kwargs)

    monkeypatch.setattr(agents, "ingest_agents", watched)
    result = make_engine().ingest_agents(["claude-code"], defer_index=defer_index)
    assert result.ingest.stored > 0
    expected = str(CRON_ROW_GROUP_ROWS) if defer_index else None
    assert seen and seen[0].get("row_group_size") == expected


def test_rows_appended_in_small_row_groups_fill_them_and_read_back_as_written(tmp_path: Path):
    path = tmp_path / DB_FILE
    con = open_database(path, row_group_rows=CRON_ROW_GROUP_ROWS)
    try:
        con.execute("CREATE TABLE lines (n INTEGER, text VARCHAR)")
        for start in range(0, 5000, 500):  # one commit per batch, as an ingest writes
            con.execute(
                "INSERT INTO lines SELECT range, repeat('x', 100) || range FROM range(?, ?)", [start, start + 500]
            )
        con.execute("CHECKPOINT")
        groups = con.execute("SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('lines')").fetchone()
        assert groups == (3,)  # 2,048 + 2,048 + 904
    finally:
        close_database(con)
    con = open_database(path)  # attached again as any other command does: the file is a plain DuckDB file
    try:
        assert attach_options(con).get("row_group_size") is None
        assert con.execute("SELECT count(*), sum(n), max(length(text)) FROM lines").fetchone() == (5000, 12497500, 104)
    finally:
        close_database(con)


def test_a_deferred_ingest_keeps_no_vectors_in_memory(home: Path, make_engine):
    session_file(home, [claude_line(n) for n in range(4)])
    engine = make_engine()
    assert engine.ingest_agents(["claude-code"], defer_index=True).ingest.embedded > 0
    assert not engine._memo._vectors
