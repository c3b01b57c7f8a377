"""Leave no copy of deleted rows in the store's files (for `forget`).

Deleting a row is not enough for privacy: DuckDB keeps the old bytes in free blocks of its file
(CHECKPOINT and VACUUM do not overwrite them), and Lance only marks a row deleted, keeping it in its
data file, in older table versions and in the old full-text index. So the DuckDB file is copied into
a fresh one, and each Lance table is compacted with every deletion materialised, its text index
rebuilt and its older versions dropped. Every step replaces files atomically, so a kill leaves either
the old or the new file, never half of one.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from .db import BLOCK_SIZE
from .filters import sql_str
from .index import Index
from .wal import fold_wal, wal_of

FRESH_SUFFIX = ".fresh"


def rewrite_database(path: Path) -> None:
    """Copy every table (with constraints and indexes) into a new file and swap it in.

    The file must be closed (no open connection); a WAL it still has is folded in first, so the new file
    replaces both."""
    fold_wal(path)
    fresh = path.with_name(path.name + FRESH_SUFFIX)
    fresh.unlink(missing_ok=True)  # left by a process killed while writing it
    wal_of(fresh).unlink(missing_ok=True)
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH {sql_str(str(path))} AS old_db (READ_ONLY)")
        con.execute(f"ATTACH {sql_str(str(fresh))} AS fresh_db (BLOCK_SIZE {BLOCK_SIZE})")
        con.execute("COPY FROM DATABASE old_db TO fresh_db")
        con.execute("DETACH old_db")
        con.execute("CHECKPOINT fresh_db")
        con.execute("DETACH fresh_db")
    finally:
        con.close()
    os.replace(fresh, path)


def scrub_index(index: Index, names: list[str]) -> None:
    """Rewrite the named Lance tables so rows deleted from them survive in no data, index or version file."""
    for name in names:
        table = index.table(name)
        if table is None:
            continue
        if not table.count_rows():  # nothing left: dropping it takes the text index with it
            index.drop(name)
            continue
        table.to_lance().optimize.compact_files(materialize_deletions=True, materialize_deletions_threshold=0.0)
        table.checkout_latest()
        index.refresh_text_index(name, rebuild=True)
        index.drop_old_versions(name)
