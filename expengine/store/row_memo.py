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

The records' memo (`RecordMemo`) holds its columns as numpy and Arrow arrays, found by a sorted array of the ids'
hashes: as a tuple per row it held 55 MB at 100k records and 162 MB at 300k, as columns 8.3 and 24.9
MB, the same rows (`bench/million.py --memo-table 100000`).

The same memo holds the `units` columns queries read (`unit_memo`): the unit candidates' scoring
columns and sources, whether a rule's LanceDB vector embeds its text (the rule slot), the projects'
environment and recovery rules (`query.projects`) and the turns a live note stands for
(`query.retrieve.noted_best`), each of which was a DuckDB query per query."""

from __future__ import annotations

import os
import threading
from collections import namedtuple
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from .db import DB_ALIAS, DB_FILE, in_ids, json_ids
from .vocabulary import UNIT_EMBEDDED_TEXT

if TYPE_CHECKING:  # pyarrow is loaded when a query first reads the records' memo, never by a cron's ingest
    import pyarrow as pa

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
        self._rows: Any = None  # `Rows`, or `Columns` in a `RecordMemo`
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
        return self._held(con, folder, in_transaction=in_transaction)

    def _held(self, con: duckdb.DuckDBPyConnection, folder: Path, *, in_transaction: bool) -> Any:
        """What `_load` read, current for the files in `folder`, or None (see `current`)."""
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


class _Coded:
    """Text that repeats (kinds, states, agents): a code per row into its distinct values."""

    def __init__(self, column: pa.DictionaryArray):
        self.codes = column.indices.fill_null(-1).to_numpy()  # -1: NULL, the last of `values`
        self.values = np.asarray([*column.dictionary.to_pylist(), None], dtype=object)

    def take(self, places: np.ndarray) -> list[Any]:
        return self.values[self.codes[places]].tolist()


class _Plain:
    """Numbers and times with numpy's own Python values (NULL times as NaT give None), or any other
    column through Arrow."""

    def __init__(self, column: pa.Array):
        import pyarrow as pa

        as_numpy = pa.types.is_timestamp(column.type) or (
            column.null_count == 0 and (pa.types.is_floating(column.type) or pa.types.is_integer(column.type))
        )
        self.array: Any = column.to_numpy(zero_copy_only=False) if as_numpy else column

    def take(self, places: np.ndarray) -> list[Any]:
        if isinstance(self.array, np.ndarray):
            return self.array[places].tolist()
        return self.array.take(places).to_pylist()


def _held_column(column: pa.Array) -> _Coded | _Plain:
    import pyarrow as pa

    if pa.types.is_string(column.type) and column.null_count < len(column):
        encoded = column.dictionary_encode()
        if len(encoded.dictionary) * 4 < len(column):
            return _Coded(encoded)
    return _Plain(column)


class Columns:
    """A table's columns as arrays (repeating text as codes) in the order of `hashes`, the process's
    `hash` of each row's id, sorted: ~83 bytes a row and no Python object per row, where a tuple per
    row took ~550. Python's string hash is seeded per process, as is the memo."""

    def __init__(self, con: duckdb.DuckDBPyConnection, select: str, table: str):
        import pyarrow as pa

        cursor = con.cursor()  # a relation of its own: `con` may hold a result not yet fetched
        try:
            cursor.execute(f"USE {DB_ALIAS}")
            arrow = cursor.sql(f"SELECT {select} FROM {table}").to_arrow_table()
        finally:
            cursor.close()
        ids = arrow.column(0)
        hashes = np.fromiter(
            (hash(rid) for part in _pieces(ids) for rid in part.to_pylist()), dtype=np.int64, count=len(ids)
        )
        order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[order]
        self.ids = ids.take(pa.array(order)).combine_chunks()
        by_hash = arrow.take(pa.array(order))
        self.columns = [_held_column(by_hash.column(n).combine_chunks()) for n in range(1, arrow.num_columns)]
        del arrow, by_hash
        # the copies made on the way, which Arrow's allocator would keep (read again after every write
        # that settles): at 300k records the read added 150 MB of RSS without this, 101 with it (it holds 25)
        pa.default_memory_pool().release_unused()

    def __len__(self) -> int:
        return len(self.hashes)

    def rows(self, ids: list[str], make: Any) -> list[Any]:
        """The rows of `ids` it holds, in the order of `ids`, each `make(values)`."""
        import pyarrow as pa

        wanted = np.fromiter((hash(rid) for rid in ids), dtype=np.int64, count=len(ids))
        starts = np.searchsorted(self.hashes, wanted, side="left")
        counts = np.searchsorted(self.hashes, wanted, side="right") - starts
        # every held row whose hash is an asked id's (almost always one or none), asked id by asked id
        firsts = np.cumsum(counts) - counts
        places = np.repeat(starts, counts) + np.arange(int(counts.sum())) - np.repeat(firsts, counts)
        asked = np.repeat(np.asarray(ids, dtype=object), counts).tolist()
        held = self.ids.take(pa.array(places)).to_pylist()
        same = [have == rid for have, rid in zip(held, asked)]  # an id it does not hold may share a hash
        if not any(same):
            return []
        places = places[np.asarray(same)]
        values = [column.take(places) for column in self.columns]
        return list(map(make, zip([rid for rid, kept in zip(asked, same) if kept], *values)))


def _pieces(column: pa.ChunkedArray, size: int = 65536) -> Any:
    """`column` in slices of `size` rows: its ids are Python strings for one slice at a time."""
    for chunk in column.chunks:
        for start in range(0, len(chunk), size):
            yield chunk.slice(start, size)


class RecordMemo(RowMemo):
    """The records' memo (`RECORD_COLUMNS`) as `Columns`: `lookup` and `read` give the rows as `RowMemo`'s
    do; what it holds grows by ~83 bytes a record, not ~550 (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("records", RECORD_COLUMNS)

    def lookup(
        self, con: duckdb.DuckDBPyConnection, folder: Path, ids: list[str], *, in_transaction: bool
    ) -> list[Any] | None:
        held = self._held(con, folder, in_transaction=in_transaction)
        return None if held is None else held.rows(ids, self._make)

    def current(self, con: duckdb.DuckDBPyConnection, folder: Path, *, in_transaction: bool) -> Rows | None:
        raise NotImplementedError("the records' memo answers `lookup` only")

    def _load(self, con: duckdb.DuckDBPyConnection, version: tuple[Any, ...]) -> None:
        self._rows = Columns(con, self._select, self.table)
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
