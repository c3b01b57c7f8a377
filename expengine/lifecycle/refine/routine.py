"""Routine calls go to sleep: a cluster of one tool's calls that always succeeded, in several runs, whose
rule could only restate the tool's schema ("call get_reservation_details(reservation_id=…)").

Such a rule is rejected as vacuous (ground.py), so the cluster gets no unit that would stand for its
sources; left active, the calls fill the hot store with what the schema already says. Here they go
dormant with a reason of their own (`why` and `show` give it), never archived or purged by this step.
A record stays active when it is a failure, a lesson (error, outcome, goal, correction, fact …), a
user's or the agent's message, pinned or protected, or the last active record of its run: the run's
only evidence on the hot path.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from ...store.db import in_ids
from ...store.state import set_state
from .ground import restating_fields
from .mine import LESSON_CATEGORIES, TOOL_KINDS, Mined

if TYPE_CHECKING:
    from ...store.store import Store

ROUTINE_REASON = "routine call of {tool}: {calls} calls in {runs} runs, none failed; nothing beyond its schema ({key})"


def _run(record: dict[str, Any]) -> str | None:
    return record.get("session") or record.get("goal_id")


def is_routine(mined: Mined, rejected: list[dict[str, Any]], *, min_runs: int) -> bool:
    """A rejected rule of the cluster's tool had an action that only restates the tool's schema, and the
    cluster is that tool's calls, none failed, no user correction, seen in at least `min_runs` runs."""
    tool = mined.primary_tool
    if not any(
        fields.get("kind") == "rule" and restating_fields(fields, mined, names=("action",)) for fields in rejected
    ):
        return False
    if not tool or mined.error_results or mined.errors or mined.corrections:
        return False
    calls = [r for r in mined.records if r["kind"] in TOOL_KINDS and r.get("tool_name") == tool]
    if any(r.get("tool_error") for r in calls):
        return False
    return len({_run(r) for r in calls} - {None}) >= min_runs


def routine_ids(store: "Store", mined: Mined) -> list[str]:
    """The cluster's active calls and results of its tool that may sleep (see the module docstring)."""
    tool = mined.primary_tool
    candidates = [
        r
        for r in mined.records
        if r["kind"] in TOOL_KINDS
        and r.get("tool_name") == tool
        and r.get("state") == "active"
        and not r.get("tool_error")
        and r.get("category") not in LESSON_CATEGORIES
        and not r.get("pinned")
        and not r.get("protected")
    ]
    ids = [r["id"] for r in candidates]
    runs = sorted({run for r in candidates if (run := _run(r))})
    in_runs, params = in_ids("coalesce(session, goal_id)", runs)
    staying = dict(
        store.con.execute(
            f"SELECT coalesce(session, goal_id) AS run, count(*) FROM records WHERE state = 'active' "
            f"AND {in_runs} AND id NOT IN (SELECT unnest(?)) GROUP BY run",
            [*params, ids],
        ).fetchall()
    )
    return [r["id"] for r in candidates if _run(r) is not None and staying.get(_run(r), 0) > 0]


def sleep_routine(
    store: "Store",
    mined: Mined,
    cluster_key: str,
    *,
    run_id: str | None,
    now: dt.datetime,
    dry_run: bool,
) -> int:
    """Put the cluster's routine calls to sleep with their reason; how many (would) go."""
    ids = routine_ids(store, mined)
    if dry_run:
        return len(ids)
    calls = [r for r in mined.records if r["kind"] == "tool_call" and r.get("tool_name") == mined.primary_tool]
    reason = ROUTINE_REASON.format(
        tool=mined.primary_tool,
        calls=len(calls) or mined.calls,
        runs=len({_run(r) for r in mined.records if r.get("tool_name") == mined.primary_tool} - {None}),
        key=cluster_key,
    )
    return set_state(store, ids, "dormant", reason=reason, run_id=run_id, now=now)
