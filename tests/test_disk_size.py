"""Disk: small DuckDB blocks, snapshots without the embedding cache's rows, LanceDB fragments that
snapshots keep sharing across a cycle, and lancedb imported without its REST client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from helpers import BOOKING, CHATTER, DIM, REFUND, rows

from expengine.lifecycle.snapshot import PACKED_DB, snapshot_database, snapshot_files
from expengine.store.chunks import MANIFEST
from expengine.store.db import BLOCK_SIZE, DB_FILE, LANCE_DIR, RECENT_DIR, SNAPSHOT_DIR, link_tree
from expengine.store.index import MEMORIES, Index

REPO = Path(__file__).resolve().parents[1]


def block_size(path: Path) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return int(con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def count(path: Path, table: str) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def cached_vectors(store: Path) -> int:
    """The vectors a store caches: in its cache table, and ingest's in the recent files (`RECENT_DIR`)."""
    recent = sum(len(np.load(p)) for p in (store / RECENT_DIR).glob("*.npy"))
    return count(store / DB_FILE, "embeddings") + recent


def test_a_snapshot_leaves_out_cached_vectors_and_a_restore_keeps_the_stores(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND)])
    snap = engine.snapshot()
    engine.ingest([write_jsonl("b.jsonl", CHATTER)])
    engine.close()
    store = tmp_path / "store"
    folder = store / SNAPSHOT_DIR / snap.id
    cached = cached_vectors(store)
    assert not (folder / DB_FILE).exists() and not (folder / PACKED_DB).exists() and (folder / MANIFEST).exists()
    with snapshot_database(folder) as copy:
        assert count(copy, "embeddings") == 0 < cached
        assert count(copy, "records") == len(BOOKING + REFUND)
        assert block_size(store / DB_FILE) == block_size(copy) == BLOCK_SIZE
        indexes = duckdb.connect(str(copy), read_only=True)
        assert {r[0] for r in indexes.execute("SELECT index_name FROM duckdb_indexes()").fetchall()} >= {"records_hash"}
        indexes.close()
    kept = {p: p.read_bytes() for p in snapshot_files(folder)[1:] + [folder / MANIFEST]}
    engine = make_engine()
    assert engine.restore(snap.id).raw_after == len(BOOKING + REFUND)
    engine.close()
    assert cached_vectors(store) == cached  # the replaced store's vectors, none embedded again
    assert {p: p.read_bytes() for p in kept} == kept  # the snapshot itself is left as it was
    hits = make_engine().query("request_refund error: order W123 is past the 30 day refund window", k=3, touch=False)
    assert hits.hits and hits.hits[0].id == "r04"


def test_a_store_made_with_big_blocks_still_opens_and_its_snapshots_get_small_ones(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING)])
    engine.close()
    store = tmp_path / "store"
    con = duckdb.connect()
    con.execute(f"ATTACH '{store / DB_FILE}' AS old (READ_ONLY)")
    con.execute(f"ATTACH '{tmp_path / 'big.duckdb'}' AS big (BLOCK_SIZE 262144)")
    con.execute("COPY FROM DATABASE old TO big")
    con.close()
    os.replace(tmp_path / "big.duckdb", store / DB_FILE)
    engine = make_engine()
    assert engine.query("flight to Tokyo", k=3, touch=False).hits
    snap = engine.snapshot()
    engine.close()
    assert block_size(store / DB_FILE) == 262144
    with snapshot_database(store / SNAPSHOT_DIR / snap.id) as copy:
        assert block_size(copy) == BLOCK_SIZE


def data_files(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in (folder / f"{MEMORIES}.lance" / "data").iterdir()}


def test_compacting_a_table_with_few_changed_rows_keeps_its_big_fragment_shared_with_a_snapshot(tmp_path):
    index = Index(tmp_path / LANCE_DIR)
    index.add(MEMORIES, rows(range(2000)), replace=False)
    for n in range(10):  # a cycle's state changes: each update writes its rows into a fragment of their own
        index.update(MEMORIES, [f"m{n}", f"m{n + 100}"], {"state": "dormant"})
    before = data_files(tmp_path / LANCE_DIR)
    folder = tmp_path / LANCE_DIR / f"{MEMORIES}.lance" / "data"
    big = max(before, key=lambda name: (folder / name).stat().st_size)
    link_tree(tmp_path / LANCE_DIR, tmp_path / "snapshot")
    index.compact_files(MEMORIES)
    index.drop_old_versions(MEMORIES)
    fragments = index.table(MEMORIES).to_lance().get_fragments()  # type: ignore[union-attr]
    assert len(fragments) <= 2 < len(before)  # the ten small fragments were merged
    after = data_files(tmp_path / LANCE_DIR)
    assert after[big] == data_files(tmp_path / "snapshot")[big]  # one file on disk for both
    assert index.count(MEMORIES, "state = 'dormant'") == 20 and index.count(MEMORIES) == 2000


