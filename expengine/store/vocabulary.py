"""The record vocabulary: what a record's kind, role, goal status, outcome and feedback signal may
be, how a time is read, and the meta key of an assumed time. Ingest validates against it, query
filters check against it and refinement reads it, so it lives below them all."""

from __future__ import annotations

import datetime as dt
from typing import Any

KINDS = ("message", "tool_call", "tool_result", "observation", "goal", "outcome", "feedback", "note")
ROLES = ("user", "assistant", "system", "tool")
GOAL_STATUSES = ("open", "succeeded", "failed", "cancelled")
OUTCOMES = ("success", "failure", "partial")
SIGNALS = ("positive", "negative")
# A unit's statuses in which it is indexed, a query candidate, refined into and merged with
LIVE_UNIT_STATUSES = ("active", "dormant")
LIVE_SQL = "status IN ('active', 'dormant')"
# The text a unit's LanceDB vector embeds: a rule keyed by the situation is found by what is asked, so
# its vector is its condition (the typical requests of its intent); full-text search still sees its
# whole text (tools, arguments). Every other unit embeds its text.
UNIT_EMBEDDED_TEXT = "CASE WHEN cluster_key LIKE 'intent:%' AND condition IS NOT NULL THEN condition ELSE text END"
# The reason refinement marks a rule's process sources with: purge archives them once the observation
# window has passed without a query touching them (mark → observe → clean), whatever their weight.
# Until then they are treated as archived: out of LanceDB (their vectors and words would move the
# full-text statistics and fused ranks of what stays) and of every compaction step; one that is woken
# is indexed again.
ARCHIVE_AFTER_WINDOW = "refined into"
OBSERVED_SQL = f"(state = 'dormant' AND starts_with(coalesce(state_reason, ''), '{ARCHIVE_AFTER_WINDOW} '))"
# The records LanceDB holds and the compaction steps work on (decay, goal cleanup, chatter, refinement's
# fallback clusters): active and dormant ones, less those waiting out the observation window, which every
# step treats as archived (frozen, out of the cycle) until purge archives them or a query wakes them
INDEXED_RECORDS_SQL = f"(state IN ('active', 'dormant') AND NOT {OBSERVED_SQL})"


class EventError(ValueError):
    """Why one input line was rejected; the message names the field and the fix."""


TIME_ASSUMED = "time_assumed"  # meta key: the source had no time, `ts` is the ingest time


def parse_ts(value: Any) -> dt.datetime:
    """ISO-8601 (no zone means UTC) or epoch seconds, returned as naive UTC."""
    if isinstance(value, bool):
        raise EventError("`ts` must be an ISO-8601 string or epoch seconds, got a boolean")
    if isinstance(value, (int, float)):
        try:
            return dt.datetime.fromtimestamp(float(value), tz=dt.timezone.utc).replace(tzinfo=None)
        except (OverflowError, OSError, ValueError) as exc:
            raise EventError(f"`ts` epoch seconds out of range: {value}") from exc
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = dt.datetime.fromisoformat(text)
        except ValueError as exc:
            raise EventError(f"`ts` is not ISO-8601: {value!r} (use e.g. 2026-03-01T09:15:00Z)") from exc
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return parsed
    raise EventError(f"`ts` must be an ISO-8601 string or epoch seconds, got {type(value).__name__}")
