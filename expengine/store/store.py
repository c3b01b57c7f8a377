"""`Store`: one open store folder. It owns the DuckDB connection, the LanceDB index, the config, the
history log and the embedding cache; ingest, lifecycle and query functions take it as their first
argument. It knows nothing of locks or models beyond the embedder its cache is keyed by: `Engine`
takes the lock and opens a Store per operation."""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import duckdb

from ..config import Config
from ..models.embedder import MINILM, Embedder, LazyEmbedder, packaged_model
from .db import DB_ALIAS, DB_FILE, LANCE_DIR, RECENT_DIR, close_database, open_database, utcnow
from .embeddings import EmbeddingCache, VectorMemo
from .index import Index
from .lance_rows import storage_options
from .recent_vectors import RecentVectors
from .row_memo import RecordMemo, RowMemo, unit_memo
from .scrub import rewrite_database

# `Store.shed_free_blocks` rewrites a database file once more than this share of its blocks is free
FREE_SHARE = 0.2
# and a file over LARGE_FILE bytes once more than LARGE_FREE_SHARE: a rewrite copies the whole file (26 CPU s
# for a 1M-record store's 460 MB, every other night), and a cycle's writes reuse the blocks the last freed, so
# the free share settles (near a quarter on bench/nights.py) instead of growing
LARGE_FILE = 256 * 2**20
LARGE_FREE_SHARE = 0.5


def store_index(store_dir: Path, config: Config) -> Index:
    """The store's LanceDB: its `lance/` folder, or the object-storage URI of `[index] uri`."""
    cfg = config.index
    if cfg.uri:
        return Index(cfg.uri.rstrip("/"), storage_options(cfg.endpoint, cfg.region))
    return Index(store_dir / LANCE_DIR, held_mb=config.query.held_memories_mb)