def test_compacting_rewrites_a_big_fragment_once_over_a_tenth_of_its_rows_are_deleted(tmp_path):
    index = Index(tmp_path / LANCE_DIR)
    index.add(MEMORIES, rows(range(2000)), replace=False)
    index.delete(MEMORIES, [f"m{i}" for i in range(600)])
    index.compact_files(MEMORIES)
    fragments = index.table(MEMORIES).to_lance().get_fragments()  # type: ignore[union-attr]
    assert sum(f.num_deletions for f in fragments) == 0 and index.count(MEMORIES) == 1400


def test_lancedb_is_imported_without_its_rest_client_and_a_remote_name_still_loads_it(tmp_path):
    code = f"""
import sys
from expengine.store.index import Index, MEMORIES
from helpers import rows
index = Index({str(tmp_path / LANCE_DIR)!r})
index.add(MEMORIES, rows(range(20)), replace=False)
hits = index.table(MEMORIES).search([0.0] * 8).limit(3).to_arrow().num_rows
apis = [m for m in sys.modules if m.startswith("lance_namespace_urllib3_client.api")]
import lance_namespace_urllib3_client
client = lance_namespace_urllib3_client.ApiClient
print(hits, len(apis), client.__name__)
"""
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO / "tests",
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3", "0", "ApiClient"]


def test_a_large_database_waits_for_a_larger_free_share(make_engine, write_jsonl, tmp_path, monkeypatch):
    import expengine.store.store as store_module

    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND + CHATTER)])
    with engine.session() as store:
        store.con.execute("CREATE TABLE filler AS SELECT range AS n, md5(range::VARCHAR) AS pad FROM range(20000)")
        store.con.execute("CHECKPOINT")
        store.con.execute("DROP TABLE filler")
        monkeypatch.setattr(store_module, "LARGE_FILE", 0)  # every file counts as large
        monkeypatch.setattr(store_module, "LARGE_FREE_SHARE", 0.99)
        assert not store.shed_free_blocks()
        monkeypatch.setattr(store_module, "LARGE_FILE", 2**40)
        assert store.shed_free_blocks()


def test_a_database_mostly_free_blocks_is_rewritten_smaller_and_stays_open(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND + CHATTER)])
    path = tmp_path / "store" / DB_FILE
    with engine.session() as store:
        store.con.execute(
            "CREATE TABLE filler AS SELECT range AS n, md5(range::VARCHAR) || md5((range + 1)::VARCHAR) AS pad FROM range(20000)"
        )
        store.con.execute("CHECKPOINT")
        store.con.execute("DROP TABLE filler")
        store.con.execute("CHECKPOINT")
        grown = path.stat().st_size
        assert not store.shed_free_blocks(share=0.99)  # under the share: left as it is
        assert store.shed_free_blocks()
        assert path.stat().st_size < grown / 2
        assert store.con.execute("SELECT count(*) FROM records").fetchone()[0] == len(BOOKING + REFUND + CHATTER)  # type: ignore[index]
    assert engine.query("flight to Tokyo", k=3, touch=False).hits
    report = engine.compact(refine=False)
    assert report.status == "completed"
    con = duckdb.connect(str(path), read_only=True)
    total, free = con.execute("SELECT total_blocks, free_blocks FROM pragma_database_size()").fetchone()  # type: ignore[misc]
    con.close()
    assert free <= 0.2 * total


def test_vectors_are_stored_as_half_floats_and_read_back_as_float32_within_rounding(tmp_path):
    index = Index(tmp_path / LANCE_DIR)
    table = rows(range(50))
    sent = np.asarray(table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False), np.float32)
    index.add(MEMORIES, table, replace=False)
    assert index.table(MEMORIES).schema.field("vector").type.value_type == pa.float16()  # type: ignore[union-attr]
    read = index.vectors(MEMORIES, [f"m{i}" for i in range(50)])
    assert read["m7"].dtype == np.float32
    back = np.stack([read[f"m{i}"] for i in range(50)])
    assert np.allclose(back.reshape(-1), sent, atol=1e-3)
    hit = index.table(MEMORIES).search(back[7].tolist()).distance_type("cosine").limit(1).to_arrow()  # type: ignore[union-attr]
    assert hit.column("id").to_pylist() == ["m7"]


