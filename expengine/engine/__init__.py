"""`Engine`: the library every command is a method of. The CLI only parses, calls and renders."""

from __future__ import annotations

import contextlib
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import duckdb

from ..config import Config, default_store_dir
from ..errors import TooLargeError
from ..models.embedder import Embedder, LazyEmbedder
from ..models.llm import LLM
from ..store.db import INGEST_ROW_GROUP_ROWS, LOCK_FILE, SCRUB_PENDING, StoreLock, database_host, store_errors
from ..store.embeddings import VectorMemo
from ..store.index import Index
from ..store.permissions import check_store_dir, make_store_dir, private_files
from ..store.reindex import heal_pending, rebuild_if_pending
from ..store.row_memo import RecordMemo, unit_memo
from ..store.store import Store
from ..store.vectors import record_encoder, settle_encoder
from .agent_logs import AgentLogs
from .coding import Coding
from .explain import Explain
from .upkeep import Upkeep

if TYPE_CHECKING:
    import datetime as dt

    from ..ingest.pipeline import IngestResult
    from ..lifecycle.clusters import ClusterReport
    from ..lifecycle.compact import CompactReport
    from ..lifecycle.decay import DecayReport
    from ..lifecycle.goals import GoalCleanupReport
    from ..lifecycle.purge import PurgeReport
    from ..lifecycle.refine import RefineReport
    from ..query.hits import QueryResult
    from ..store.stats import Stats