class Store:
    """DuckDB (the truth) + LanceDB (the derived index) + config + embedding cache, for one folder."""

    def __init__(
        self,
        path: Path,
        *,
        config: Config,
        embedder: Embedder,
        read_only: bool = False,
        index: Index | None = None,
        memo: VectorMemo | None = None,
        host: duckdb.DuckDBPyConnection | None = None,
        rows: RecordMemo | None = None,
        unit_rows: RowMemo | None = None,
        row_group_rows: int | None = None,
    ):
        """`index`, `memo`, `host`, `rows` and `unit_rows`: kept from an earlier Store on the same folder (`Engine`
        between calls), so open tables, vectors and rows already read and the DuckDB instance the file
        is attached to (`database_host`) are not made again; the index must have been checked against
        other processes' writes (`Index.forget_changed`; the row memos check themselves). `row_group_rows`:
        as `open_database`'s, kept for a reopen."""
        self.dir = Path(path)
        self.config = config
        self.embedder = embedder
        self.read_only = read_only  # this user cannot write the folder: reads only, no healing
        self._host = host
        self._row_group_rows = row_group_rows
        self.con: duckdb.DuckDBPyConnection = open_database(
            self.dir / DB_FILE, read_only=read_only, host=host, row_group_rows=row_group_rows
        )
        self.index = index or store_index(self.dir, config)
        self.index.tokenizer = self.text_tokenizer
        self.recent_vectors = RecentVectors(self.dir / RECENT_DIR)
        self.embeddings = EmbeddingCache(self.con, embedder, memo, self.index, recent=self.recent_vectors)
        self.rows = rows or RecordMemo()  # the records' scoring columns, in memory while the files are unchanged
        self.unit_rows = unit_rows or unit_memo()  # the units' columns queries read, the same way
        self._depth = 0
        self._lent = False  # a `reader` view was made: another thread may hold a cursor on this connection

    @property
    def in_transaction(self) -> bool:
        return bool(self._depth)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One DuckDB transaction for the block; nested blocks join the outer one, so a compaction step
        that calls a function with its own transaction still commits once (readers never see half)."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self.con.execute("BEGIN")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self.con.execute("ROLLBACK")
            raise
        self._depth = 0
        self.con.execute("COMMIT")

    def close(self) -> None:
        if self.con is not None:
            close_database(self.con)
            self.con = None  # type: ignore[assignment]

    def reopen(self) -> None:
        """Reconnect after the files were replaced underneath (a snapshot restore). A process that held
        the memories' rows (a warmed server) holds the restored ones from its next search on."""
        held = self.index.holds_memories()
        self.close()
        self.con = open_database(
            self.dir / DB_FILE, read_only=self.read_only, host=self._host, row_group_rows=self._row_group_rows
        )
        self.index = store_index(self.dir, self.config)
        self.index.tokenizer = self.text_tokenizer
        self.index.holds_memories(start=held)
        self.embeddings = EmbeddingCache(
            self.con, self.embedder, self.embeddings.memo, self.index, recent=self.recent_vectors
        )

    def shed_free_blocks(self, *, share: float | None = None) -> bool:
        """Rewrite the database into a fresh file (`rewrite_database`) when over `share` of its blocks
        are free: DuckDB reuses free blocks but never gives them back, and a cycle rewrites enough rows
        to leave a quarter of the file free (2.8 of 11.2 MB after three cycles of the sample logs).
        `share`: FREE_SHARE, or LARGE_FREE_SHARE for a file over LARGE_FILE. Whether it did. Holds the
        store lock, as a restore does. Never once a `reader` view was made (a server's query threads):
        closing the connection would pull the file from under their cursors."""
        if self.read_only or self._lent:
            return False
        self.con.execute("CHECKPOINT")  # a cycle's deleted rows free their blocks only at a checkpoint
        total, free, block = self.con.execute(
            "SELECT total_blocks, free_blocks, block_size FROM pragma_database_size() "
            "WHERE database_name = current_database()"
        ).fetchone()  # type: ignore[misc]
        if share is None:
            share = LARGE_FREE_SHARE if total * block > LARGE_FILE else FREE_SHARE
        if not total or free <= share * total:
            return False
        close_database(self.con)
        rewrite_database(self.dir / DB_FILE)
        self.con = open_database(self.dir / DB_FILE, host=self._host, row_group_rows=self._row_group_rows)
        self.embeddings = EmbeddingCache(
            self.con, self.embedder, self.embeddings.memo, self.index, recent=self.recent_vectors
        )
        return True

    @property
    def text_tokenizer(self) -> str:
        """ICU word segmentation (splits Chinese into words, and still stems English) for multilingual
        and mixed stores; English stores keep the simple tokenizer with stemming."""
        cfg = self.config.embedder
        return "simple" if packaged_model(cfg.model) == MINILM and not cfg.model_path else "icu"

    def choose_embedder(self, model: str, *, explicit: bool = False) -> bool:
        """Switch the store to the packaged `model` and record it in its config.toml: an empty store on
        `auto` at its first ingest, or any store when `explicit` (`reindex --model`, which re-embeds).
        False if it cannot switch (an embedder was passed in, a model folder or, unless explicit, a model
        is configured)."""
        cfg = self.config.embedder
        if not isinstance(self.embedder, LazyEmbedder) or (cfg.model != "auto" and not explicit) or cfg.model_path:
            return False
        import tomli_w
        import tomllib

        from ..config import CONFIG_FILE

        path = self.dir / CONFIG_FILE
        data = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        data.setdefault("embedder", {})["model"] = model
        path.write_text(tomli_w.dumps(data), encoding="utf-8")
        cfg.model = model
        self.use_embedder(self.embedder.with_model(model))
        self.index.tokenizer = self.text_tokenizer
        return True

    def use_embedder(self, embedder: Embedder) -> None:
        """Embed with `embedder` from now on (`vectors.settle_encoder`: the one that wrote the vectors)."""
        if embedder is not self.embedder:
            self.embedder = embedder
            self.embeddings = EmbeddingCache(
                self.con, embedder, self.embeddings.memo, self.index, recent=self.recent_vectors
            )

    def reader(self) -> "Store":
        """A view for another thread: its own DuckDB cursor (a consistent MVCC read while this Store writes)
        and embedding cache on it, sharing the config, index and embedder. Close the view's `con` only."""
        self._lent = True
        view = copy.copy(self)
        view.con = self.con.cursor()
        view.con.execute(f"USE {DB_ALIAS}")
        view.embeddings = EmbeddingCache(
            view.con, self.embedder, self.embeddings.memo, self.index, persist=False, recent=self.recent_vectors
        )
        view._depth = 0
        return view

    def history_log(
        self, item_id: str, action: str, detail: Any = None, *, run_id: str | None = None, at: Any = None
    ) -> None:
        """Append to the per-item history that `show` displays (why a thing was kept or forgotten)."""
        text = detail if isinstance(detail, str) or detail is None else json.dumps(detail, default=str)
        self.con.execute("INSERT INTO history VALUES (?, ?, ?, ?, ?)", [item_id, at or utcnow(), action, text, run_id])

    @contextmanager
    def rehearsal(self, scratch: Path) -> Iterator["Store"]:
        """A throw-away copy of this store for a dry run, without copying a file: the same DuckDB
        connection inside one transaction that is always rolled back (snapshot isolation makes it a
        private copy; a crash commits nothing), and an empty LanceDB in `scratch`, where writes to
        tables it lacks are no-ops (compaction steps read DuckDB only)."""
        view = copy.copy(self)
        view.index = Index(scratch)
        view.index.tokenizer = self.index.tokenizer
        self.con.execute("BEGIN")
        view._depth = 1  # the steps' own transactions join this one
        try:
            yield view
        finally:
            self.con.execute("ROLLBACK")

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
