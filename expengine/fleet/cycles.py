"""`fleet compact`: one Ray task per store, at most `max_parallel` at once.

A task is one ordinary `Engine.compact` on its store: it takes the store lock, snapshots, runs the
steps and marks the run done. Ray retries a task whose worker died (`max_retries`); the retry finds
the lock free (a dead process holds no flock), rolls the half-done run back from its snapshot
(`recover_interrupted`) and compacts again, so a store ends compacted exactly once either way.
An error inside a task is reported for that store and does not stop the others."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results import Result
from . import fleet_stores
from .runtime import bounded, error_text, ray_session, store_engine, task_options


@dataclass
class StoreCompaction(Result):
    store: str
    ok: bool = False
    run_id: str | None = None
    cycles: int = 0  # completed compaction runs in the store, this one included
    hot_share_before: float | None = None
    hot_share_after: float | None = None
    recovered: int = 0  # interrupted runs rolled back first (a retried task shows 1)
    seconds: float = 0.0
    worker_pid: int | None = None
    error: str | None = None


@dataclass
class FleetCompaction(Result):
    root: str
    stores: list[StoreCompaction] = field(default_factory=list)
    failed: int = 0
    seconds: float = 0.0


def _share(counts: Any) -> float | None:
    if not counts or not counts.get("raw_tokens"):
        return None
    return round(counts["hot_tokens"] / counts["raw_tokens"], 4)


def compact_store(path: str, refine: bool = True, max_llm_calls: int | None = None) -> dict[str, Any]:
    """Compact one store (runs in a Ray worker, or inline); errors become the row's `error`."""
    started = time.perf_counter()
    row = StoreCompaction(store=Path(path).name, worker_pid=os.getpid())
    try:
        with store_engine(path) as engine:
            report = engine.compact(refine=refine, max_llm_calls=max_llm_calls).to_dict()
            runs = engine.history()
        row.ok = report["status"] == "completed"
        row.run_id, row.recovered = report["run_id"], len(report["recovered"])
        row.hot_share_before, row.hot_share_after = _share(report["before"]), _share(report["after"])
        row.cycles = sum(1 for r in runs if r.get("status") == "completed")
        if not row.ok:
            row.error = f"the run ended {report['status']}"
    except Exception as exc:  # one broken store must not end the fleet's run
        row.error = error_text(exc)
    row.seconds = round(time.perf_counter() - started, 3)
    return row.to_dict()


def compact_fleet(
    root: str | Path,
    *,
    max_parallel: int = 2,
    address: str | None = None,
    refine: bool = True,
    max_llm_calls: int | None = None,
    names: list[str] | None = None,
    worker_env: dict[str, str] | None = None,
) -> FleetCompaction:
    """Compact every store under `root` (or the `names` given) on Ray. `worker_env` is set in the
    workers' environment (cloud credentials, or a test's pause hook)."""
    started = time.perf_counter()
    stores = fleet_stores(root)
    chosen = [(n, p) for n, p in stores.items() if names is None or n in names]
    result = FleetCompaction(root=str(root))
    rows: dict[int, StoreCompaction] = {}
    with ray_session(address) as ray:
        task = ray.remote(compact_store).options(**task_options(worker_env))
        calls = [lambda p=p: task.remote(str(p), refine, max_llm_calls) for _, p in chosen]
        for index, value in bounded(ray, calls, max_parallel):
            if isinstance(value, Exception):
                rows[index] = StoreCompaction(store=chosen[index][0], error=error_text(value)[:500])
            else:
                rows[index] = StoreCompaction(**value)
    result.stores = [rows[i] for i in range(len(chosen))]
    result.failed = sum(1 for r in result.stores if not r.ok)
    result.seconds = round(time.perf_counter() - started, 3)
    return result
