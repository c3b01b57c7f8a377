"""A `forget` killed after its deletion committed, before its scrub: the next open scrubs, so no file keeps
the text (a rerun of the same forget finds nothing left to delete and could not do it)."""

from __future__ import annotations

import logging
import shutil

import duckdb
import pytest
from helpers import MARKER, OTHERS, SECRET, files_holding, run_offline_python

from expengine.errors import NotFoundError
from expengine.store.db import DB_FILE
from expengine.store.scrub import rewrite_database
from expengine.store.wal import wal_of


class Killed(BaseException):
    """Stands in for SIGKILL at the chosen moment (nothing after it runs in the process)."""


def test_a_forget_killed_before_its_scrub_is_scrubbed_on_next_open(make_engine, write_jsonl, monkeypatch, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", OTHERS + SECRET)])
    engine.close()
    store = tmp_path / "store"
    assert files_holding(store, MARKER)  # the test can fail

    def killed(*args, **kwargs):
        raise Killed

    monkeypatch.setattr("expengine.lifecycle.purge.scrub_index", killed)  # the first step after the commit
    with pytest.raises(Killed):
        make_engine(store=store).forget(sessions=["private"])
    monkeypatch.undo()
    assert files_holding(store, MARKER)  # committed, not yet scrubbed: the old bytes are still there
    reopened = make_engine(store=store)
    with pytest.raises(NotFoundError):  # what the rerun of that forget sees
        reopened.forget(ids=[SECRET[0]["id"]])
    reopened.close()
    assert files_holding(store, MARKER) == []
    assert reopened.stats().raw == len(OTHERS)


def leave_wal(path, sql: str) -> None:
    """Commit `sql` to the DuckDB file `path` in a process that dies before any checkpoint, as a kill
    does: the commit is only in the file's WAL."""
    code = "import duckdb, os, sys\ncon = duckdb.connect(sys.argv[1])\ncon.execute(sys.argv[2])\nos._exit(0)\n"
    run = run_offline_python("-c", code, str(path), sql)
    assert run.returncode == 0, run.stderr
    assert wal_of(path).exists()


def test_a_rewrite_keeps_the_commits_still_in_the_wal_and_leaves_no_wal_behind(make_engine, write_jsonl, tmp_path):
    """The kill test's failure: DETACH left a WAL, the scrub's rewrite then swapped a new file in beside
    it, and the store could not be opened again ("WAL does not match database file")."""
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", OTHERS)])
    engine.close()
    path = tmp_path / "store" / DB_FILE
    leave_wal(path, "INSERT INTO history VALUES ('only-in-the-wal', now(), 'note', NULL, NULL)")
    rewrite_database(path)
    assert not wal_of(path).exists()
    con = duckdb.connect(str(path), read_only=True)  # what failed: the old WAL beside the new file
    try:
        assert con.execute("SELECT count(*) FROM history WHERE item_id = 'only-in-the-wal'").fetchone() == (1,)
    finally:
        con.close()


def test_a_store_beside_another_files_wal_opens_and_drops_it(make_engine, write_jsonl, tmp_path, caplog):
    """A store an older version left that way (killed between the swap and the WAL's removal) opens
    again, with a notice, and keeps every record."""
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", OTHERS)])
    engine.close()
    path = tmp_path / "store" / DB_FILE
    other = tmp_path / "other.duckdb"
    leave_wal(other, "CREATE TABLE t AS SELECT 1 AS i")
    shutil.copy(wal_of(other), wal_of(path))
    with pytest.raises(duckdb.IOException, match="WAL does not match"):  # the test can fail
        duckdb.connect(str(path), read_only=True)
    with caplog.at_level(logging.WARNING, logger="expengine.store"):
        reopened = make_engine(store=tmp_path / "store")
        assert reopened.stats().raw == len(OTHERS)
    reopened.close()
    assert not wal_of(path).exists()
    assert any("write-ahead log written for an earlier version" in r.getMessage() for r in caplog.records)
