"""One compaction cycle: a snapshot, then the declared `steps.STEPS` in order (decay → goal cleanup →
chatter → notes → cluster pruning → refinement → purge → index refresh), each in one DuckDB transaction, then
a report. Each step's report renders its own summary line (its `summary` key).

Safety:
- the Engine holds the store lock for the cycle, so one compaction (or ingest) runs at a time;
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
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..clock import utcnow
from ..results import Result
from ..store.pause import pause_for_tests
from ..store.reindex import rebuild
from ..store.stats import hot_text
from .cycle import CycleContext, finish, prepare
from .snapshot import create_snapshot, list_snapshots, restore_snapshot
from .steps import STEPS

if TYPE_CHECKING:
    from ..models.llm import LLMProvider
    from ..store.store import Store


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
    since: str | None = None  # the last cycle's watermark: the steps worked on what came after (None: all)
    swept: int = 0  # older records re-checked this cycle besides the new ones
    seconds: float = 0.0


def counts(store: "Store", *, keep: bool = False) -> Counts:
    """The store's figures; `keep`: remember the records' token counts (a real cycle's last count)."""
    con = store.con
    states = dict(con.execute("SELECT state, count(*) FROM records GROUP BY state").fetchall())
    return Counts(
        raw=int(sum(states.values())),
        active=int(states.get("active", 0)),
        dormant=int(states.get("dormant", 0)),
        archived=int(states.get("archived", 0)),
        clusters=int(con.execute("SELECT count(*) FROM clusters").fetchall()[0][0]),
        merged=int(con.execute("SELECT count(*) FROM records WHERE merged_into IS NOT NULL").fetchall()[0][0]),
        units=int(con.execute("SELECT count(*) FROM units WHERE status = 'active'").fetchall()[0][0]),
        **hot_text(store, keep=keep),
    )


def recover_interrupted(store: "Store") -> list[dict[str, Any]]:
    """Deal with runs a killed process left 'running' (we hold the lock, so nobody is running them).

    Normally the store goes back to the run's snapshot. If records were ingested after the run
    started, a restore would lose them: then the half-done cycle is kept (every step is safe to
    repeat) and LanceDB is rebuilt from DuckDB so the two agree again."""
    stale = store.con.execute(
        "SELECT id, snapshot_id, started FROM runs WHERE status = 'running' ORDER BY started"
    ).fetchall()
    recovered = []
    available = {s.id for s in list_snapshots(store)}
    for run_id, snapshot_id, started in stale:
        newer = store.con.execute("SELECT count(*) FROM records WHERE ingested_at > ?", [started]).fetchall()[0][0]
        if snapshot_id in available and not newer:
            restore_snapshot(store, snapshot_id)  # re-inserts the run row as 'rolled_back'
            recovered.append({"run_id": run_id, "snapshot_id": snapshot_id, "action": "rolled back"})
            break  # the restored store predates every later run
        rebuild(store)
        store.con.execute("UPDATE runs SET status = 'interrupted', finished = ? WHERE id = ?", [utcnow(), run_id])
        why = f"{newer} records ingested since" if newer else "snapshot missing"
        recovered.append({"run_id": run_id, "snapshot_id": snapshot_id, "action": f"kept ({why}); index rebuilt"})
    return recovered


def compact(
    store: "Store",
    llm: "LLMProvider",
    *,
    dry_run: bool = False,
    refine: bool = True,
    max_llm_calls: int | None = None,
    full: bool = False,
    now: dt.datetime | None = None,
) -> CompactReport:
    if dry_run:
        return _dry_run(store, llm, refine=refine, max_llm_calls=max_llm_calls, full=full, now=now)
    started = time.perf_counter()
    recovered = recover_interrupted(store)
    before = counts(store)
    clock = now or utcnow()
    snap_started, snap_cpu = time.perf_counter(), time.process_time()
    snapshot = create_snapshot(store, reason="before compaction")
    run_id = "run-" + clock.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    report = CompactReport(
        run_id=run_id,
        dry_run=False,
        clock=clock.isoformat(),
        snapshot_id=snapshot.id,
        before=before,
        recovered=recovered,
    )
    report.steps["snapshot"] = {
        "id": snapshot.id,
        "size_bytes": snapshot.size_bytes,
        "written_bytes": snapshot.written_bytes,
        "seconds": round(time.perf_counter() - snap_started, 3),
        "cpu_s": round(time.process_time() - snap_cpu, 3),
        "summary": snapshot.id,
    }
    store.con.execute(
        "INSERT INTO runs VALUES (?, ?, NULL, FALSE, 'running', ?, NULL)", [run_id, utcnow(), snapshot.id]
    )
    store.con.execute("CHECKPOINT")
    ctx = CycleContext(now=clock, run_id=run_id, llm=llm, refine=refine, max_llm_calls=max_llm_calls, full=full)
    try:
        _run_steps(store, report, ctx)
    except BaseException as exc:
        restore_snapshot(store, snapshot.id)
        store.con.execute(
            "UPDATE runs SET finished = ?, report = ? WHERE id = ?",
            [utcnow(), json.dumps({"error": str(exc) or type(exc).__name__}), run_id],
        )
        raise
    report.after = counts(store, keep=True)
    report.status = "completed"
    report.seconds = round(time.perf_counter() - started, 3)
    store.con.execute(
        "UPDATE runs SET finished = ?, status = 'completed', report = ? WHERE id = ?",
        [utcnow(), json.dumps(report.to_dict(), default=str), run_id],
    )
    store.shed_free_blocks()
    return report


def _run_steps(store: "Store", report: CompactReport, ctx: CycleContext) -> None:
    """Each step runs in one DuckDB transaction, so a concurrent reader sees the store before or after it."""
    upto = store.con.execute("SELECT max(ingested_at) FROM records").fetchall()[0][0]
    report.ingested_upto = _iso(upto)
    prepare(store, ctx)
    report.since = _iso(ctx.since)
    report.swept = len(ctx.sweep)
    for declared in STEPS:
        cpu = time.process_time()
        with store.transaction():
            result = declared.load().run(store, ctx)
        data = {**result.to_dict(), "cpu_s": round(time.process_time() - cpu, 3), "summary": result.summary()}
        ctx.reports[declared.name] = data
        report.steps[declared.name] = data
        pause_for_tests(store.dir, declared.name)
    with store.transaction():
        finish(store, ctx, upto)
    report.clustering = report.steps["clusters"].pop("clustering", report.steps["clusters"].get("skipped", ""))


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _dry_run(
    store: "Store",
    llm: "LLMProvider",
    *,
    refine: bool,
    max_llm_calls: int | None,
    full: bool,
    now: dt.datetime | None,
) -> CompactReport:
    """Run the real cycle on a temporary copy of the store and report it; the store is not touched.

    The copy is a rolled-back DuckDB transaction with an empty scratch LanceDB (the steps never read
    LanceDB; the index step reports what it would build), so a dry run copies no file and costs less
    than a real cycle, whose snapshot copies both."""
    started = time.perf_counter()
    clock = now or utcnow()
    report = CompactReport(run_id="dry-run", dry_run=True, clock=clock.isoformat(), before=counts(store))
    stale = store.con.execute("SELECT id, snapshot_id FROM runs WHERE status = 'running'").fetchall()
    report.recovered = [{"run_id": r, "snapshot_id": s, "action": "would be rolled back first"} for r, s in stale]
    with tempfile.TemporaryDirectory(prefix="expengine-dry-run-") as tmp, store.rehearsal(Path(tmp)) as copy:
        ctx = CycleContext(
            now=clock,
            run_id=report.run_id,
            llm=llm,
            dry_run=True,
            refine=refine,
            max_llm_calls=max_llm_calls,
            full=full,
        )
        _run_steps(copy, report, ctx)
        report.after = counts(copy)
    report.status = "dry-run"
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def history(store: "Store") -> list[dict[str, Any]]:
    """One row per compaction run, oldest first: the growth curve (raw vs active vs units)."""
    rows = store.con.execute(
        "SELECT id, started, finished, status, snapshot_id, report FROM runs WHERE NOT dry_run ORDER BY started"
    ).fetchall()
    out = []
    for run_id, started, finished, status, snapshot_id, report in rows:
        data = json.loads(report or "{}")
        before, after = data.get("before") or {}, data.get("after") or {}
        out.append(
            {
                "run_id": run_id,
                "started": _iso(started),
                "finished": _iso(finished),
                "status": status,
                "snapshot_id": snapshot_id,
                "raw": after.get("raw", before.get("raw")),
                "active_before": before.get("active"),
                "active_after": after.get("active"),
                "dormant": after.get("dormant"),
                "archived": after.get("archived"),
                "units": after.get("units"),
                "tokens_before": before.get("active_tokens"),
                "tokens_after": after.get("active_tokens"),
                "hot_tokens": after.get("hot_tokens"),
                "raw_tokens": after.get("raw_tokens"),
                "hot_share": after.get("hot_share"),
                "clustering": data.get("clustering"),
                "seconds": data.get("seconds"),
                "error": data.get("error"),
            }
        )
    return out