class Engine(Upkeep, Explain, AgentLogs, Coding):
    """One store folder: call methods with keyword arguments, close it (or use `with`) when done.

    An Engine holds no lock between calls: each public method takes the store lock, opens the
    store, does its work and closes it again, while the models stay loaded in this object. So an
    agent may keep an Engine for its whole life without blocking a cron `compact` or CLI queries;
    a call made while another process holds the store waits up to `lock_timeout` seconds. Use
    `with engine.session():` to keep the store open (and locked) across several calls.

    Between calls only the DuckDB file is let go (DuckDB lets one process at a time open it to
    write): it is detached from an in-memory DuckDB this Engine keeps (`database_host`). The LanceDB
    tables stay open (reopened only when another process wrote them since, `Index.forget_changed`),
    and so do the vectors already read (`VectorMemo`).
    """

    def __init__(
        self,
        *,
        store: str | Path | None = None,
        config: Config | None = None,
        overrides: dict[str, Any] | None = None,
        lock_timeout: float = 30.0,
        embedder: Embedder | None = None,
        llm: LLM | None = None,
        create: bool = True,
    ):
        """`create=False`: a missing store folder is an error (exit 3) instead of a new empty store, for
        commands that only read. A path that is not a store (a file, a folder of other things) is refused."""
        self.store_dir = default_store_dir() if store is None else Path(store).expanduser()
        check_store_dir(self.store_dir)
        base = config or Config.load(self.store_dir)
        self.config = base.with_overrides(overrides) if overrides else base
        make_store_dir(self.store_dir, create=create)
        self._lock = StoreLock(self.store_dir / LOCK_FILE, timeout=lock_timeout)
        self._guard = threading.RLock()  # one operation at a time per Engine; nested calls reuse the store
        self._store: Store | None = None
        self._held = False
        self._index: Index | None = None  # the LanceDB tables, kept open between calls
        self._memo = VectorMemo()
        self._rows = RecordMemo()
        self._unit_rows = unit_memo()
        self._host: Any = None  # the in-memory DuckDB the store's file is attached to per call
        self._reembedding = False  # reindex: the store may hold another encoder's vectors, which it replaces
        self._encoder_written = False  # the open store's encoder record is in store_meta already
        cfg = self.config.embedder
        # model: "auto" is MiniLM until a new store's first ingest picks (Store.choose_embedder; adopted at release)
        self.embedder: Embedder = embedder or LazyEmbedder(
            cfg.model_path, batch_size=cfg.batch_size, model=cfg.model, encoder=cfg.encoder
        )
        self._llm = llm

    # --- opening the store per operation -------------------------------------------------------
    @contextmanager
    def session(self, *, heal: bool = True, row_group_rows: int | None = None) -> Iterator[Store]:
        """The open store for the block: lock, open (healing an interrupted index write), close, unlock
        (`row_group_rows`: `open_database`'s, for a store it opens; one held open keeps its own)."""
        with self._guard, private_files(), store_errors(self.store_dir):
            if self._store is not None:
                yield self._store
                return
            self._lock.acquire()
            try:
                if self._index is not None:
                    self._index.forget_changed()
                if self._host is None:
                    self._host = database_host()
                store = Store(
                    self.store_dir,
                    config=self.config,
                    embedder=self.embedder,
                    read_only=self._lock.read_only,
                    index=self._index,
                    memo=self._memo,
                    host=self._host,
                    rows=self._rows,
                    unit_rows=self._unit_rows,
                    row_group_rows=row_group_rows,
                )
            except BaseException:
                self._index = None
                self._lock.release()
                raise
            self._store = store
            try:
                # before healing, which embeds; a store whose record is written needs no `_remember_encoder`
                self._encoder_written = settle_encoder(store, check=not self._reembedding)
                self.embedder = store.embedder  # on `auto`, the encoder of the store's vectors from now on
                if not store.read_only:
                    _heal(store, pending=heal)
                yield store
            finally:
                if not self._held:
                    self._release()

    def _release(self) -> None:
        store, self._store = self._store, None
        try:
            if store is not None:
                if not self._encoder_written:  # a count and an insert per call otherwise, queries included
                    _remember_encoder(store)
                store.close()
                self.embedder = store.embedder  # a new store's first ingest may have picked its model
                self._index = store.index  # a restore gave the store a new one
                self._index.remember_versions()
        except BaseException:
            self._index = self._host = None  # a file that failed to detach goes with its DuckDB instance
            raise
        finally:
            self._lock.release()

    @property
    def store(self) -> Store:
        """The open store, kept open (and locked) until `close()`: for scripts and tests that reach into
        SQL. While held, this Engine blocks other processes."""
        store = self._store
        if self._held and store is not None:  # no guard: a server's readers must not wait for the writer
            return store
        with self._guard:
            if self._store is None:
                with self.session():
                    self._held = True
            self._held = True
            assert self._store is not None
            return self._store

    def close(self) -> None:
        with self._guard:
            if self._held:
                self._held = False
                self._release()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- models, loaded once per Engine and kept across operations -------------------------------
    @property
    def llm(self) -> LLM | None:
        """The refinement model, loaded on first use; None with `llm.mode = "template"`."""
        if self._llm is None:
            from ..models.llm import get_llm

            self._llm = get_llm(self.config.llm)
        return self._llm

    def _load_llm(self) -> LLM | None:
        return self.llm

    # --- ingest and the store ------------------------------------------------------------------
    def ingest(
        self,
        paths: list[str],
        *,
        fmt: str = "auto",
        strict: bool = False,
        agent: str | None = None,
        user_field: str | None = None,
        outcomes: list[str] | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> "IngestResult":
        """Validate, redact, assess, embed and store events from log files (native JSONL, openai-chat
        runs, coding-agent trajectories), then the `outcomes` reports grading them; `user_field`: the users' field."""
        from ..ingest.pipeline import ingest

        with self.session(row_group_rows=INGEST_ROW_GROUP_ROWS) as store:  # each batch records the encoder
            options: dict[str, Any] = {"strict": strict, "agent": agent, "user_field": user_field, "outcomes": outcomes}
            return ingest(store, paths, fmt=fmt, on_progress=on_progress, **options)

    def stats(self) -> "Stats":
        from ..store.stats import store_stats

        with self.session() as store:
            return store_stats(store)

    # --- compaction (owner: lifecycle/compact.py) ----------------------------------------------
    def compact(
        self,
        *,
        dry_run: bool = False,
        refine: bool = True,
        max_llm_calls: int | None = None,
        full: bool = False,
        now: "dt.datetime | None" = None,
    ) -> "CompactReport":
        """One forgetting cycle (snapshot, then the declared steps); `now` fakes the clock."""
        from ..lifecycle.compact import compact

        with self.session() as store:
            return compact(
                store, self._load_llm, dry_run=dry_run, refine=refine, max_llm_calls=max_llm_calls, full=full, now=now
            )

    def decay(
        self, *, dry_run: bool = False, run_id: str | None = None, now: "dt.datetime | None" = None
    ) -> "DecayReport":
        from ..lifecycle.decay import decay

        with self.session() as store:
            return decay(store, dry_run=dry_run, run_id=run_id, now=now)

    def goal_cleanup(
        self, *, dry_run: bool = False, run_id: str | None = None, now: "dt.datetime | None" = None
    ) -> "GoalCleanupReport":
        from ..lifecycle.goals import goal_cleanup

        with self.session() as store:
            return goal_cleanup(store, dry_run=dry_run, run_id=run_id, now=now)

    def prune_clusters(
        self, *, dry_run: bool = False, run_id: str | None = None, now: "dt.datetime | None" = None
    ) -> "ClusterReport":
        from ..lifecycle.clusters import prune_clusters

        with self.session() as store:
            return prune_clusters(store, dry_run=dry_run, run_id=run_id, now=now)

    def purge(
        self, *, dry_run: bool = False, run_id: str | None = None, now: "dt.datetime | None" = None
    ) -> "PurgeReport":
        from ..lifecycle.purge import purge

        with self.session() as store:
            return purge(store, dry_run=dry_run, run_id=run_id, now=now)

    def records(
        self,
        *,
        ids: list[str] | None = None,
        id_prefix: str | None = None,
        agent: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Raw records by id list, id prefix and agent, newest first (integrations keep keys of their own)."""
        from ..store.listing import list_records

        with self.session() as store:
            return list_records(store, ids=ids, id_prefix=id_prefix, agent=agent, limit=limit, offset=offset)

    def weights(self) -> dict[str, Any]:
        """Weight distribution of active memories and units; the categories forgotten most."""
        from ..lifecycle.growth import weights

        with self.session() as store:
            return weights(store)

    # --- refinement and units (owner: lifecycle/refine) ----------------------------------------
    def refine(
        self,
        *,
        dry_run: bool = False,
        run_id: str | None = None,
        max_llm_calls: int | None = None,
        time_limit_s: float | None = None,
    ) -> "RefineReport":
        """Turn each changed cluster into grounded knowledge units (rules / facts)."""
        from ..lifecycle.refine import refine_clusters

        with self.session() as store:
            return refine_clusters(
                store,
                self._load_llm,
                dry_run=dry_run,
                run_id=run_id,
                max_llm_calls=max_llm_calls,
                time_limit_s=time_limit_s,
            )

    def units(
        self, *, agent: str | None = None, status: str | None = None, kind: str | None = None, user: str | None = None
    ) -> list[dict[str, Any]]:
        """Knowledge units with every field, best first; `user`: that user's personal units."""
        from ..store.unit_reads import list_units

        with self.session() as store:
            return list_units(store, agent=agent, status=status, kind=kind, user=user)

    # --- query (owner: query/); show, why, trace and feedback are in explain.py ----------------
    def warm(self) -> int:
        """Load the embedding model and read into memory what queries read (`query.search.warm`: the
        memos, and the vectors queries compare but LanceDB does not hold): what a long-lived process does
        before its first query. Returns how many vectors were read. What it read stays, so it leaves the cyclic GC's sight (`gc.freeze`):
        a full collection walked the memos' ~100k rows at 100k memories, 124-293 ms in a query of 200."""
        import gc

        from ..query.search import warm

        with self.session():  # first: on `auto`, the store's vectors name the encoder to load
            pass
        self.embedder.encode(["warm up", "预热"])  # English and Chinese: a mixed store loads both encoders
        with self.session() as store:
            read = warm(store)
        gc.collect()  # no garbage goes to the permanent generation (refcounting frees a replaced memo)
        gc.freeze()
        return read

    def query(self, text: str, *, now: "dt.datetime | None" = None, **options: Any) -> "QueryResult":
        """The best `k` units and memories for `text`, scored, rendered for a prompt; unless touch=False,
        what the prompt shows is reinforced and logged for `session` / `goal_id` (what outcomes credit).
        `options`: the fields of `operations.QueryArgs`. `now` (naive UTC, default the wall clock): when
        recency is measured to; a replay passes its cycles' clock, so its rankings do not move with the hour."""
        from ..operations import QueryArgs
        from ..query.search import query

        limit = self.config.query.max_text_chars
        if isinstance(text, str) and len(text) > limit:
            raise TooLargeError(
                f"the query text is {len(text)} characters, over query.max_text_chars ({limit})",
                hint="describe the situation in a few sentences",
            )
        args = QueryArgs(text, **options)
        with self.session() as store:
            return query(store, args, now)

    def reinforce(self, result: Any) -> None:
        """Record what an earlier `query(touch=False)` showed (reinforce, wake, log): the server answers
        first, writes after."""
        from ..query.search import record_shown

        with self.session() as store:
            record_shown(store, result)

    def reader(self) -> "Engine":
        """A view for another thread: its own DuckDB cursor (a consistent MVCC read while this Engine writes),
        sharing config, index and models, and its own guard (sharing this Engine's would block reads during a
        compaction). The store must be held open (`engine.store`). Close `view._store.con`, never the view."""
        import copy

        view = copy.copy(self)
        view._guard = threading.RLock()
        view._store = self.store.reader()
        view._held = True
        return view


def _remember_encoder(store: Store) -> None:
    """Record the encoder behind a store's first vectors; a damaged store is reported by the operation."""
    with contextlib.suppress(duckdb.Error):
        record_encoder(store)


def _heal(store: Store, *, pending: bool = True) -> None:
    """Finish the LanceDB half of any write that a crash interrupted, a restore's rebuild of LanceDB, and
    the scrub of a killed `forget`."""
    if not rebuild_if_pending(store) and pending:  # not `pending`: an ingest that defers LanceDB's half too
        heal_pending(store)
    if (store.dir / SCRUB_PENDING).exists():
        from ..lifecycle.purge import finish_forget

        finish_forget(store)
