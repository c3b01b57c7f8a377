"""The columns a query scores by (state, weight, utility, last access, provenance) for every row of
`records`, in memory in a warm process (`Engine` keeps one across calls, a server's reader threads
share it). At 100k memories the DuckDB join that fetched them was the largest step of a warm query
after LanceDB's searches: it scans the whole table for ~200 ids.

Valid while the database files are unchanged: every commit appends to the WAL or rewrites the
file (a checkpoint, a restore, another process's writes between this process's calls), so their
identity, size and modification time are the change counter, and checking it is two `stat` calls.
Never used inside a transaction (its own writes are not in the files yet). Read again only when two
lookups in a row see the same files: a stream of writes (queries that touch what they show) keeps
reading DuckDB instead of reloading the table after every write."""

from __future__ import annotations

import os
import threading
from collections import namedtuple
from pathlib import Path
from typing import Any

import duckdb

from .db import DB_FILE

# what `query.score.rank` reads of a record (its text comes from LanceDB)
RECORD_COLUMNS = (
    "id",
    "kind",
    "agent",
    "category",
    "state",
    "ts",
    "last_access",
    "weight",
    "utility",
    "merged_ids",
)


def files_version(folder: Path) -> tuple[Any, ...]:
    """What changes with every commit to a store's database: the file's and the WAL's identity,
    size and modification time."""
    out: list[Any] = []
    for name in (DB_FILE, DB_FILE + ".wal"):
        try:
            st = os.stat(folder / name)
        except FileNotFoundError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class RowMemo:
    """`columns` of every row of `table` (the first is its id), as of one version of the files."""

    def __init__(self, table: str = "records", columns: tuple[str, ...] = RECORD_COLUMNS):
        self.table, self.columns = table, columns
        self.row: Any = namedtuple("Row", columns)  # type: ignore[misc]  # what `lookup` and `read` return
        self._rows: dict[str, Any] | None = None
        self._version: tuple[Any, ...] | None = None
        self._seen: tuple[Any, ...] | None = None  # the version the last lookup saw
        self._lock = threading.Lock()

    def lookup(
        self, con: duckdb.DuckDBPyConnection, folder: Path, ids: list[str], *, in_transaction: bool
    ) -> list[Any] | None:
        """The rows of `ids` it holds (`row` tuples: no dict per row, a query asks for thousands of
        unit sources), or None when it cannot answer now (inside a transaction, or the files in
        `folder` changed): then the caller `read`s DuckDB."""
        if in_transaction:
            return None
        version = files_version(folder)
        with self._lock:
            if self._version != version:
                stable, self._seen = self._seen == version, version
                if not stable:
                    return None
                self._load(con, version)
            rows = self._rows
        assert rows is not None
        return [rows[i] for i in ids if i in rows]

    def read(self, con: duckdb.DuckDBPyConnection, ids: list[str]) -> list[Any]:
        """The rows of `ids` from DuckDB, as `lookup` gives them."""
        if not ids:
            return []
        sql = f"SELECT {', '.join(self.columns)} FROM {self.table} WHERE {self.columns[0]} IN (SELECT unnest(?))"
        return [self.row._make(r) for r in con.execute(sql, [ids]).fetchall()]

    def load(self, con: duckdb.DuckDBPyConnection, folder: Path) -> int:
        """Read the table now (a server at start, `Engine.warm`); how many rows."""
        version = files_version(folder)
        with self._lock:
            self._seen = version
            self._load(con, version)
            return len(self._rows or ())

    def _load(self, con: duckdb.DuckDBPyConnection, version: tuple[Any, ...]) -> None:
        cursor = con.execute(f"SELECT {', '.join(self.columns)} FROM {self.table}")
        self._rows = {row[0]: self.row._make(row) for row in cursor.fetchall()}
        self._version = version
