"""Run outcomes that arrive apart from the runs: an evaluation report graded the runs afterwards.

An sb-cli report (SWE-bench's `resolved_ids` / `unresolved_ids`) or JSONL of `{session, outcome}`
becomes, per run, a goal status and an `outcome` record in that run's session, so goal-linked
cleanup and outcome contrast see which runs worked.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterator

from ..store.vocabulary import OUTCOMES, EventError
from .events import Event

_STATUS = {"success": "succeeded", "failure": "failed", "partial": "open"}


def is_report(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("resolved_ids"), list)


def is_outcome_line(obj: Any) -> bool:
    """`{session, outcome}` (or `resolved`): a native line that lacks `kind` must get the native error, not this one."""
    return isinstance(obj, dict) and "kind" not in obj and "session" in obj and ("outcome" in obj or "resolved" in obj)


def outcomes_of_report(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(session, outcome) pairs of an sb-cli report; an id listed as resolved wins over a stale unresolved one."""
    resolved = [str(i) for i in obj.get("resolved_ids") or []]
    unresolved = [str(i) for i in obj.get("unresolved_ids") or [] if str(i) not in set(resolved)]
    return [(i, "success") for i in resolved] + [(i, "failure") for i in unresolved]


def outcome_of_line(obj: Any) -> tuple[str, str]:
    """One `{session, outcome}` object (`resolved: true/false` is read as success/failure too)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("session"), str) or not obj["session"]:
        raise EventError("an outcome line needs `session` (the run's session id) and `outcome`")
    outcome = obj.get("outcome")
    if outcome is None and isinstance(obj.get("resolved"), bool):
        outcome = "success" if obj["resolved"] else "failure"
    if outcome not in OUTCOMES:
        raise EventError(f"`outcome` must be one of {', '.join(OUTCOMES)} (got {outcome!r})")
    return obj["session"], outcome


def events_from_outcome(session: str, outcome: str, *, agent: str, ts: dt.datetime) -> Iterator[Event]:
    """The goal named after the session closes, and the outcome is recorded (stable ids: re-ingesting is a no-op)."""
    yield Event(
        ts=ts,
        kind="goal",
        id=f"{session}/graded",
        agent=agent,
        session=session,
        goal_id=session,
        goal_status=_STATUS[outcome],
        content=f"run {session} graded {outcome}",
    )
    yield Event(
        ts=ts,
        kind="outcome",
        id=f"{session}/outcome",
        agent=agent,
        session=session,
        goal_id=session,
        outcome=outcome,
        content=f"run {session} ended in {outcome}",
    )
