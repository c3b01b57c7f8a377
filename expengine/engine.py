"""`Engine`: the library every command is a method of. The CLI only parses, calls and renders."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from .config import Config, default_store_dir
from .errors import InputError, StoreError
from .models.embedder import Embedder, LazyEmbedder
from .models.llm import LLM
from .results import Result
from .store.db import LOCK_FILE, StoreLock
from .store.index import MEMORIES, UNITS
from .store.store import Store

if TYPE_CHECKING:
    import datetime as dt

    from .ingest.pipeline import IngestResult
    from .lifecycle.clusters import ClusterReport
    from .lifecycle.compact import CompactReport
    from .lifecycle.decay import DecayReport
    from .lifecycle.goals import GoalCleanupReport
    from .lifecycle.purge import ForgetResult, PurgeReport
    from .lifecycle.refine import RefineReport
    from .lifecycle.snapshot import RestoreResult, SnapshotInfo
    from .query.feedback import FeedbackResult
    from .query.hits import QueryResult
    from .query.show import ShowResult
    from .query.why import WhyResult


@dataclass
class Stats(Result):
    raw: int
    active: int
    dormant: int
    archived: int
    units: int
    rejects: int
    by_kind: dict[str, int] = field(default_factory=dict)
    by_agent: dict[str, int] = field(default_factory=dict)
    by_category: dict[str, int] = field(default_factory=dict)
    goals: dict[str, int] = field(default_factory=dict)
    units_by_status: dict[str, int] = field(default_factory=dict)
    indexed_memories: int = 0
    indexed_units: int = 0
    active_tokens: int = 0
    hot_tokens: int = 0
    raw_tokens: int = 0
    hot_share: float | None = None
    size_bytes: int = 0
    store: str = ""
    scripts: dict[str, float] = field(default_factory=dict)
    embedder: str = ""


class Engine:
    """One store folder: call methods with keyword arguments, close it (or use `with`) when done.

    An Engine holds no lock between calls: each public method takes the store lock, opens the
    store, does its work and closes it again, while the models stay loaded in this object. So an
    agent may keep an Engine for its whole life without blocking a cron `compact` or CLI queries;
    a call made while another process holds the store waits up to `lock_timeout` seconds. Use
    `with engine.session():` to keep the store open (and locked) across several calls.
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
    ):
        self.store_dir = Path(store).expanduser() if store else default_store_dir()
        try:
            self.store_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the store folder {self.store_dir}: {exc.strerror}", hint="pass --store DIR"
            ) from exc
        base = config or Config.load(self.store_dir)
        self.config = base.with_overrides(overrides) if overrides else base
        self._lock = StoreLock(self.store_dir / LOCK_FILE, timeout=lock_timeout)
        self._guard = threading.RLock()  # one operation at a time per Engine; nested calls reuse the store
        self._store: Store | None = None
        self._held = False
        cfg = self.config.embedder
        # model: "auto" is MiniLM until a new store's first ingest picks (Store.choose_embedder switches it)
        self.embedder: Embedder = embedder or LazyEmbedder(cfg.model_path, batch_size=cfg.batch_size, model=cfg.model)
        self._llm = llm

    # --- opening the store per operation -------------------------------------------------------
    @contextmanager
    def session(self) -> Iterator[Store]:
        """The open store for the block: lock, open (healing an interrupted index write), close, unlock."""
        with self._guard:
            if self._store is not None:
                yield self._store
                return
            self._lock.acquire()
            try:
                store = Store(self.store_dir, config=self.config, embedder=self.embedder)
            except BaseException:
                self._lock.release()
                raise
            self._store = store
            try:
                _heal_pending_index(store)
                yield store
            finally:
                if not self._held:
                    self._release()

    def _release(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        self._lock.release()

    @property
    def store(self) -> Store:
        """The open store, kept open (and locked) until `close()`: for scripts and tests that reach into
        SQL. While held, this Engine blocks other processes, as an Engine always did before."""
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
            from .models.llm import get_llm

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
        on_progress: Callable[[int], None] | None = None,
    ) -> "IngestResult":
        """Validate, redact, assess, embed and store events from JSONL / openai-chat files."""
        from .ingest.pipeline import ingest

        with self.session() as store:
            return ingest(store, paths, fmt=fmt, strict=strict, agent=agent, on_progress=on_progress)

    def stats(self) -> Stats:
        with self.session() as store:
            return _stats(store)

    def rejects(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """Quarantined input lines, newest first, with file, line, reason and raw text."""
        with self.session() as store:
            rows = store.con.execute(
                "SELECT file, line, error, raw, rejected_at FROM rejects ORDER BY rejected_at DESC, file, line LIMIT ?",
                [limit],
            ).fetchall()
        return [dict(zip(("file", "line", "error", "raw", "rejected_at"), r)) for r in rows]

    def reindex(self, *, model: str | None = None) -> dict[str, int]:
        """Rebuild LanceDB from DuckDB (vectors come from the embedding cache, so no re-embedding). With
        `model` (`minilm` or `multilingual`) the store first switches to that embedder for good (its
        config.toml) and the rebuild embeds what the cache lacks for it: never two models in one index."""
        from .store.reindex import rebuild

        with self.session() as store:
            if model is not None and not store.choose_embedder(_packaged(model), explicit=True):
                raise InputError(
                    "this store's embedder is a model folder or one passed in, so --model cannot switch it",
                    hint="set [embedder] model_path in the store's config.toml instead, then reindex",
                )
            return rebuild(store)

    # --- compaction (owner: lifecycle/compact.py) ----------------------------------------------
    def compact(
        self,
        *,
        dry_run: bool = False,
        refine: bool = True,
        max_llm_calls: int | None = None,
        now: "dt.datetime | None" = None,
    ) -> "CompactReport":
        """One forgetting cycle (snapshot, then the declared steps); `now` fakes the clock."""
        from .lifecycle.compact import compact

        with self.session() as store:
            return compact(store, self._load_llm, dry_run=dry_run, refine=refine, max_llm_calls=max_llm_calls, now=now)

    def decay(
        self, *, dry_run: bool = False, run_id: str | None = None, now: "dt.datetime | None" = None
    ) -> "DecayReport":
        from .lifecycle.decay import decay

        with self.session() as store:
            return decay(store, dry_run=dry_run, run_id=run_id, now=now)

    def goal_cleanup(
        self, *, dry_run: bool = False, run_id: str | None = None, now: "dt.datetime | None" = None
    ) -> "GoalCleanupReport":
        from .lifecycle.goals import goal_cleanup

        with self.session() as store:
            return goal_cleanup(store, dry_run=dry_run, run_id=run_id, now=now)

    def prune_clusters(
        self, *, dry_run: bool = False, run_id: str | None = None, now: "dt.datetime | None" = None
    ) -> "ClusterReport":
        from .lifecycle.clusters import prune_clusters

        with self.session() as store:
            return prune_clusters(store, dry_run=dry_run, run_id=run_id, now=now)

    def purge(
        self, *, dry_run: bool = False, run_id: str | None = None, now: "dt.datetime | None" = None
    ) -> "PurgeReport":
        from .lifecycle.purge import purge

        with self.session() as store:
            return purge(store, dry_run=dry_run, run_id=run_id, now=now)

    def snapshot(self, *, reason: str = "manual") -> "SnapshotInfo":
        from .lifecycle.snapshot import create_snapshot

        with self.session() as store:
            return create_snapshot(store, reason=reason)

    def snapshots(self) -> list["SnapshotInfo"]:
        from .lifecycle.snapshot import list_snapshots

        with self.session() as store:
            return list_snapshots(store)

    def restore(self, snapshot_id: str) -> "RestoreResult":
        """Roll the whole store back to a snapshot (records ingested after it are gone too)."""
        from .lifecycle.snapshot import restore_snapshot

        with self.session() as store:
            return restore_snapshot(store, snapshot_id)

    def recover_interrupted(self) -> list[dict[str, Any]]:
        """Roll back a compaction a killed process left 'running'; `compact` does this first anyway."""
        from .lifecycle.compact import recover_interrupted

        with self.session() as store:
            return recover_interrupted(store)

    def pin(self, record_id: str) -> dict[str, Any]:
        from .lifecycle.pins import set_pinned

        with self.session() as store:
            return set_pinned(store, record_id, pinned=True)

    def unpin(self, record_id: str) -> dict[str, Any]:
        from .lifecycle.pins import set_pinned

        with self.session() as store:
            return set_pinned(store, record_id, pinned=False)

    def forget(
        self,
        *,
        ids: list[str] | None = None,
        sessions: list[str] | None = None,
        agents: list[str] | None = None,
        before: Any = None,
        dry_run: bool = False,
    ) -> "ForgetResult":
        """Delete the records all given filters match, with their derived rows, from the store and every
        snapshot (the only path that deletes ingested data); `dry_run` counts without deleting (the CLI's
        confirmation preview)."""
        from .lifecycle.purge import forget

        with self.session() as store:
            return forget(store, ids=ids, sessions=sessions, agents=agents, before=before, dry_run=dry_run)

    def history(self) -> list[dict[str, Any]]:
        from .lifecycle.compact import history

        with self.session() as store:
            return history(store)

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
        from .lifecycle.refine import refine_clusters

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
        self, *, agent: str | None = None, status: str | None = None, kind: str | None = None
    ) -> list[dict[str, Any]]:
        """Knowledge units with every field, best first."""
        from .store.units import list_units

        with self.session() as store:
            return list_units(store, agent=agent, status=status, kind=kind)

    def trace(self, unit_id: str) -> dict[str, Any]:
        """A unit with every raw record it came from (archived ones included) and its history."""
        from .store.units import trace_unit

        with self.session() as store:
            return trace_unit(store, unit_id)

    # --- query, feedback, show (owner: query/) -------------------------------------------------
    def warm(self) -> int:
        """Load the embedding model and read into memory the vectors queries compare but LanceDB does
        not hold (`query.search.warm`): what a long-lived process does before its first query. Returns
        how many vectors were read."""
        from .query.expand import warm

        self.embedder.encode(["warm up"])
        with self.session() as store:
            return warm(store)

    def query(
        self,
        text: str,
        *,
        k: int = 5,
        touch: bool = True,
        agent: str | None = None,
        category: str | None = None,
        kind: str | None = None,
        outcome: str | None = None,
        since: Any = None,
        until: Any = None,
        goal: str | None = None,
        budget: int | None = None,
        include_dormant: bool = False,
        expand: bool | None = None,
        session: str | None = None,
        goal_id: str | None = None,
    ) -> "QueryResult":
        """The best `k` units and memories for `text`, scored, rendered for a prompt; unless touch=False,
        what the prompt shows is reinforced and logged for `session` / `goal_id` (what outcomes credit)."""
        from .query.search import query

        with self.session() as store:
            return query(
                store,
                text,
                k=k,
                touch=touch,
                budget=budget,
                expand=expand,
                session=session,
                goal_id=goal_id,
                agent=agent,
                category=category,
                kind=kind,
                outcome=outcome,
                since=since,
                until=until,
                goal=goal,
                include_dormant=include_dormant,
            )

    def reinforce(self, result: Any) -> None:
        """Record what an earlier `query(touch=False)` showed (reinforce, wake, log): the server answers
        first, writes after."""
        from .query.search import record_shown

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

    def feedback(
        self, item_id: str, *, helpful: bool | None, note: str | None = None, restore: bool = False
    ) -> "FeedbackResult":
        """Helpful / harmful report on a unit or record (utility ±); `restore` brings back a quarantined unit."""
        from .query.feedback import give_feedback

        with self.session() as store:
            return give_feedback(store, item_id, helpful=helpful, note=note, restore=restore)

    def restore_unit(self, unit_id: str, *, reason: str = "restored by the user") -> bool:
        """Bring a quarantined unit back into queries (False if it was not quarantined)."""
        from .query.feedback import restore_unit

        with self.session() as store:
            return restore_unit(store, unit_id, reason=reason)

    def why(self, text: str, *, limit: int = 5, revive: bool = False) -> "WhyResult":
        """What the memory set aside that matches `text` (sleeping, archived, merged, superseded) and
        what happened to each; `revive` wakes them."""
        from .query.why import why

        with self.session() as store:
            return why(store, text, limit=limit, revive=revive)

    def show(self, item_id: str) -> "ShowResult":
        """One record or unit with its scores, state, provenance and history."""
        from .query.show import show

        with self.session() as store:
            return show(store, item_id)


