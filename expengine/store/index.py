"""LanceDB: the fast store of vectors and full text, derived from DuckDB and rebuildable from it.

Writes go through lancedb (its tables, indexes and cleanup); reads (searches, counts, rows by id) go
through Lance's own datasets (pylance), which lancedb is built on: `import lancedb` took 0.8 s of a
cold `expengine query`'s 1.05 s of imports, and a query never needs it."""

from __future__ import annotations

import datetime as dt
import os
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .file_guard import FileGuard
from .filters import lance_in
from .held_vectors import HeldFragments, HeldTables, HeldVectors
from .lance_rows import ADDED_COLUMNS, as_table_vectors, float32_rows, lance_session

if TYPE_CHECKING:
    import pyarrow as pa

MEMORIES = "memories"
UNITS = "units"
STATE_COLUMN = {MEMORIES: "state", UNITS: "status"}
# `Index.compact_files` merges fragments smaller than this (or a quarter of the table) into bigger ones
MIN_FRAGMENT_ROWS = 1024
# IVF-PQ partitions a search probes: lancedb's default, which the answers measured before reads moved
# to pylance were given with (pylance's own default is 1)
NPROBES = 20
# With an IVF-PQ index, fetch this many times the candidates and re-rank them by exact cosine (PQ
# distances are coarse); without one the search is exact and it is not asked for.
VECTOR_REFINE_FACTOR = 4
# IVF-PQ training: k-means on this many sampled rows a partition (lancedb's default, 256, read every
# row of a 100k table), for this many rounds at most (lancedb's: 50). Measured in bench/scale.py.
TRAIN_SAMPLE_RATE = 256
TRAIN_ITERATIONS = 50


