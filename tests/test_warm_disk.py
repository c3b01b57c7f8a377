"""A plain `Engine.query` keeps the LanceDB tables open between calls yet lets another process
write, a cycle leaves no old LanceDB versions, and snapshots share the index files that did not change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from helpers import BOOKING, CHATTER, REFUND, Counting, ev

from expengine.config import Config
from expengine.errors import InputError
from expengine.lifecycle.snapshot import META_FILE, disk_bytes, snapshot_files
from expengine.store import db
from expengine.store.chunks import CHUNK_DIR, MANIFEST, SCHEMA_DB
from expengine.store.db import DB_FILE, LANCE_DIR, REINDEX_PENDING, SNAPSHOT_DIR, link_tree
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
    kept = agent._index._datasets[MEMORIES]
    agent.query("rate limited search", k=3, touch=False)
    assert agent._store is None and agent._index._datasets[MEMORIES] is kept  # let go of the store, not the dataset
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
    assert agent._index._datasets[MEMORIES] is not kept  # the changed table was reopened, and only then
    reopened = agent._index._datasets[MEMORIES]
    agent.query("flight to Tokyo", k=3, touch=False)
    assert agent._index._datasets[MEMORIES] is reopened


def test_a_plain_query_asked_again_embeds_nothing_and_checks_migrations_only_on_a_changed_file(
    make_engine, write_jsonl, embedder, tmp_path, monkeypatch
):
    counting = Counting(embedder)
    agent = make_engine(embedder=counting)
    agent.ingest([write_jsonl("booking.jsonl", BOOKING)])
    first = agent.query("flight to Tokyo", k=3, touch=False)
    embedded, lock = counting.texts, tmp_path / "store" / ".lock"
    lock_written = lock.stat().st_mtime_ns
    checks = []
    real_migrate = db._migrate
    monkeypatch.setattr(db, "_migrate", lambda con, **kw: (checks.append(1), real_migrate(con, **kw)))
    again = agent.query("flight to Tokyo", k=3, touch=False)
    assert counting.texts == embedded  # the query's vector came from memory
    assert [h.id for h in again.hits] == [h.id for h in first.hits]
    assert not checks  # the file was as this process left it
    assert lock.stat().st_mtime_ns == lock_written and lock.read_text() == f"pid {os.getpid()}"
    other = duckdb.connect(str(tmp_path / "store" / DB_FILE))  # another process's write between calls
    other.execute("INSERT INTO store_meta VALUES ('written elsewhere', 'yes')")
    other.close()
    agent.query("rate limited search", k=3, touch=False)
    assert checks == [1] and counting.texts == embedded + 1


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


def indexed(engine) -> tuple[int, int]:
    """(rows LanceDB holds, rows DuckDB says it should) for the memories table."""
    stats = engine.stats()
    with engine.session() as store:
        return store.index.count(MEMORIES), stats.active + stats.dormant


def test_a_snapshot_holds_no_lancedb_and_a_restore_rebuilds_it_from_the_cache(
    make_engine, write_jsonl, embedder, tmp_path
):
    counting = Counting(embedder)
    engine = make_engine(embedder=counting)
    engine.ingest([write_jsonl("c.jsonl", BOOKING + CHATTER)])
    snap = engine.snapshot()
    folder = tmp_path / "store" / SNAPSHOT_DIR / snap.id
    assert not (folder / LANCE_DIR).exists()
    assert {p.name for p in folder.iterdir()} == {META_FILE, MANIFEST, SCHEMA_DB}  # and the chunks it lists
    engine.ingest([write_jsonl("r.jsonl", REFUND)])
    engine.compact(refine=False)
    embedded = counting.texts
    assert engine.restore(snap.id).raw_after == len(BOOKING + CHATTER)
    assert counting.texts == embedded  # every vector came from the cache
    assert not (tmp_path / "store" / REINDEX_PENDING).exists()
    rows, wanted = indexed(engine)
    assert rows == wanted > 0
    assert engine.query("flight to Tokyo", k=3, touch=False).hits


def test_a_restore_killed_before_its_rebuild_rebuilds_lancedb_at_the_next_open(
    make_engine, write_jsonl, tmp_path, monkeypatch
):
    engine = make_engine()
    engine.ingest([write_jsonl("c.jsonl", BOOKING)])
    snap = engine.snapshot()
    engine.ingest([write_jsonl("r.jsonl", REFUND)])

    def killed(store):
        raise KeyboardInterrupt  # a kill after the database was swapped in, before LanceDB was rebuilt

    monkeypatch.setattr("expengine.lifecycle.snapshot.rebuild_if_pending", killed)
    with pytest.raises(KeyboardInterrupt):
        engine.restore(snap.id)
    engine.close()
    monkeypatch.undo()
    assert (tmp_path / "store" / REINDEX_PENDING).exists()
    again = make_engine()
    assert again.stats().raw == len(BOOKING)
    rows, wanted = indexed(again)
    assert rows == wanted > 0  # the refund records LanceDB still held are gone with the rebuild
    assert not (tmp_path / "store" / REINDEX_PENDING).exists()


def test_a_snapshot_made_with_a_lancedb_folder_is_restored_from_it(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("c.jsonl", BOOKING)])
    snap = engine.snapshot()
    folder = tmp_path / "store" / SNAPSHOT_DIR / snap.id
    link_tree(tmp_path / "store" / LANCE_DIR, folder / LANCE_DIR)  # as snapshots were made before
    linked = shared(folder / LANCE_DIR)
    engine.ingest([write_jsonl("r.jsonl", REFUND)])
    engine.restore(snap.id)
    assert not (tmp_path / "store" / REINDEX_PENDING).exists()
    live = shared(tmp_path / "store" / LANCE_DIR)
    assert linked and all(live[name] == inode for name, inode in linked.items())  # its files, not rebuilt
    rows, wanted = indexed(engine)
    assert rows == wanted > 0


def test_byte_retention_prunes_the_oldest_snapshots_first_and_counts_shared_chunks_once(
    make_engine, write_jsonl, tmp_path
):
    engine = make_engine()
    engine.ingest([write_jsonl("c.jsonl", CHATTER)])
    root = tmp_path / "store" / SNAPSHOT_DIR
    same = [engine.snapshot() for _ in range(2)]  # nothing changed between them: every chunk is shared
    one = disk_bytes(snapshot_files(root / same[0].id))
    assert snapshot_files(root / same[1].id)[1:] == snapshot_files(root / same[0].id)[1:]
    assert same[1].written_bytes == sum((root / same[1].id / n).stat().st_size for n in (MANIFEST, SCHEMA_DB))
    assert disk_bytes([root]) < 1.6 * one
    ids = [s.id for s in same]
    for n, log in enumerate([BOOKING, REFUND, BOOKING[:3]]):  # each adds rows: chunks of its own
        engine.ingest([write_jsonl(f"more{n}.jsonl", [dict(r, id=f"{r['id']}-{n}") for r in log])])
        ids.append(engine.snapshot().id)
    two = disk_bytes([f for i in ids[-2:] for f in snapshot_files(root / i)])
    engine.config.snapshot.max_bytes = two  # room for the two newest, not three
    newest = engine.snapshot().id  # the same as the last: shares all its chunks
    assert [s.id for s in engine.snapshots()] == [newest, ids[-1]] and disk_bytes([root]) <= two
    listed = {p.name for s in engine.snapshots() for p in snapshot_files(root / s.id)[1:]}
    assert {p.name for p in (root / CHUNK_DIR).iterdir()} == listed  # the pruned ones' own chunks went
    engine.config.snapshot.max_bytes = 1  # below one snapshot: the newest still stays
    newest = engine.snapshot().id
    assert [s.id for s in engine.snapshots()] == [newest]


def test_snapshots_are_kept_within_a_share_of_the_live_stores_bytes(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("c.jsonl", BOOKING + CHATTER)])
    assert engine.config.snapshot.max_share == 1.0  # the default: about as much as the store itself
    ids = [engine.snapshot().id for _ in range(3)]
    assert [s.id for s in engine.snapshots()] == ids[::-1]  # three small copies fit in one store's bytes
    store, root = tmp_path / "store", tmp_path / "store" / SNAPSHOT_DIR
    live = (store / "expengine.duckdb").stat().st_size + disk_bytes([store / LANCE_DIR])
    two = disk_bytes([f for i in ids[-2:] for f in snapshot_files(root / i)])  # their chunks counted once
    engine.config.snapshot.max_share = (two + 100) / live  # room for two of them
    newest = engine.snapshot().id
    assert [s.id for s in engine.snapshots()] == [newest, ids[-1]]
    assert disk_bytes([root]) <= two + 100


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


def test_a_table_made_before_a_column_was_added_gets_it_at_the_next_open(make_engine, write_jsonl):
    """Opening a store reads DuckDB's note of the columns LanceDB was given; without it (a store of an
    older version) the tables are opened and given what they lack."""
    from expengine.store.reindex import COLUMNS_KEY

    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING)])
    with engine.session() as store:
        assert store.con.execute("SELECT value FROM store_meta WHERE key = ?", [COLUMNS_KEY]).fetchone() == ("user",)
        store.index.table(MEMORIES).drop_columns(["user"])
        store.index._written(MEMORIES)
        store.con.execute("DELETE FROM store_meta WHERE key = ?", [COLUMNS_KEY])
    with engine.session() as store:
        assert "user" in store.index.dataset(MEMORIES).schema.names
    assert engine.query("flight to Tokyo", k=3, touch=False).hits
