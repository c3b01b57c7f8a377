"""The columns a query scores by (state, weight, utility, last access, provenance) for every row of
`records`, in memory in a warm process (`Engine` keeps one across calls, a server's reader threads
share it). At 100k memories the DuckDB join that fetched them was the largest step of a warm query
after LanceDB's searches: it scans the whole table for ~200 ids.

Valid while the database files are unchanged: every commit appends to the WAL or rewrites the
file (a checkpoint, a restore, another process's writes between this process's calls), so their
identity, size and modification time are the change counter, and checking it is two `stat` calls.
Never used inside a transaction (its own writes are not in the files yet). Read again only when two
lookups in a row see the same files: a stream of writes (queries that touch what they show) keeps
reading DuckDB instead of reloading the table after every write.

The same memo holds the `units` columns queries read (`unit_memo`): the unit candidates' scoring
columns and sources, whether a rule's LanceDB vector embeds its text (the rule slot), the projects'
environment and recovery rules (`query.projects`) and the turns a live note stands for
(`query.retrieve.noted_best`), each of which was a DuckDB query per query."""

from __future__ import annotations

import os
import threading
from collections import namedtuple
from pathlib import Path
from typing import Any

import duckdb

from .db import DB_FILE, in_ids, json_ids
from .vocabulary import UNIT_EMBEDDED_TEXT

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
    "user",
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


# what queries read of a unit; `sources` is its parsed `source_ids`, `text_keyed` whether its LanceDB
# vector embeds its text (`vocabulary.UNIT_EMBEDDED_TEXT`: an intent rule's embeds its condition);
# a rule's `condition` and `action` tell which rules of one prompt give the same fix (query/like_rules.py)
UNIT_COLUMNS = (
    "id",
    "kind",
    "agent",
    "category",
    "status",
    "subject",
    "attribute",
    "updated",
    "as_of",
    "last_used",
    "weight",
    "utility",
    "sources",
    "text",
    "text_keyed",
    "user",
    "quotes",
    "condition",
    "action",
)


class Rows(dict):
    """Rows by id as of one version of the files, with what is derived from them (`derived`)."""

    def __init__(self, rows: Any):
        super().__init__(rows)
        self._derived: dict[str, Any] = {}
        self._lock = threading.Lock()

    def derived(self, name: str, make: Any) -> Any:
        """`make(self)`, computed once for these rows (an index over them a query would rebuild)."""
        with self._lock:
            if name not in self._derived:
                self._derived[name] = make(self)
            return self._derived[name]


class RowMemo:
    """`columns` of every row of `table` (the first is its id), as of one version of the files.
    `expressions`: the SQL of a column that is not one of the table's (`col AS name`), and `prepare`
    what is done to each row as read (both paths, memory and DuckDB, give the same rows)."""

    def __init__(
        self,
        table: str = "records",
        columns: tuple[str, ...] = RECORD_COLUMNS,
        expressions: dict[str, str] | None = None,
        prepare: Any = None,
    ):
        self.table, self.columns = table, columns
        self._select = ", ".join(f"{(expressions or {})[c]} AS {c}" if c in (expressions or {}) else c for c in columns)
        row: Any = namedtuple("Row", columns)  # type: ignore[misc]
        self.row = row  # what `lookup` and `read` return
        self._make = row._make if prepare is None else lambda r: row._make(prepare(r))
        self._rows: Rows | None = None
        self._version: tuple[Any, ...] | None = None
        self._seen: tuple[Any, ...] | None = None  # the version the last lookup saw
        self._lock = threading.Lock()

    def lookup(
        self, con: duckdb.DuckDBPyConnection, folder: Path, ids: list[str], *, in_transaction: bool
    ) -> list[Any] | None:
        """The rows of `ids` it holds (`row` tuples: no dict per row, a query asks for thousands of
        unit sources), or None when it cannot answer now (inside a transaction, or the files in
        `folder` changed): then the caller `read`s DuckDB."""
        rows = self.current(con, folder, in_transaction=in_transaction)
        return None if rows is None else [rows[i] for i in ids if i in rows]

    def current(self, con: duckdb.DuckDBPyConnection, folder: Path, *, in_transaction: bool) -> Rows | None:
        """Every row by id as `lookup` holds them, or None when it cannot answer now (read once a query:
        its several reads of one table then see one version, and a stream of writes one miss each)."""
        if in_transaction:
            return None
        version = files_version(folder)
        with self._lock:
            if self._version != version:
                stable, self._seen = self._seen == version, version
                if not stable:
                    return None
                self._load(con, version)
            return self._rows

    def read(self, con: duckdb.DuckDBPyConnection, ids: list[str]) -> list[Any]:
        """The rows of `ids` from DuckDB, as `lookup` gives them."""
        if not ids:
            return []
        where, params = in_ids(self.columns[0], ids)
        return self.read_where(con, where, params)

    def read_where(self, con: duckdb.DuckDBPyConnection, where: str, params: list[Any]) -> list[Any]:
        """The rows matching the SQL condition `where`, from DuckDB, as `lookup` gives them."""
        cursor = con.execute(f"SELECT {self._select} FROM {self.table} WHERE {where}", params)
        return [self._make(r) for r in cursor.fetchall()]

    def load(self, con: duckdb.DuckDBPyConnection, folder: Path) -> int:
        """Read the table now (a server at start, `Engine.warm`); how many rows."""
        version = files_version(folder)
        with self._lock:
            self._seen = version
            self._load(con, version)
            return len(self._rows or ())

    def _load(self, con: duckdb.DuckDBPyConnection, version: tuple[Any, ...]) -> None:
        cursor = con.execute(f"SELECT {self._select} FROM {self.table}")
        self._rows = Rows((row[0], self._make(row)) for row in cursor.fetchall())
        self._version = version


def _parsed_sources(row: tuple) -> tuple:
    sources = UNIT_COLUMNS.index("sources")
    return (*row[:sources], json_ids(row[sources]), *row[sources + 1 :])


def unit_memo() -> RowMemo:
    """The `units` columns queries read (`UNIT_COLUMNS`), kept like the records'."""
    return RowMemo(
        "units",
        UNIT_COLUMNS,
        {"sources": "source_ids", "text_keyed": f"coalesce(({UNIT_EMBEDDED_TEXT}) = text, false)"},
        _parsed_sources,
    )
