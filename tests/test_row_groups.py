"""Every ingest appends in small row groups, so DuckDB's checkpoints rewrite one small row group instead of
the whole growing records table and embedding cache (a cron's peak memory, `bench/sources.py`; the CPU of
an ingest into a grown store, `bench/million.py --grown`)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from test_agent_sources import claude_line, session_file

import expengine.ingest.agents as agents
from expengine.store.db import (
    DB_FILE,
    INGEST_ROW_GROUP_ROWS,
    close_database,
    drop_table_blocks,
    open_database,
    table_blocks_bytes,
)


def attach_options(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return con.execute("SELECT options FROM duckdb_databases() WHERE database_name = current_database()").fetchone()[0]  # type: ignore[index]


@pytest.mark.parametrize("defer_index", [True, False])
def test_an_ingest_from_agents_attaches_the_store_with_small_row_groups(
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
    assert seen and seen[0].get("row_group_size") == str(INGEST_ROW_GROUP_ROWS)


def test_an_ingest_keeps_the_full_row_groups_of_what_the_store_held(make_engine, write_jsonl):
    """The second ingest's checkpoints leave the first one's full row group of records (each compressed
    again at every rewrite) on the blocks it was written to; only the unfilled one is rewritten. The
    vectors go to the recent files (store/recent_vectors.py), out of the cache table."""
    import expengine.ingest.pipeline as pipeline

    events = [
        {
            "id": f"e{n}",
            "ts": "2026-01-01T00:00:00Z",
            "agent": "a",
            "session": "s",
            "kind": "message",
            "role": "user",
            "content": f"step {n} done",
        }
        for n in range(5200)
    ]
    engine = make_engine()
    seen: list[dict[str, str]] = []
    real = pipeline.ingest

    def watched(store, *args, **kwargs):
        seen.append(attach_options(store.con))
        return real(store, *args, **kwargs)

    def blocks(group: int) -> set[tuple]:
        with engine.session() as store:
            return set(
                store.con.execute(
                    "SELECT column_name, segment_id, block_id FROM pragma_storage_info('records') "
                    "WHERE row_group_id = ? AND block_id >= 0",
                    [group],
                ).fetchall()
            )

    pipeline.ingest = watched
    try:
        assert engine.ingest([write_jsonl("first.jsonl", events[:2200])]).stored == 2200
        first_group = blocks(0)
        assert engine.ingest([write_jsonl("second.jsonl", events[2200:])]).stored == 3000
    finally:
        pipeline.ingest = real
    assert first_group and blocks(0) == first_group
    assert [options.get("row_group_size") for options in seen] == [str(INGEST_ROW_GROUP_ROWS)] * 2
    with engine.session() as store:
        assert store.con.execute("SELECT count(*), count(DISTINCT id) FROM records").fetchone() == (5200, 5200)
        assert store.con.execute("SELECT count(*) FROM embeddings").fetchone() == (0,)


def test_rows_appended_in_small_row_groups_fill_them_and_read_back_as_written(tmp_path: Path):
    path = tmp_path / DB_FILE
    con = open_database(path, row_group_rows=INGEST_ROW_GROUP_ROWS)
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


def test_dropping_table_blocks_frees_duckdb_memory_and_keeps_every_row(tmp_path: Path):
    path = tmp_path / DB_FILE
    con = open_database(path, row_group_rows=INGEST_ROW_GROUP_ROWS)
    try:
        con.execute("CREATE TABLE lines (n INTEGER PRIMARY KEY, text VARCHAR)")
        for start in range(0, 4000, 500):
            con.execute(
                "INSERT INTO lines SELECT range, repeat('x', 4000) || range FROM range(?, ?)", [start, start + 500]
            )
        con.execute("CHECKPOINT")  # the rows now in blocks on disk, which DuckDB keeps in memory too
        con.execute("INSERT INTO lines VALUES (4000, 'not yet checkpointed')")
        limit = con.execute("SELECT current_setting('memory_limit')").fetchone()
        held = table_blocks_bytes(con)
        assert held > 8_000_000
        drop_table_blocks(con)
        assert table_blocks_bytes(con) < held / 4
        assert con.execute("SELECT current_setting('memory_limit')").fetchone() == limit
        assert con.execute("SELECT count(*), sum(n), sum(length(text)) FROM lines").fetchone() == (
            4001,
            sum(range(4001)),
            4000 * 4000 + sum(len(str(n)) for n in range(4000)) + len("not yet checkpointed"),
        )
    finally:
        close_database(con)


def test_a_deferred_ingest_that_drops_its_table_blocks_stores_each_record_once(
    home: Path, tmp_path: Path, make_engine, monkeypatch: pytest.MonkeyPatch
):
    import expengine.ingest.pipeline as pipeline
    import expengine.ingest.writer as writer

    dropped: list[int] = []
    real_drop = writer.drop_table_blocks

    def counted(con):
        dropped.append(1)
        real_drop(con)

    monkeypatch.setattr(writer, "drop_table_blocks", counted)
    monkeypatch.setattr(pipeline, "DEFERRED_BATCH_CHARS", 2000)
    lines = [claude_line(n, f"step {n}: " + "pytest output line " * 30) for n in range(40)]

    def runs(store: Path, bound: int) -> tuple[list[tuple[int, int, int]], list[tuple]]:
        monkeypatch.setattr(writer, "CRON_TABLE_BLOCKS_BYTES", bound)
        session_file(home, lines[:30])
        engine = make_engine(store)
        counts = []
        for run in ("first", "grown", "nothing new"):
            if run == "grown":
                session_file(home, lines)
            result = engine.ingest_agents(["claude-code"], defer_index=True)
            counts.append((result.read_sources, result.ingest.stored, result.ingest.duplicates))
        rows = engine.store.con.execute("SELECT id, content, tool_result FROM records ORDER BY id").fetchall()
        return counts, rows

    plain = runs(tmp_path / "plain", 1 << 40)
    assert not dropped
    assert runs(tmp_path / "dropping", -1) == plain  # dropped before every batch
    assert len(dropped) >= 3
    assert plain[0][2] == (0, 0, 0) and len(plain[1]) == len({row[0] for row in plain[1]})
