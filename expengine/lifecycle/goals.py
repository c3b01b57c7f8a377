"""Goal-linked cleanup: retention follows what happened to the goal a memory served.

Each goal whose status changed since it was last handled (`goals.handled_status`) is handled once:
- succeeded: its *process* memories (intermediate tool calls and results, failed tries that were
  never fixed, chatter, in-between messages) are weakened by `goal_success_process_factor`; its
  *lessons* (the outcome, errors that were later fixed, the final successful call of each tool and
  its result, the final answer, user corrections and preferences) get `delta_task_success`;
- failed: the records that explain the failure (errors, the call that caused each error, the last
  action taken, user corrections, the outcome) get `delta_task_failure_lesson` (and wake if dormant);
- cancelled: nothing; open goals are never touched (long-term goals slow decay, see decay.py).
Memories link to a goal by `goal_id`, or, when they have none, by session within the goal's time span;
archived ones, and a rule's sources waiting out the observation window to be archived, are left out.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..clock import utcnow
from ..results import Result
from ..store.db import arrow_view
from ..store.state import set_state
from ..store.vocabulary import INDEXED_RECORDS_SQL
from .common import examples

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext

CORRECTION_CATEGORIES = ("preference", "safety", "feedback")
PROCESS_CATEGORIES = ("process", "tool", "chatter", "conversation")
FIELDS = (
    "id",
    "kind",
    "role",
    "text",
    "tool_name",
    "tool_error",
    "tool_call_id",
    "category",
    "protected",
    "pinned",
    "feedback_signal",
    "weight",
    "state",
)


@dataclass
class GoalCleanupReport(Result):
    goals_handled: dict[str, int] = field(default_factory=dict)
    process_weakened: int = 0
    lessons_reinforced: int = 0
    failure_records_reinforced: int = 0
    became_dormant: int = 0
    woke_up: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"goals {self.goals_handled}: {self.process_weakened} process weakened, {self.lessons_reinforced} "
            f"lessons and {self.failure_records_reinforced} failure records reinforced, {self.became_dormant} dormant"
        )


def _is_correction(r: dict[str, Any]) -> bool:
    if r["kind"] == "feedback":
        return r["feedback_signal"] == "negative" or r["category"] in CORRECTION_CATEGORIES
    return r["role"] == "user" and (bool(r["protected"]) or r["category"] in CORRECTION_CATEGORIES)


def _call_of(records: list[dict[str, Any]], position: int) -> str | None:
    """The tool_call that produced the tool_result at `position` (same call id, else the nearest earlier call of the tool)."""
    result = records[position]
    for r in reversed(records[:position]):
        if r["kind"] != "tool_call":
            continue
        if result["tool_call_id"] and r["tool_call_id"]:
            if r["tool_call_id"] == result["tool_call_id"]:
                return r["id"]
        elif r["tool_name"] == result["tool_name"]:
            return r["id"]
    return None


def classify_succeeded(records: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    """(lessons, process) among a succeeded goal's records, given in time order."""
    lessons: set[str] = set()
    last_ok: dict[str, int] = {}
    for i, r in enumerate(records):
        if r["kind"] == "tool_result" and not r["tool_error"]:
            last_ok[r["tool_name"] or ""] = i
    for i, r in enumerate(records):
        if r["kind"] in ("outcome", "goal") or _is_correction(r):
            lessons.add(r["id"])
        elif r["kind"] == "tool_result" and r["tool_error"] and last_ok.get(r["tool_name"] or "", -1) > i:
            lessons.add(r["id"])  # an error that was fixed later: the pitfall half of the lesson
    for i in last_ok.values():
        lessons.add(records[i]["id"])
        call = _call_of(records, i)
        if call:
            lessons.add(call)
    answers = [r for r in records if r["kind"] == "message" and r["role"] == "assistant"]
    if answers:
        lessons.add(answers[-1]["id"])
    process = {
        r["id"]
        for r in records
        if r["id"] not in lessons
        and not (r["pinned"] or r["protected"])
        and (
            r["kind"] in ("tool_call", "tool_result")
            or (r["kind"] == "message" and r["category"] in PROCESS_CATEGORIES)
        )
    }
    return lessons, process


def classify_failed(records: list[dict[str, Any]]) -> set[str]:
    """The records that explain a failure: errors and their calls, the last action, corrections, the outcome."""
    explain: set[str] = set()
    for i, r in enumerate(records):
        if r["kind"] == "outcome" or _is_correction(r):
            explain.add(r["id"])
        if r["kind"] == "tool_result" and r["tool_error"]:
            explain.add(r["id"])
            call = _call_of(records, i)
            if call:
                explain.add(call)
    calls = [r for r in records if r["kind"] == "tool_call"]
    if calls:
        explain.add(calls[-1]["id"])
    return explain


def _pending_goals(store: "Store") -> list[tuple]:
    return store.con.execute(
        """SELECT goal_id, agent, session, status, opened, updated FROM goals
           WHERE status IN ('succeeded', 'failed', 'cancelled') AND handled_status IS DISTINCT FROM status
           ORDER BY updated, goal_id"""
    ).fetchall()


GOALS_PER_READ = 500  # pending goals whose records one query reads


