"""Issue 23: a plain `Engine.query` keeps the LanceDB tables open between calls yet lets another process
write, a cycle leaves no old LanceDB versions, and snapshots share the index files that did not change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_compact import BOOKING, CHATTER, REFUND, ev

from expengine.config import Config
from expengine.errors import InputError
from expengine.lifecycle.snapshot import disk_bytes
from expengine.store.db import DB_FILE, LANCE_DIR, SNAPSHOT_DIR
from expengine.store.index import MEMORIES, UNITS

REPO = Path(__file__).resolve().parents[1]


def manifests(store: Path, table: str) -> list[str]:
    return sorted(n for n in os.listdir(store / LANCE_DIR / f"{table}.lance" / "_versions") if n.endswith(".manifest"))


def shared(folder: Path) -> dict[str, int]:
    """Relative path -> inode of every data, index and deletion file under `folder` (not `_versions`)."""
    return {
        str(p.relative_to(folder)): p.stat().st_ino
        for p in folder.rglob("*")
        if p.is_file() and p.parent.name != "_versions"
    }


def test_a_plain_query_keeps_its_tables_open_and_another_process_still_writes_between_calls(
    make_engine, write_jsonl, tmp_path
):
    agent = make_engine()
    agent.ingest([write_jsonl("booking.jsonl", BOOKING)])
    assert agent.query("flight to Tokyo", k=3, touch=False).hits
    kept = agent._index._tables[MEMORIES]
    agent.query("rate limited search", k=3, touch=False)
    assert agent._store is None and agent._index._tables[MEMORIES] is kept  # let go of the store, not the table
    news = write_jsonl("llama.jsonl", [ev("z01", 90, "message", role="user", content="my llama Gustavo eats hay")])
    writer = subprocess.run(
        [sys.executable, "-m", "expengine", "--store", str(tmp_path / "store"), "--wait", "30", "ingest", news],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert writer.returncode == 0, writer.stderr
    after = agent.query("what does the llama Gustavo eat", k=3, touch=False)
    assert "z01" in [h.id for h in after.hits]  # the other process's write is seen
    assert agent._index._tables[MEMORIES] is not kept  # the changed table was reopened, and only then
    reopened = agent._index._tables[MEMORIES]
    agent.query("flight to Tokyo", k=3, touch=False)
    assert agent._index._tables[MEMORIES] is reopened


def test_a_cycle_leaves_one_version_of_each_index_table(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND)])
    engine.ingest([write_jsonl("b.jsonl", CHATTER)])
    assert len(manifests(tmp_path / "store", MEMORIES)) > 1
    engine.compact(refine=False)
    for table in (MEMORIES, UNITS):
        if (tmp_path / "store" / LANCE_DIR / f"{table}.lance").exists():
            assert len(manifests(tmp_path / "store", table)) == 1, table
    assert engine.query("refund window", k=3, touch=False).hits


def test_snapshots_hard_link_unchanged_index_files_and_copy_the_database(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("c.jsonl", BOOKING + CHATTER)])
    first, second = engine.snapshot(), engine.snapshot()
    root = tmp_path / "store" / SNAPSHOT_DIR
    live = shared(tmp_path / "store" / LANCE_DIR)
    a, b = shared(root / first.id / LANCE_DIR), shared(root / second.id / LANCE_DIR)
    assert a and a == b == live  # the same data and index files, each stored once
    dbs = {(root / s.id / DB_FILE).stat().st_ino for s in (first, second)} | {
        (tmp_path / "store" / DB_FILE).stat().st_ino
    }
    assert len(dbs) == 3  # DuckDB writes its file in place: each snapshot has its own copy
    assert disk_bytes([root]) < sum(disk_bytes([root / s.id]) for s in (first, second))


def test_byte_retention_prunes_the_oldest_snapshots_first(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("c.jsonl", CHATTER)])
    one = engine.snapshot()
    root = tmp_path / "store" / SNAPSHOT_DIR
    size, db = disk_bytes([root / one.id]), (root / one.id / DB_FILE).stat().st_size
    engine.config.snapshot.max_bytes = size + db + db // 2  # room for two snapshots sharing their index, not three
    ids = [one.id] + [engine.snapshot().id for _ in range(3)]
    assert [s.id for s in engine.snapshots()] == ids[:1:-1]  # the two newest
    assert disk_bytes([root]) <= engine.config.snapshot.max_bytes
    engine.config.snapshot.max_bytes = 1  # below one snapshot: the newest still stays
    newest = engine.snapshot().id
    assert [s.id for s in engine.snapshots()] == [newest]


def test_max_bytes_is_checked_like_every_key():
    with pytest.raises(InputError, match="snapshot.max_bytes must be at least 0"):
        Config.from_dict({"snapshot": {"max_bytes": -1}})


def test_restore_from_a_shared_snapshot_after_cycles_dropped_its_versions(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND)])
    snap = engine.snapshot()
    engine.ingest([write_jsonl("b.jsonl", CHATTER)])
    engine.compact(refine=False)  # rewrites fragments and drops the versions the snapshot links to
    engine.compact(refine=False)
    for _ in range(2):  # the store writes after a restore never reach the snapshot's files
        engine.restore(snap.id)
        assert engine.stats().raw == len(BOOKING + REFUND)
        hits = engine.query("request_refund error: order W123 is past the 30 day refund window", k=3, touch=False).hits
        assert hits and hits[0].id == "r04"
        engine.ingest([write_jsonl("b.jsonl", CHATTER)])
        engine.compact(refine=False)
