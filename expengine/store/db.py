"""The store folder: one DuckDB file (source of truth), one LanceDB folder (derived index), a lock."""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import time
from pathlib import Path

import duckdb

from ..config import default_store_dir  # noqa: F401  (moved to config; re-exported)
from ..errors import LockedError, StoreError
from .migrations import MIGRATIONS

DB_FILE = "expengine.duckdb"
LANCE_DIR = "lance"
LOCK_FILE = ".lock"
SNAPSHOT_DIR = "snapshots"


def json_ids(value: str | None) -> list[str]:
    """An id list stored as JSON text (`source_ids`, `merged_ids`); empty when missing or malformed."""
    if not value:
        return []
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return []
    return [str(x) for x in parsed] if isinstance(parsed, list) else []


def json_meta(value: str | None) -> dict:
    """A record's `meta` stored as JSON text; empty when missing or malformed."""
    try:
        parsed = json.loads(value) if value else {}
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


class StoreLock:
    """An exclusive advisory lock on the store, so one process writes at a time (cron-safe)."""

    def __init__(self, path: Path, *, timeout: float):
        self.path, self.timeout = path, timeout
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = self._holder(fd)
                    os.close(fd)
                    raise LockedError(
                        f"the store {self.path.parent} is busy ({holder or 'another expengine process'} holds it)",
                        hint="wait for it to finish (a compaction can take minutes) or raise --wait",
                    ) from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        self._fd = fd

    @staticmethod
    def _holder(fd: int) -> str:
        try:
            return os.pread(fd, 64, 0).decode(errors="replace").strip()
        except OSError:
            return ""

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def open_database(path: Path) -> duckdb.DuckDBPyConnection:
    """Connect and apply any migrations not yet applied, in order, each in its own transaction."""
    try:
        con = duckdb.connect(str(path))
    except duckdb.Error as exc:
        raise StoreError(
            f"cannot open the store database {path}: {exc}", hint="is it a DuckDB file from expengine?"
        ) from exc
    con.execute("CREATE TABLE IF NOT EXISTS migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)")
    applied = {row[0] for row in con.execute("SELECT name FROM migrations").fetchall()}
    known = {name for name, _ in MIGRATIONS}
    unknown = applied - known
    if unknown:
        raise StoreError(
            f"the store was written by a newer expengine (migrations {', '.join(sorted(unknown))})",
            hint="upgrade expengine",
        )
    for name, fn in MIGRATIONS:
        if name in applied:
            continue
        con.execute("BEGIN")
        try:
            fn(con)
            con.execute("INSERT INTO migrations VALUES (?, ?)", [name, utcnow()])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
    return con


class arrow_view:
    """`with arrow_view(con, "name", table):` exposes an Arrow table to SQL for the block.

    DuckDB refuses to register while an earlier result is half-fetched (e.g. after `fetchone()`),
    so the pending result is completed first.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, name: str, table):
        self.con, self.name, self.table = con, name, table

    def __enter__(self) -> duckdb.DuckDBPyConnection:
        self.con.complete()
        self.con.register(self.name, self.table)
        return self.con

    def __exit__(self, *exc: object) -> None:
        self.con.complete()
        self.con.unregister(self.name)
