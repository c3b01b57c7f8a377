"""`Engine`: the library every command is a method of. The CLI only parses, calls and renders."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import duckdb

from .config import Config, default_store_dir
from .errors import StoreError
from .store.db import DB_FILE, LANCE_DIR, LOCK_FILE, StoreLock, open_database
from .store.index import MEMORIES, UNITS, Index
from .textutil import approx_tokens
from .results import Result


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
    size_bytes: int = 0
    store: str = ""


class Engine:
    """One store folder. Open it, call methods with keyword arguments, close it (or use `with`)."""

    def __init__(
        self,
        *,
        store: str | Path | None = None,
        config: Config | None = None,
        overrides: dict[str, Any] | None = None,
        lock_timeout: float = 30.0,
        embedder: Any = None,
        llm: Any = None,
    ):
        self.store_dir = Path(store).expanduser() if store else default_store_dir()
        try:
            self.store_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store folder {self.store_dir}: {exc.strerror}", hint="pass --store DIR") from exc
        base = config or Config.load(self.store_dir)
        self.config = base.with_overrides(overrides) if overrides else base
        self._lock = StoreLock(self.store_dir / LOCK_FILE, timeout=lock_timeout)
        self._lock.acquire()
        try:
            self.con: duckdb.DuckDBPyConnection = open_database(self.store_dir / DB_FILE)
        except Exception:
            self._lock.release()
            raise
        self.index = Index(self.store_dir / LANCE_DIR)
        self._embedder = embedder
        self._llm = llm
        self._heal_pending_index()

    # --- lifecycle of the object -------------------------------------------------------------
    def close(self) -> None:
        if getattr(self, "con", None) is not None:
            self.con.close()
            self.con = None  # type: ignore[assignment]
        self._lock.release()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            from .models.embedder import get_embedder

            self._embedder = get_embedder(self.config.embedder.model_path, batch_size=self.config.embedder.batch_size)
        return self._embedder

    @property
    def embedder_name(self) -> str:
        """The embedding cache key, known without loading the model (a fully cached run never loads it)."""
        if self._embedder is not None:
            return self._embedder.name
        from .models.embedder import embedder_name

        return embedder_name(self.config.embedder.model_path)

    @property
    def embedding_dim(self) -> int:
        """Vector size, read from the cache when possible so the model stays unloaded."""
        if self._embedder is None:
            row = self.con.execute(
                "SELECT len(vector) FROM embeddings WHERE model = ? LIMIT 1", [self.embedder_name]
            ).fetchall()
            if row:
                return int(row[0][0])
        return self.embedder.dim

    @property
    def llm(self) -> Any:
        if self._llm is None:
            from .models.llm import get_llm

            self._llm = get_llm(self.config.llm)
        return self._llm

    def history_log(self, item_id: str, action: str, detail: Any = None, *, run_id: str | None = None) -> None:
        """Append to the per-item history that `show` displays (why a thing was kept or forgotten)."""
        from .store.db import utcnow

        text = detail if isinstance(detail, str) or detail is None else json.dumps(detail, default=str)
        self.con.execute("INSERT INTO history VALUES (?, ?, ?, ?, ?)", [item_id, utcnow(), action, text, run_id])

    # --- ingest and the store ------------------------------------------------------------------
    def ingest(
        self,
        paths: list[str],
        *,
        fmt: str = "auto",
        strict: bool = False,
        agent: str | None = None,
        on_progress: Callable[[int], None] | None = None,
    ):
        """Validate, redact, assess, embed and store events from JSONL / openai-chat files."""
        from .ingest.pipeline import ingest

        return ingest(self, paths, fmt=fmt, strict=strict, agent=agent, on_progress=on_progress)

    def stats(self) -> Stats:
        con = self.con

        def grouped(sql: str) -> dict[str, int]:
            return {str(k): int(v) for k, v in con.execute(sql).fetchall()}

        states = grouped("SELECT state, count(*) FROM records GROUP BY state")
        texts = con.execute("SELECT text FROM records WHERE state = 'active'").fetchall()
        size = sum(f.stat().st_size for f in self.store_dir.rglob("*") if f.is_file())
        return Stats(
            raw=sum(states.values()),
            active=states.get("active", 0),
            dormant=states.get("dormant", 0),
            archived=states.get("archived", 0),
            units=int(con.execute("SELECT count(*) FROM units WHERE status = 'active'").fetchone()[0]),
            rejects=int(con.execute("SELECT count(*) FROM rejects").fetchone()[0]),
            by_kind=grouped("SELECT kind, count(*) FROM records GROUP BY kind ORDER BY 2 DESC"),
            by_agent=grouped("SELECT agent, count(*) FROM records GROUP BY agent ORDER BY 2 DESC"),
            by_category=grouped("SELECT category, count(*) FROM records GROUP BY category ORDER BY 2 DESC"),
            goals=grouped("SELECT status, count(*) FROM goals GROUP BY status ORDER BY 2 DESC"),
            units_by_status=grouped("SELECT status, count(*) FROM units GROUP BY status"),
            indexed_memories=self.index.count(MEMORIES),
            indexed_units=self.index.count(UNITS),
            active_tokens=sum(approx_tokens(t) for (t,) in texts),
            size_bytes=size,
            store=str(self.store_dir),
        )

    def rejects(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """Quarantined input lines, newest first, with file, line, reason and raw text."""
        rows = self.con.execute(
            "SELECT file, line, error, raw, rejected_at FROM rejects ORDER BY rejected_at DESC, file, line LIMIT ?",
            [limit],
        ).fetchall()
        return [dict(zip(("file", "line", "error", "raw", "rejected_at"), r)) for r in rows]

    def reindex(self) -> dict[str, int]:
        """Rebuild LanceDB from DuckDB (vectors come from the embedding cache, so no re-embedding)."""
        from .store.reindex import rebuild

        return rebuild(self)

    def _heal_pending_index(self) -> None:
        """Finish the LanceDB half of any write that a crash interrupted."""
        if self.con.execute("SELECT count(*) FROM pending_index").fetchone()[0]:
            from .store.reindex import index_pending

            index_pending(self)

    # --- compaction (owner: lifecycle/compact.py) ----------------------------------------------
    def compact(
        self, *, dry_run: bool = False, refine: bool = True, max_llm_calls: int | None = None, now: Any = None
    ):
        """One forgetting cycle (snapshot, decay, goal cleanup, cluster pruning, refine, purge); `now` fakes the clock."""
        from .lifecycle.compact import compact

        return compact(self, dry_run=dry_run, refine=refine, max_llm_calls=max_llm_calls, now=now)

    def decay(self, *, dry_run: bool = False, run_id: str | None = None, now: Any = None):
        from .lifecycle.decay import decay

        return decay(self, dry_run=dry_run, run_id=run_id, now=now)

    def goal_cleanup(self, *, dry_run: bool = False, run_id: str | None = None, now: Any = None):
        from .lifecycle.goals import goal_cleanup

        return goal_cleanup(self, dry_run=dry_run, run_id=run_id, now=now)

    def prune_clusters(self, *, dry_run: bool = False, run_id: str | None = None, now: Any = None):
        from .lifecycle.clusters import prune_clusters

        return prune_clusters(self, dry_run=dry_run, run_id=run_id, now=now)

    def purge(self, *, dry_run: bool = False, run_id: str | None = None, now: Any = None):
        from .lifecycle.purge import purge

        return purge(self, dry_run=dry_run, run_id=run_id, now=now)

    def snapshot(self, *, reason: str = "manual"):
        from .lifecycle.snapshot import create_snapshot

        return create_snapshot(self, reason=reason)

    def snapshots(self):
        from .lifecycle.snapshot import list_snapshots

        return list_snapshots(self)

    def restore(self, snapshot_id: str):
        """Roll the whole store back to a snapshot (records ingested after it are gone too)."""
        from .lifecycle.snapshot import restore_snapshot

        return restore_snapshot(self, snapshot_id)

    def recover_interrupted(self) -> list[dict[str, Any]]:
        """Roll back a compaction a killed process left 'running'; `compact` does this first anyway."""
        from .lifecycle.compact import recover_interrupted

        return recover_interrupted(self)

    def pin(self, record_id: str) -> dict[str, Any]:
        from .lifecycle.pins import set_pinned

        return set_pinned(self, record_id, pinned=True)

    def unpin(self, record_id: str) -> dict[str, Any]:
        from .lifecycle.pins import set_pinned

        return set_pinned(self, record_id, pinned=False)

    def forget(self, *, ids: list[str] | None = None, where: str | None = None):
        """Delete records for real, with their derived rows (the only path that deletes ingested data)."""
        from .lifecycle.purge import forget

        return forget(self, ids=ids, where=where)

    def history(self) -> list[dict[str, Any]]:
        from .lifecycle.compact import history

        return history(self)


    # --- refinement and units (owner: lifecycle/refine) ----------------------------------------
    def refine(
        self,
        *,
        dry_run: bool = False,
        run_id: str | None = None,
        max_llm_calls: int | None = None,
        time_limit_s: float | None = None,
    ):
        """Turn each changed cluster into grounded knowledge units (rules / facts); returns a RefineReport."""
        from .lifecycle.refine import refine_clusters

        return refine_clusters(self, dry_run=dry_run, run_id=run_id, max_llm_calls=max_llm_calls,
                               time_limit_s=time_limit_s)

    def units(self, *, agent: str | None = None, status: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """Knowledge units with every field, best first."""
        from .lifecycle.refine import list_units

        return list_units(self, agent=agent, status=status, kind=kind)

    def trace(self, unit_id: str) -> dict[str, Any]:
        """A unit with every raw record it came from (archived ones included) and its history."""
        from .lifecycle.refine import trace_unit

        return trace_unit(self, unit_id)

    # --- query, feedback, show (owner: query/) -------------------------------------------------
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
    ):
        """The best `k` units and memories for `text`, scored, rendered for a prompt, reinforced unless touch=False."""
        from .query.search import query

        return query(self, text, k=k, touch=touch, budget=budget, expand=expand, agent=agent, category=category,
                     kind=kind, outcome=outcome, since=since, until=until, goal=goal, include_dormant=include_dormant)

    def reinforce(self, result: Any) -> None:
        """Reinforce the hits of an earlier `query(touch=False)`: the server answers first, writes after."""
        from .query.search import reinforce

        reinforce(self, result.hits)

    def reader(self) -> "Engine":
        """A view for another thread: its own DuckDB cursor (a consistent MVCC read while this Engine writes),
        sharing config, index and models. Close its `con`, never the view itself (it shares the lock)."""
        import copy

        view = copy.copy(self)
        view.con = self.con.cursor()
        return view

    def feedback(self, item_id: str, *, helpful: bool | None, note: str | None = None, restore: bool = False):
        """Helpful / harmful report on a unit or record (utility ±); `restore` brings back a quarantined unit."""
        from .query.feedback import give_feedback

        return give_feedback(self, item_id, helpful=helpful, note=note, restore=restore)

    def restore_unit(self, unit_id: str, *, reason: str = "restored by the user") -> bool:
        """Bring a quarantined unit back into queries (False if it was not quarantined)."""
        from .query.feedback import restore_unit

        return restore_unit(self, unit_id, reason=reason)

    def show(self, item_id: str):
        """One record or unit with its scores, state, provenance and history."""
        from .query.show import show

        return show(self, item_id)
