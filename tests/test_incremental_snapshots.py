"""Snapshots as Parquet chunks shared by content: a snapshot writes what changed since the last one, a
restore is exact, a kill mid-snapshot leaves nothing listed and its chunks go at the next one, and the
snapshots of the older format (one xz-compressed database) that stores already hold are still read."""

from __future__ import annotations

import json

import duckdb
import pytest
from helpers import BOOKING, CHATTER, REFUND, old_format_snapshot
from test_forget import files_holding

from expengine.lifecycle import snapshot as snapshots
from expengine.lifecycle.snapshot import PACKED_DB, snapshot_database, snapshot_files
from expengine.store.chunks import CHUNK_DIR, MANIFEST
from expengine.store.db import SNAPSHOT_DIR


def table_rows(path, table: str) -> list[tuple]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return sorted(con.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
    finally:
        con.close()


def chunk_names(root) -> set[str]:
    return {p.name for p in (root / CHUNK_DIR).iterdir()}


def test_a_snapshot_after_new_rows_writes_the_new_rows_and_restores_exactly(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING + CHATTER)])
    first = engine.snapshot()
    root = tmp_path / "store" / SNAPSHOT_DIR
    before = chunk_names(root)
    with engine.session() as store:
        live = sorted(store.con.execute("SELECT * FROM records").fetchall(), key=repr)
    engine.ingest([write_jsonl("b.jsonl", REFUND)])
    second = engine.snapshot()
    shared = {p.name for p in snapshot_files(root / first.id)[1:]} & {p.name for p in snapshot_files(root / second.id)}
    assert shared and before <= chunk_names(root)  # the first's chunks stay, most shared with the second
    assert second.written_bytes < second.size_bytes
    with snapshot_database(root / first.id) as path:
        assert table_rows(path, "records") == live
    assert engine.restore(first.id).raw_after == len(BOOKING + CHATTER)
    assert engine.restore(second.id).raw_after == len(BOOKING + CHATTER + REFUND)


def test_a_snapshot_killed_midway_is_never_listed_and_its_chunks_go_at_the_next(
    make_engine, write_jsonl, tmp_path, monkeypatch
):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING)])
    kept = engine.snapshot()
    engine.ingest([write_jsonl("b.jsonl", REFUND)])
    root = tmp_path / "store" / SNAPSHOT_DIR
    listed = chunk_names(root)
    real = snapshots._write_json

    def killed(path, data):
        if path.name == "snapshot.json":
            raise KeyboardInterrupt  # a kill after the chunks and the manifest, before the folder is complete
        real(path, data)

    monkeypatch.setattr(snapshots, "_write_json", killed)
    with pytest.raises(KeyboardInterrupt):
        engine.snapshot()
    monkeypatch.undo()
    assert [s.id for s in engine.snapshots()] == [kept.id]
    assert chunk_names(root) > listed  # the test can fail: the killed one had written chunks
    assert snapshots.collect_chunks(root) > 0 and chunk_names(root) == listed
    engine.close()
    engine = make_engine()
    newest = engine.snapshot()
    assert not list(root.glob(".tmp-*")) and not list((root / CHUNK_DIR).glob(".tmp-*"))
    assert chunk_names(root) == {p.name for s in (kept, newest) for p in snapshot_files(root / s.id)[1:]}
    assert engine.restore(newest.id).raw_after == len(BOOKING + REFUND)


def test_a_restore_killed_while_it_built_its_copy_restores_on_the_rerun(make_engine, write_jsonl, tmp_path):
    """A kill -9 during a restore leaves the half-built copy and its WAL in the store folder; the rerun must
    not replay that WAL onto the new copy (its rows would then disagree with the manifest: "damaged")."""
    import subprocess
    import sys

    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING)])
    first = engine.snapshot()
    engine.ingest([write_jsonl("b.jsonl", REFUND)])
    copy = tmp_path / "store" / (snapshots.TMP_PREFIX + "expengine.duckdb")
    with snapshot_database(tmp_path / "store" / SNAPSHOT_DIR / first.id) as path:
        copy.write_bytes(path.read_bytes())
    killed = (
        "import duckdb, os, sys; con = duckdb.connect(sys.argv[1]); "
        "con.execute('CREATE TEMP TABLE kept AS SELECT * FROM records'); "
        "con.execute('DELETE FROM records'); con.execute('CHECKPOINT'); "
        "con.execute('INSERT INTO records SELECT * FROM kept'); os._exit(9)"
    )
    subprocess.run([sys.executable, "-c", killed, str(copy)], check=False, timeout=120)
    assert copy.with_name(copy.name + ".wal").stat().st_size > 0  # the test can fail: a WAL was left
    assert engine.restore(first.id).raw_after == len(BOOKING)
    assert not list((tmp_path / "store").glob(".tmp-*"))


def test_a_snapshot_of_the_older_format_is_listed_restored_and_forgotten_in(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND)])
    engine.close()
    store = tmp_path / "store"
    old = old_format_snapshot(store, "20260101T000000000000-0ld0")
    engine = make_engine()
    engine.ingest([write_jsonl("b.jsonl", CHATTER)])
    new = engine.snapshot()
    assert [s.id for s in engine.snapshots()] == [new.id, old.name]
    assert not (old / MANIFEST).exists() and (store / SNAPSHOT_DIR / new.id / MANIFEST).exists()
    assert engine.restore(old.name).raw_after == len(BOOKING + REFUND)
    session, marker = BOOKING[1]["session"], BOOKING[1]["content"]
    assert len(files_holding(store / SNAPSHOT_DIR, marker)) >= 2  # the test can fail: in both formats
    result = engine.forget(sessions=[session])
    assert result.snapshots == 2 and not result.snapshots_damaged
    assert files_holding(store, marker) == []
    assert (old / PACKED_DB).exists()  # packed back as it was, without the session
    gone = len([r for r in BOOKING if r.get("session") == session])
    assert json.loads((old / "snapshot.json").read_text())["raw"] == len(BOOKING + REFUND) - gone
    assert engine.restore(new.id).raw_after == len(BOOKING + REFUND + CHATTER) - gone