def _linked_records(store: "Store", goals: list[tuple]) -> dict[str, list[dict[str, Any]]]:
    """Each goal's records (by `goal_id`, or by session within its time span when they have none), in
    time order, read `GOALS_PER_READ` goals a query: a query per goal scanned the whole table each time
    (a night's 240 goals on a store of 1M records)."""
    linked: dict[str, list[dict[str, Any]]] = {}
    columns = ", ".join(f"r.{f}" for f in FIELDS)
    for start in range(0, len(goals), GOALS_PER_READ):
        some = goals[start : start + GOALS_PER_READ]
        table = pa.table(
            {
                "goal_id": [g[0] for g in some],
                "agent": pa.array([g[1] for g in some], pa.string()),
                "session": pa.array([g[2] for g in some], pa.string()),
                "opened": pa.array([g[4] for g in some], pa.timestamp("us")),
                "updated": pa.array([g[5] for g in some], pa.timestamp("us")),
            }
        )
        with arrow_view(store.con, "pending_goals", table):
            rows = store.con.execute(
                f"""SELECT g.goal_id, r.ts AS at, {columns} FROM records r JOIN pending_goals g ON r.goal_id = g.goal_id
                    WHERE {INDEXED_RECORDS_SQL}
                    UNION ALL
                    SELECT g.goal_id, r.ts AS at, {columns} FROM records r
                    JOIN pending_goals g ON r.agent = g.agent AND r.session = g.session
                    WHERE r.goal_id IS NULL AND r.ts BETWEEN g.opened AND g.updated AND {INDEXED_RECORDS_SQL}
                    ORDER BY 1, 2, 3"""
            ).fetchall()
        for goal_id, _, *values in rows:
            linked.setdefault(goal_id, []).append(dict(zip(FIELDS, values)))
    return linked


def goal_cleanup(
    store: "Store", *, dry_run: bool, run_id: str | None = None, now: dt.datetime | None = None
) -> GoalCleanupReport:
    started = time.perf_counter()
    cfg = store.config.decay
    report = GoalCleanupReport()
    new_weight: dict[str, float] = {}
    why: dict[str, str] = {}
    text: dict[str, str] = {}
    states: dict[str, str] = {}
    goals = _pending_goals(store)
    linked = _linked_records(store, [g for g in goals if g[3] != "cancelled"])
    for goal in goals:
        goal_id, status = goal[0], goal[3]
        report.goals_handled[status] = report.goals_handled.get(status, 0) + 1
        if status == "cancelled":
            continue
        records = linked.get(goal_id, [])
        for r in records:
            text[r["id"]], states[r["id"]] = r["text"], r["state"]
        weight = {r["id"]: new_weight.get(r["id"], r["weight"]) for r in records}
        if status == "succeeded":
            lessons, process = classify_succeeded(records)
            for rid in process:
                new_weight[rid], why[rid] = (
                    weight[rid] * cfg.goal_success_process_factor,
                    f"process of succeeded goal {goal_id}",
                )
            for rid in lessons:
                new_weight[rid], why[rid] = weight[rid] + cfg.delta_task_success, f"lesson of succeeded goal {goal_id}"
            report.process_weakened += len(process)
            report.lessons_reinforced += len(lessons)
        else:
            explain = classify_failed(records)
            for rid in explain:
                new_weight[rid], why[rid] = (
                    weight[rid] + cfg.delta_task_failure_lesson,
                    f"explains failed goal {goal_id}",
                )
            report.failure_records_reinforced += len(explain)
    to_sleep = sorted(i for i, w in new_weight.items() if states[i] == "active" and w < cfg.theta_dormant)
    to_wake = sorted(i for i, w in new_weight.items() if states[i] == "dormant" and w >= cfg.theta_dormant)
    report.became_dormant, report.woke_up = len(to_sleep), len(to_wake)
    report.examples = examples(
        sorted(new_weight), lambda i: {"id": i, "text": text[i], "weight": round(new_weight[i], 4), "why": why[i]}
    )
    if not dry_run and goals:
        _apply(store, new_weight, why, goals, run_id, now)
        set_state(store, to_sleep, "dormant", reason="goal succeeded: process memory", run_id=run_id, now=now)
        set_state(store, to_wake, "active", reason="goal failed: explains the failure", run_id=run_id, now=now)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _apply(
    store: "Store",
    new_weight: dict[str, float],
    why: dict[str, str],
    goals: list[tuple],
    run_id: str | None,
    now: dt.datetime | None,
) -> None:
    con = store.con
    ids = sorted(new_weight)
    table = pa.table({"id": ids, "w": [float(new_weight[i]) for i in ids], "why": [why[i] for i in ids]})
    with arrow_view(con, "goal_weights", table):
        con.execute("UPDATE records SET weight = g.w FROM goal_weights g WHERE records.id = g.id")
        con.execute(
            "INSERT INTO history SELECT id, ?, 'goal_cleanup', why || ' (weight ' || round(w, 4) || ')', ? FROM goal_weights",
            [now or utcnow(), run_id],
        )
    con.executemany("UPDATE goals SET handled_status = status WHERE goal_id = ?", [[g[0]] for g in goals])


class GoalsStep:
    def run(self, store: "Store", ctx: "CycleContext") -> GoalCleanupReport:
        return goal_cleanup(store, dry_run=False, run_id=ctx.run_id, now=ctx.now)