def test_a_table_made_with_float32_vectors_keeps_them_and_takes_new_rows(tmp_path):
    index = Index(tmp_path / LANCE_DIR)
    old = rows(range(30))
    at = old.schema.get_field_index("vector")
    wide = pa.list_(pa.float32(), DIM)
    index.add(MEMORIES, old.set_column(at, pa.field("vector", wide), old.column(at).cast(wide)), replace=False)
    index.add(MEMORIES, rows(range(30, 40)), replace=True)  # float16 rows into the float32 table
    table = index.table(MEMORIES)
    assert table.schema.field("vector").type == wide and index.count(MEMORIES) == 40  # type: ignore[union-attr]
    assert index.vectors(MEMORIES, ["m35"])["m35"].shape == (DIM,)


def test_dropping_old_versions_waits_for_a_search_under_way_that_still_reads_them(tmp_path):
    import threading

    index = Index(tmp_path / LANCE_DIR)
    index.add(MEMORIES, rows(range(200)), replace=False)
    for n in range(5):
        index.update(MEMORIES, [f"m{n}"], {"state": "dormant"})
    index.compact_files(MEMORIES)  # a new version; the old one's files are still there
    done = threading.Event()

    def cycle_end() -> None:
        index.drop_old_versions(MEMORIES)
        done.set()

    with index.files.reading():
        old = index.table(MEMORIES).to_lance().checkout_version(1)  # type: ignore[union-attr]  # a search's view
        writer = threading.Thread(target=cycle_end)
        writer.start()
        assert not done.wait(timeout=1.0)  # held back while the search reads
        assert old.to_table().num_rows == 200
    writer.join(timeout=120)
    assert done.is_set() and index.count(MEMORIES) == 200
    with pytest.raises(pa.ArrowInvalid, match="Not found"):  # its files are gone now: the guard kept them
        old.to_table()


def test_a_file_short_of_its_header_is_read_in_full_once_and_again_after_another_writer(tmp_path, monkeypatch):
    from expengine.store import db

    reads: list[str] = []
    real = db.unreadable
    monkeypatch.setattr(db, "short_of_its_header", lambda path: "short")  # as DuckDB often leaves a file
    monkeypatch.setattr(db, "unreadable", lambda con: reads.append("read") or real(con))
    path = tmp_path / DB_FILE
    for _ in range(3):
        db.close_database(db.open_database(path))
    assert reads == ["read"]  # the first open; then the file is as this process left it
    other = duckdb.connect(str(path))  # another process writes it
    other.execute("CREATE TABLE other_writer (n INTEGER)")
    other.close()
    db.close_database(db.open_database(path))
    assert reads == ["read", "read"]


def test_a_store_that_lent_a_reader_view_keeps_its_file_for_the_readers_cursors(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING)])
    with engine.session() as store:
        view = store.reader()
        assert not store.shed_free_blocks(share=0.0)  # a server's query thread may be reading through it
        assert view.con.execute("SELECT count(*) FROM records").fetchone()[0] == len(BOOKING)  # type: ignore[index]
        view.con.close()


def test_record_tokens_lose_their_key_and_keep_their_counts(make_engine, write_jsonl, tmp_path):
    """`m020_record_tokens_unkeyed`: a store whose counts were keyed by id keeps them, unkeyed, and a
    cycle adds the new records' counts once."""
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND)])
    engine.compact(refine=False)
    engine.close()
    path = tmp_path / "store" / DB_FILE
    con = duckdb.connect(str(path))
    counts = sorted(con.execute("SELECT id, tokens FROM record_tokens").fetchall())
    con.execute("CREATE TABLE keyed (id VARCHAR PRIMARY KEY, tokens INTEGER NOT NULL)")  # as m019 made it
    con.execute("INSERT INTO keyed SELECT * FROM record_tokens")
    con.execute("DROP TABLE record_tokens")
    con.execute("ALTER TABLE keyed RENAME TO record_tokens")
    con.execute("DELETE FROM migrations WHERE name = 'm020_record_tokens_unkeyed'")
    con.close()
    assert counts
    engine = make_engine()
    engine.ingest([write_jsonl("b.jsonl", CHATTER)])
    engine.compact(refine=False)
    with engine.session() as store:
        assert not store.con.execute(
            "SELECT * FROM duckdb_constraints() WHERE table_name = 'record_tokens' AND constraint_type = 'PRIMARY KEY'"
        ).fetchall()
        after = store.con.execute("SELECT id, count(*) FROM record_tokens GROUP BY id").fetchall()
        assert len(after) == len(BOOKING + REFUND + CHATTER) and {n for _, n in after} == {1}
        assert set(counts) <= set(store.con.execute("SELECT id, tokens FROM record_tokens").fetchall())
