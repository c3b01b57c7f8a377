"""One compaction cycle: snapshot → decay → goal cleanup → chatter → cluster pruning → refine hook → purge → report.

Safety:
- the Engine holds the store lock, so one compaction (or ingest) runs at a time;
- a `runs` row is written as 'running' right after the snapshot; an exception rolls the store back to
  the snapshot, and a row still 'running' when the next compaction opens the store (the process was
  killed) is rolled back from its snapshot before anything else happens;
- a dry run executes the very same cycle on a throw-away copy of the store and reports the plan,
  so what it shows is what a real run would do, and the store itself is not touched.
Incremental: clustering (the expensive step) runs only when `cluster.interval_new_memories` records
arrived or `cluster.interval_hours` passed since the last clustering; decay, goal cleanup and purge
run every cycle (decay is defined per cycle).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ExpengineError
from ..store.db import utcnow
from ..textutil import approx_tokens
from .chatter import sleep_chatter
from .clusters import k_rule, prune_clusters
from .decay import decay
from .goals import goal_cleanup
from .purge import purge
from .snapshot import copy_store, create_snapshot, list_snapshots, restore_snapshot
from ..results import Result

if TYPE_CHECKING:
    from ..engine import Engine

PAUSE_ENV = "EXPENGINE_TEST_PAUSE_AFTER"
PAUSE_MARKER = ".paused-after-"


@dataclass
class Counts(Result):
    raw: int
    active: int
    dormant: int
    archived: int
    clusters: int
    merged: int
    units: int
    active_tokens: int
    hot_tokens: int = 0
    raw_tokens: int = 0
    hot_share: float | None = None


@dataclass
class CompactReport(Result):
    run_id: str
    dry_run: bool
    clock: str
    status: str = "running"
    snapshot_id: str | None = None
    before: Counts | None = None
    after: Counts | None = None
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    clustering: str = ""
    recovered: list[dict[str, Any]] = field(default_factory=list)
    ingested_upto: str | None = None
    seconds: float = 0.0


def hot_text(engine: "Engine") -> dict[str, Any]:
    """Tokens a default query can return (active memories' and active units' text) against all raw text."""
    con = engine.con
    memory, raw = (sum(approx_tokens(t) for (t,) in con.execute(sql).fetchall()) for sql in (
        "SELECT text FROM records WHERE state = 'active'", "SELECT text FROM records"))
    units = sum(approx_tokens(t) for (t,) in con.execute("SELECT text FROM units WHERE status = 'active'").fetchall())
    hot = memory + units
    return {"active_tokens": memory, "hot_tokens": hot, "raw_tokens": raw,
            "hot_share": round(hot / raw, 4) if raw else None}


def counts(engine: "Engine") -> Counts:
    con = engine.con
    states = dict(con.execute("SELECT state, count(*) FROM records GROUP BY state").fetchall())
    return Counts(
        raw=int(sum(states.values())), active=int(states.get("active", 0)), dormant=int(states.get("dormant", 0)),
        archived=int(states.get("archived", 0)),
        clusters=int(con.execute("SELECT count(*) FROM clusters").fetchall()[0][0]),
        merged=int(con.execute("SELECT count(*) FROM records WHERE merged_into IS NOT NULL").fetchall()[0][0]),
        units=int(con.execute("SELECT count(*) FROM units WHERE status = 'active'").fetchall()[0][0]),
        **hot_text(engine),
    )


def recover_interrupted(engine: "Engine") -> list[dict[str, Any]]:
    """Deal with runs a killed process left 'running' (we hold the lock, so nobody is running them).

    Normally the store goes back to the run's snapshot. If records were ingested after the run
    started, a restore would lose them: then the half-done cycle is kept (every step is safe to
    repeat) and LanceDB is rebuilt from DuckDB so the two agree again."""
    stale = engine.con.execute("SELECT id, snapshot_id, started FROM runs WHERE status = 'running' ORDER BY started").fetchall()
    recovered = []
    available = {s.id for s in list_snapshots(engine)}
    for run_id, snapshot_id, started in stale:
        newer = engine.con.execute("SELECT count(*) FROM records WHERE ingested_at > ?", [started]).fetchall()[0][0]
        if snapshot_id in available and not newer:
            restore_snapshot(engine, snapshot_id)  # re-inserts the run row as 'rolled_back'
            recovered.append({"run_id": run_id, "snapshot_id": snapshot_id, "action": "rolled back"})
            break  # the restored store predates every later run
        engine.reindex()
        engine.con.execute("UPDATE runs SET status = 'interrupted', finished = ? WHERE id = ?", [utcnow(), run_id])
        why = f"{newer} records ingested since" if newer else "snapshot missing"
        recovered.append({"run_id": run_id, "snapshot_id": snapshot_id, "action": f"kept ({why}); index rebuilt"})
    return recovered


def clustering_due(engine: "Engine", now: dt.datetime) -> tuple[bool, str]:
    """Whether enough changed since the last clustering to pay for it again, and why."""
    cfg = engine.config.cluster
    for (report,) in engine.con.execute(
        "SELECT report FROM runs WHERE status = 'completed' AND NOT dry_run ORDER BY started DESC"
    ).fetchall():
        data = json.loads(report or "{}")
        if not data.get("clustering", "").startswith("ran"):
            continue
        last_clock = dt.datetime.fromisoformat(data["clock"])
        upto = data.get("ingested_upto")
        fresh = engine.con.execute(
            "SELECT count(*) FROM records WHERE ? IS NULL OR ingested_at > ?", [upto, upto]
        ).fetchall()[0][0]
        hours = (now - last_clock).total_seconds() / 3600
        if fresh >= cfg.interval_new_memories:
            return True, f"ran: {fresh} new records since the last clustering (≥ {cfg.interval_new_memories})"
        if hours >= cfg.interval_hours:
            return True, f"ran: {hours:.1f} h since the last clustering (≥ {cfg.interval_hours} h)"
        return False, (f"skipped: {fresh} new records (< {cfg.interval_new_memories}) and {hours:.1f} h "
                       f"(< {cfg.interval_hours} h) since the last clustering")
    return True, "ran: first clustering of this store"


def _pause_for_tests(engine: "Engine", step: str) -> None:
    """Lets a test kill the process at a known point: write a marker, then block until killed."""
    if os.environ.get(PAUSE_ENV) == step:
        (engine.store_dir / (PAUSE_MARKER + step)).write_text(str(os.getpid()), encoding="utf-8")
        while True:
            signal.pause()


def compact(
    engine: "Engine",
    *,
    dry_run: bool = False,
    refine: bool = True,
    max_llm_calls: int | None = None,
    now: dt.datetime | None = None,
) -> CompactReport:
    if dry_run:
        return _dry_run(engine, refine=refine, max_llm_calls=max_llm_calls, now=now)
    started = time.perf_counter()
    recovered = recover_interrupted(engine)
    before = counts(engine)
    clock = now or utcnow()
    snap_started = time.perf_counter()
    snapshot = create_snapshot(engine, reason="before compaction")
    run_id = "run-" + clock.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    report = CompactReport(run_id=run_id, dry_run=False, clock=clock.isoformat(), snapshot_id=snapshot.id,
                           before=before, recovered=recovered)
    report.steps["snapshot"] = {"id": snapshot.id, "size_bytes": snapshot.size_bytes,
                                "seconds": round(time.perf_counter() - snap_started, 3)}
    engine.con.execute("INSERT INTO runs VALUES (?, ?, NULL, FALSE, 'running', ?, NULL)", [run_id, utcnow(), snapshot.id])
    engine.con.execute("CHECKPOINT")
    try:
        _run_steps(engine, report, refine=refine, refine_dry_run=False, max_llm_calls=max_llm_calls, now=clock)
    except BaseException as exc:
        restore_snapshot(engine, snapshot.id)
        engine.con.execute("UPDATE runs SET finished = ?, report = ? WHERE id = ?",
                           [utcnow(), json.dumps({"error": str(exc) or type(exc).__name__}), run_id])
        raise
    report.after = counts(engine)
    report.status = "completed"
    report.seconds = round(time.perf_counter() - started, 3)
    engine.con.execute("UPDATE runs SET finished = ?, status = 'completed', report = ? WHERE id = ?",
                       [utcnow(), json.dumps(report.to_dict(), default=str), run_id])
    return report


def _run_steps(engine: "Engine", report: CompactReport, *, refine: bool, refine_dry_run: bool,
               max_llm_calls: int | None, now: dt.datetime) -> None:
    run_id = report.run_id
    report.ingested_upto = _iso(engine.con.execute("SELECT max(ingested_at) FROM records").fetchall()[0][0])
    report.steps["decay"] = decay(engine, dry_run=False, run_id=run_id, now=now).to_dict()
    _pause_for_tests(engine, "decay")
    report.steps["goals"] = goal_cleanup(engine, dry_run=False, run_id=run_id, now=now).to_dict()
    _pause_for_tests(engine, "goals")
    report.steps["chatter"] = sleep_chatter(engine, dry_run=False, run_id=run_id, now=now).to_dict()
    due, report.clustering = clustering_due(engine, now)
    if due:
        report.steps["clusters"] = prune_clusters(engine, dry_run=False, run_id=run_id, now=now).to_dict()
    else:
        report.steps["clusters"] = {"skipped": report.clustering, "k_rule": k_rule(engine), "seconds": 0.0}
    _pause_for_tests(engine, "clusters")
    if refine and hasattr(engine, "refine"):
        refine_started = time.perf_counter()
        try:
            result = engine.refine(dry_run=refine_dry_run, run_id=run_id, max_llm_calls=max_llm_calls).to_dict()
        except ExpengineError as exc:  # a model problem must not undo decay and pruning
            result = {"error": str(exc)}
        result.setdefault("seconds", round(time.perf_counter() - refine_started, 3))
        report.steps["refine"] = result
    report.steps["purge"] = purge(engine, dry_run=False, run_id=run_id, now=now).to_dict()
    index_started = time.perf_counter()
    moved = engine.con.execute(
        "SELECT count(*) FROM history WHERE run_id = ? AND action LIKE 'state:%'", [run_id]).fetchall()[0][0]
    indexes = None
    if moved or due:  # rows changed: refresh the full-text and vector indexes
        from ..query.search import refresh_indexes

        indexes = refresh_indexes(engine)
    report.steps["index"] = {"state_changes": int(moved), "indexes": indexes,
                             "seconds": round(time.perf_counter() - index_started, 3)}


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _dry_run(engine: "Engine", *, refine: bool, max_llm_calls: int | None, now: dt.datetime | None) -> CompactReport:
    """Run the real cycle on a temporary copy of the store and report it; the store is not touched."""
    from ..engine import Engine

    started = time.perf_counter()
    clock = now or utcnow()
    report = CompactReport(run_id="dry-run", dry_run=True, clock=clock.isoformat(), before=counts(engine))
    stale = engine.con.execute("SELECT id, snapshot_id FROM runs WHERE status = 'running'").fetchall()
    report.recovered = [{"run_id": r, "snapshot_id": s, "action": "would be rolled back first"} for r, s in stale]
    with tempfile.TemporaryDirectory(prefix="expengine-dry-run-") as tmp:
        copy_store(engine, Path(tmp))
        with Engine(store=tmp, config=engine.config, embedder=engine._embedder, llm=engine._llm, lock_timeout=0) as copy:
            _run_steps(copy, report, refine=refine, refine_dry_run=True, max_llm_calls=max_llm_calls, now=clock)
            report.after = counts(copy)
            engine._embedder = engine._embedder or copy._embedder
    report.status = "dry-run"
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def history(engine: "Engine") -> list[dict[str, Any]]:
    """One row per compaction run, oldest first: the growth curve (raw vs active vs units)."""
    rows = engine.con.execute(
        "SELECT id, started, finished, status, snapshot_id, report FROM runs WHERE NOT dry_run ORDER BY started"
    ).fetchall()
    out = []
    for run_id, started, finished, status, snapshot_id, report in rows:
        data = json.loads(report or "{}")
        before, after = data.get("before") or {}, data.get("after") or {}
        out.append({
            "run_id": run_id, "started": _iso(started), "finished": _iso(finished), "status": status,
            "snapshot_id": snapshot_id, "raw": after.get("raw", before.get("raw")),
            "active_before": before.get("active"), "active_after": after.get("active"),
            "dormant": after.get("dormant"), "archived": after.get("archived"), "units": after.get("units"),
            "tokens_before": before.get("active_tokens"), "tokens_after": after.get("active_tokens"),
            "hot_tokens": after.get("hot_tokens"), "raw_tokens": after.get("raw_tokens"),
            "hot_share": after.get("hot_share"),
            "clustering": data.get("clustering"), "seconds": data.get("seconds"), "error": data.get("error"),
        })
    return out