def _heal_pending_index(store: Store) -> None:
    """Finish the LanceDB half of any write that a crash interrupted."""
    if store.con.execute("SELECT count(*) FROM pending_index").fetchone()[0]:  # type: ignore[index]
        from .store.reindex import index_pending

        index_pending(store)


def _stats(store: Store) -> Stats:
    from .ingest.scripts import count_scripts, shares
    from .lifecycle.compact import hot_text

    con = store.con

    def grouped(sql: str) -> dict[str, int]:
        return {str(k): int(v) for k, v in con.execute(sql).fetchall()}

    def scalar(sql: str) -> int:
        return int(con.execute(sql).fetchall()[0][0])

    states = grouped("SELECT state, count(*) FROM records GROUP BY state")
    size = sum(f.stat().st_size for f in store.dir.rglob("*") if f.is_file())
    return Stats(
        raw=sum(states.values()),
        active=states.get("active", 0),
        dormant=states.get("dormant", 0),
        archived=states.get("archived", 0),
        units=scalar("SELECT count(*) FROM units WHERE status = 'active'"),
        rejects=scalar("SELECT count(*) FROM rejects"),
        by_kind=grouped("SELECT kind, count(*) FROM records GROUP BY kind ORDER BY 2 DESC"),
        by_agent=grouped("SELECT agent, count(*) FROM records GROUP BY agent ORDER BY 2 DESC"),
        by_category=grouped("SELECT category, count(*) FROM records GROUP BY category ORDER BY 2 DESC"),
        goals=grouped("SELECT status, count(*) FROM goals GROUP BY status ORDER BY 2 DESC"),
        units_by_status=grouped("SELECT status, count(*) FROM units GROUP BY status"),
        indexed_memories=store.index.count(MEMORIES),
        indexed_units=store.index.count(UNITS),
        **hot_text(store),
        size_bytes=size,
        store=str(store.dir),
        scripts=shares(count_scripts(t for (t,) in con.execute("SELECT text FROM records").fetchall())),
        embedder=store.embeddings.name,
    )


def _packaged(model: str) -> str:
    from .models.embedder import MODELS

    if model not in MODELS:
        raise InputError(f"unknown embedder model {model!r}", hint=f"use one of {', '.join(MODELS)}")
    return model