class Index:
    """Thin wrapper over the two LanceDB tables; every write is keyed by id so replays are harmless.

    Opened tables (lancedb, for writes) and datasets (pylance, for reads) are kept: opening one reads
    its manifest, a few ms a query. Every write in this process goes through `table()` (a store is
    written by one process, which holds its lock) and drops the kept dataset of its table, so the next
    read opens the version it made; a new Index (`Store.reopen`) starts afresh. An
    Index kept while the lock is let go (`Engine` between calls) may miss another process's writes:
    `remember_versions` before letting go and `forget_changed` after taking the lock again reopen
    only the tables whose version files changed meanwhile."""

    def __init__(self, location: str | Path, storage_options: dict[str, str] | None = None, held_mb: int = 0):
        """`location`: a local folder, or an object-storage URI (`s3://bucket/x`) reached with `storage_options`;
        `held_mb`: the most the memories' rows held in memory may take (`query.held_memories_mb`)."""
        self.uri = str(location)
        self.remote = "://" in self.uri
        self.path = Path(location)  # the local folder (of a local index only)
        self.storage_options = dict(storage_options or {})
        self._db: Any = None
        self._tables: dict[str, Any] = {}
        self._datasets: dict[str, Any] = {}
        self._vector_indexed: dict[str, bool] = {}
        self._text_indexed: dict[str, bool] = {}
        self._text_index_lock = threading.Lock()  # a server's reader threads may find it missing at once
        self._seen: dict[str, Any] = {}  # table name -> its version files when the lock was let go
        self._held = HeldTables(held_mb * 2**20)
        self.files = FileGuard()  # searches (`reading`) against deleting old versions' files
        # the full-text tokenizer: "simple" (English, stemmed) or "icu" (segments CJK into words)
        self.tokenizer = "simple"

    @property
    def db(self) -> Any:
        if self._db is None:
            from .lance_import import import_lancedb

            self._db = import_lancedb().connect(self.uri, storage_options=self.storage_options or None)
        return self._db

    def table(self, name: str) -> Any | None:
        table = self._tables.get(name)
        if table is None:
            try:
                table = self._tables[name] = self.db.open_table(name)
            except (FileNotFoundError, ValueError):
                return None
        return table

    def dataset(self, name: str) -> Any | None:
        """The table's Lance dataset at its latest version, for reads; None when the table is missing."""
        dataset = self._datasets.get(name)
        if dataset is None:
            import lance

            try:
                dataset = lance.dataset(
                    f"{self.uri.rstrip('/')}/{name}.lance",
                    storage_options=self.storage_options or None,
                    session=lance_session(),
                )
            except (FileNotFoundError, ValueError):
                return None
            self._datasets[name] = dataset
        return dataset

    def _written(self, name: str) -> None:
        """After a commit through the lancedb table: the next read opens the version it made."""
        self._datasets.pop(name, None)

    def held(self, name: str) -> HeldVectors | None:
        """The table's vectors in memory (`HeldVectors`), read again when the kept dataset is another or
        its version files changed; None for a table that is missing, has a vector index, or is remote."""
        dataset = self.dataset(name)
        if dataset is None or self.remote or self.has_vector_index(name):
            return None
        return self._held.current(name, dataset, self._versions(name))

    def holds_memories(self, *, start: bool = False) -> bool:
        """Whether this process searches the memories' rows held in memory (`held_memories`); `start`: from
        the next search on, reading nothing now."""
        return self._held.holding(start)

    def held_memories(self, *, hold: bool = False) -> HeldFragments | None:
        """The memories' rows in memory (`HeldTables.memories`) from the first call with `hold` on (made when
        a process warms up: a one-off query would read them for its one search); None for a remote table."""
        dataset = None if self.remote or not self._held.holding(hold) else self.dataset(MEMORIES)
        return None if dataset is None else self._held.memories(dataset, self._versions(MEMORIES))

    def nearest(
        self, name: str, vector: np.ndarray, where: str, limit: int, columns: tuple[str, ...] = ()
    ) -> pa.Table | None:
        """The `limit` rows matching `where` (a prefilter) nearest to `vector` by cosine: `id`,
        `_distance` and `columns`. With an IVF-PQ index the PQ distances of `VECTOR_REFINE_FACTOR` times
        the candidates are re-ranked exactly; without one the search is exact."""
        dataset = self.dataset(name)
        if dataset is None:
            return None
        query = {"column": "vector", "q": np.asarray(vector, dtype=np.float32), "k": limit, "metric": "cosine"}
        if self.has_vector_index(name):  # an exact search has nothing to refine (and pays ~3 ms for it)
            query |= {"nprobes": NPROBES, "refine_factor": VECTOR_REFINE_FACTOR}
        return dataset.to_table(nearest=query, filter=where, prefilter=True, columns=["id", "_distance", *columns])

    def text_search(
        self, name: str, words: str, where: str, limit: int, columns: tuple[str, ...] = ()
    ) -> pa.Table | None:
        """The `limit` rows matching `where` (a prefilter) best by BM25 over the full-text index: `id`,
        `_score` and `columns` (`ensure_text_index` first)."""
        dataset = self.dataset(name)
        if dataset is None:
            return None
        return dataset.to_table(
            full_text_query=words, filter=where, prefilter=True, limit=limit, columns=["id", "_score", *columns]
        )

    def _versions(self, name: str) -> Any:
        """What changes with every commit to a table: its version folder (a dropped and remade table gets a
        new one) and the manifest names in it (each commit adds one, a cleanup removes some). On object
        storage that would be a listing per call: a remote table is reopened each time instead."""
        if self.remote:
            return object()  # equal to nothing: `forget_changed` reopens it
        folder = self.path / f"{name}.lance" / "_versions"
        try:
            return os.stat(folder).st_ino, frozenset(os.listdir(folder))
        except FileNotFoundError:
            return None

    def remember_versions(self) -> None:
        """Note each table's version files, before the store lock is let go with this Index kept."""
        self._seen = {name: self._versions(name) for name in (MEMORIES, UNITS)}

    def forget_changed(self) -> None:
        """Drop what is kept about tables another process wrote since `remember_versions`, so the next
        use opens them at their latest version (a table unchanged stays open, its indexes known)."""
        for name, seen in self._seen.items():
            if self._versions(name) != seen:
                self._tables.pop(name, None)
                self._datasets.pop(name, None)
                self._vector_indexed.pop(name, None)
                self._text_indexed.pop(name, None)
        self._seen = {}

    def count(self, name: str, where: str | None = None) -> int:
        dataset = self.dataset(name)
        return 0 if dataset is None else dataset.count_rows(filter=where)

    def vectors(self, name: str, ids: list[str], *, texts: dict[str, str] | None = None) -> dict[str, np.ndarray]:
        """id → stored vector, for those of `ids` the table holds (a filtered read per 5,000 ids); given
        `texts`, their texts go there from the same reads."""
        dataset = self.dataset(name)
        wanted = list(dict.fromkeys(ids))
        found: dict[str, np.ndarray] = {}
        if dataset is None:
            return found
        columns = ["id", "vector", *(["text"] if texts is not None else [])]
        for start in range(0, len(wanted), 5000):  # an IN list of bounded size
            chunk = wanted[start : start + 5000]
            with self.files.reading():
                rows = dataset.to_table(columns=columns, filter=lance_in("id", chunk))
            if not rows.num_rows:  # none held (a rule's sources waiting out the observation window)
                continue
            flat = float32_rows(rows.column("vector"))
            ids_found = rows.column("id").to_pylist()
            if texts is not None:
                texts.update(zip(ids_found, rows.column("text").to_pylist()))
            found.update(zip(ids_found, flat))
        return found

    def add(self, name: str, rows: pa.Table, *, replace: bool = True) -> None:
        """Append rows; with `replace`, first delete any with the same ids (a replay after a crash)."""
        if rows.num_rows == 0:
            return
        table = self.table(name)
        if table is None:
            self._tables[name] = self.db.create_table(name, data=rows)
            self._vector_indexed.pop(name, None)
            self._text_indexed.pop(name, None)
        else:
            if replace:
                self.delete(name, rows.column("id").to_pylist())
            missing = {c: sql for c, sql in ADDED_COLUMNS.items() if c not in table.schema.names}
            if missing:
                table.add_columns(missing)
            table.add(as_table_vectors(rows, table.schema))
        self._written(name)

    def add_missing_columns(self) -> None:
        """Give each table the `ADDED_COLUMNS` it lacks, NULL in every row (what DuckDB holds for rows
        written before them), so that a filter on one reads a table made before it."""
        for name in (MEMORIES, UNITS):
            dataset = self.dataset(name)
            if dataset is not None and any(c not in dataset.schema.names for c in ADDED_COLUMNS):
                table = self.table(name)
                assert table is not None  # its dataset was just read
                table.add_columns({c: sql for c, sql in ADDED_COLUMNS.items() if c not in table.schema.names})
                self._written(name)

    def delete(self, name: str, ids: list[str]) -> None:
        table = self.table(name)
        for start in range(0, len(ids), 5000):
            chunk = ids[start : start + 5000]
            if table is not None and chunk:
                table.delete(lance_in("id", chunk))
        self._written(name)

    def update(self, name: str, ids: list[str], values: dict[str, Any]) -> None:
        table = self.table(name)
        for start in range(0, len(ids), 5000):
            chunk = ids[start : start + 5000]
            if table is not None and chunk:
                table.update(where=lance_in("id", chunk), values=values)
        self._written(name)

    def drop(self, name: str) -> None:
        if self.table(name) is not None:
            self._tables.pop(name, None)
            self._written(name)
            self._vector_indexed.pop(name, None)
            self._text_indexed.pop(name, None)
            with self.files.deleting():
                self.db.drop_table(name)

    def compact_files(self, name: str) -> None:
        """Rewrite the table's small fragments into few: every ingest adds one, and every state change
        rewrites rows into another, and a search pays for each fragment (at 100k memories after a
        compaction: 174 fragments, searches 3x slower than over one). A fragment of a quarter of the
        table's rows or more stays as it is until a tenth of its rows are deleted (Lance's default):
        rewriting it would leave the snapshot taken before a cycle no data file to share with the
        store after it (a 6 MB copy per snapshot on the sample logs). So a table has a handful of
        fragments at most."""
        table = self.table(name)
        if table is not None and (rows := table.count_rows()) > 0:
            table.to_lance().optimize.compact_files(target_rows_per_fragment=max(MIN_FRAGMENT_ROWS, rows // 4))
            table.checkout_latest()
            self._written(name)

    def drop_old_versions(self, name: str) -> None:
        """Delete every version of the table but the latest, and the files only they use. Lance keeps each commit's files (an ingest, a state change, a rebuilt index), and
        a store compacted nightly grew its LanceDB folder to 4x its live data. Only the store-lock holder
        may call it (no write may be in progress); snapshots keep their own links to the files."""
        table = self.table(name)
        if table is not None:
            with self.files.deleting(), warnings.catch_warnings():  # "removes every version but the latest"
                warnings.simplefilter("ignore")
                table.to_lance().cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
            self._written(name)

    def _index_columns(self, table: Any) -> dict[str, str]:
        """The table's indexes: first column -> index name."""
        return {i.columns[0]: i.name for i in table.list_indices()}

    def update_indexes(self, name: str, index_names: list[str] | None = None) -> None:
        """Take the rows written since into the table's indexes (`index_names`, or all): new vectors go to
        the IVF partitions trained before, the text and scalar indexes add them; each index stays one
        piece (`num_indices_to_merge=1`: a delta left per update would cost every search). Rows not
        yet indexed are scanned by every search, so until then the answers are the same, only slower."""
        table = self.table(name)
        if table is not None and table.list_indices():
            only = {} if index_names is None else {"index_names": index_names}
            table.to_lance().optimize.optimize_indices(num_indices_to_merge=1, **only)
            table.checkout_latest()
            self._written(name)

    def refresh_scalar_indexes(self, name: str) -> None:
        """Build the missing ones of a B-tree on `id` (a query reads its hits' sources by id, state
        changes update by id) and on `user`, and a bitmap on the state column (every search prefilters
        on it: at 100k memories the bitmap halves a search); `update_indexes` keeps them current."""
        table = self.table(name)
        if table is not None and table.count_rows() > 0:
            from lancedb.index import Bitmap, BTree

            wanted = {"id": BTree(), STATE_COLUMN[name]: Bitmap()}
            if "user" in table.schema.names:  # a query for a user prefilters on it (any number of users)
                wanted["user"] = BTree()
            existing = self._index_columns(table)
            for column, config in wanted.items():
                if column not in existing:
                    table.create_index(column, config=config, replace=True)
            self._written(name)

    def refresh_text_index(self, name: str, *, rebuild: bool = False) -> None:
        """Add the rows written since to the native full-text index (LanceDB's own, so it works offline), or
        build it where it is missing or `rebuild` is asked (a scrub, whose deleted rows' words must leave)."""
        table = self.table(name)
        if table is not None and table.count_rows() > 0:
            current = self._index_columns(table).get("text")
            if current is not None and not rebuild:
                self.update_indexes(name, [current])
            else:
                from lancedb.index import FTS

                config = FTS(with_position=False, base_tokenizer=self.tokenizer)
                table.create_index("text", config=config, replace=True)
                self._written(name)
            self._text_indexed[name] = True

    def ensure_text_index(self, name: str) -> bool:
        """Build the full-text index of a table that has rows but none (units written by `refine`
        alone, without the index step of a compaction); whether the table can be searched by text. A
        query calls it before its searches start: built from a search thread, the index raced the
        table's other searches and was sometimes not seen."""
        if self._text_indexed.get(name):
            return True
        with self._text_index_lock:
            dataset = self.dataset(name)
            if dataset is None:
                return False
            self._text_indexed[name] = any(
                i.type_url.endswith("InvertedIndexDetails") for i in dataset.describe_indices()
            )
            if not self._text_indexed[name]:
                self.refresh_text_index(name)  # nothing to index in an empty table: it stays unsearchable
            return self._text_indexed[name]

    def has_vector_index(self, name: str) -> bool:
        """Whether the table has a vector index (asked once per table; `ensure_vector_index` updates it)."""
        if name not in self._vector_indexed:
            dataset = self.dataset(name)
            self._vector_indexed[name] = dataset is not None and any(
                "vector" in i.field_names for i in dataset.describe_indices()
            )
        return self._vector_indexed[name]

    def ensure_vector_index(self, name: str, *, min_rows: int, trained: int | None, growth: float) -> int | None:
        """Train an IVF-PQ index once a table has `min_rows` rows (below that, exact search is faster),
        and train it again only once the table holds `growth` times the `trained` rows of the last
        training (`update_indexes` adds the rows between to the partitions trained before). Training
        reads a sample (`TRAIN_SAMPLE_RATE` rows a partition, `TRAIN_ITERATIONS` k-means rounds), not
        the table. Returns the rows the index was trained on; None without an index."""
        table = self.table(name)
        if table is None:
            return None
        rows = table.count_rows()
        current = next((i for i in table.list_indices() if "vector" in i.columns), None)
        if current is None and rows < min_rows:
            return None
        if current is not None:
            # a store indexed before the count was kept: its index was last built on about its indexed rows
            trained = trained or table.index_stats(current.name).num_indexed_rows
            if rows < growth * trained:
                return trained
        from lancedb.index import IvfPq

        config = IvfPq(
            distance_type="cosine",
            num_partitions=partitions(rows),
            max_iterations=TRAIN_ITERATIONS,
            sample_rate=TRAIN_SAMPLE_RATE,
        )
        table.create_index("vector", config=config, replace=True)
        self._written(name)
        self._vector_indexed[name] = True
        return rows


def partitions(rows: int) -> int:
    """IVF partitions for a table of `rows`: the square root (lancedb's rule), at least 16."""
    return max(16, int(rows**0.5))
