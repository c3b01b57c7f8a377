"""A store file's write-ahead log: folded in before the file is replaced, dropped when it belongs to a
file that was replaced (so it can never be replayed)."""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb

from ..errors import StoreError
from .filters import sql_str

log = logging.getLogger("expengine.store")

# DuckDB's error for a WAL written for another database file (the identifier in its header differs)
FOREIGN_WAL = "WAL does not match database file"


def wal_of(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def fold_wal(path: Path) -> None:
    """Replay the closed file's WAL into it and remove it (a checkpoint), so the file holds every commit
    by itself: before it is copied into a new file that replaces it, which would otherwise leave the old
    WAL beside a file it does not match. Nothing to do without a WAL."""
    if not wal_of(path).exists():
        return
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH {sql_str(str(path))} AS folding")
        con.execute("CHECKPOINT folding")
        con.execute("DETACH folding")
    finally:
        con.close()
    if wal_of(path).exists():
        raise StoreError(f"the WAL of {path} could not be folded into it", hint="is another process using the store?")


def drop_foreign_wal(path: Path) -> None:
    """Remove a WAL that DuckDB says belongs to another database file. Only a replaced file leaves one (a
    rewrite or a restore, killed between the swap and the WAL's removal by an older expengine): what it
    logged is in the new file or was meant to go, so it can never be replayed, and keeping it would leave
    the store unopenable (and a forgotten row's bytes on disk)."""
    wal = wal_of(path)
    log.warning(
        f"notice: removed {wal}: a write-ahead log written for an earlier version of the file, so never replayable"
    )
    wal.unlink(missing_ok=True)
