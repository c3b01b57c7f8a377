"""Sources a new unit stands for leave the fast store: process records are archived, quoted
messages go dormant; lessons, pinned and protected records stay."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from ...store.db import json_ids
from ...store.state import set_state
from ...store.vocabulary import ARCHIVE_AFTER_WINDOW
from .facts import speaker_and_text
from .mine import LESSON_CATEGORIES
from .templates import DIGEST_ATTRIBUTE

if TYPE_CHECKING:
    from ...store.store import Store


NEVER_DORMANT_CATEGORIES = ("error", "outcome", "feedback", "preference", "safety")
ARCHIVABLE_KINDS = ("tool_call", "tool_result")  # observations often carry the lesson (what followed an error)


def archive_sources(
    store: "Store", unit: dict[str, Any], records: list[dict[str, Any]], run_id: str | None, now: dt.datetime
) -> int:
    """Process records a rule now stands for go dormant, marked for purge to archive after the
    observation window (a query that uses one meanwhile keeps it), or are archived at once when
    `refine.observe_sources` is off; lessons and protected ones stay."""
    wanted = set(json_ids(unit["source_ids"]))
    ids = [
        r["id"]
        for r in records
        if r["id"] in wanted
        and r["kind"] in ARCHIVABLE_KINDS
        and not r.get("tool_error")
        and r.get("category") not in LESSON_CATEGORIES
        and not r.get("pinned")
        and not r.get("protected")
        and r.get("state") != "archived"
    ]
    if not store.config.refine.observe_sources:
        return set_state(store, ids, "archived", reason=f"refined into {unit['id']}", run_id=run_id, now=now)
    return set_state(store, ids, "dormant", reason=f"{ARCHIVE_AFTER_WINDOW} {unit['id']}", run_id=run_id, now=now)


def sleep_covered_sources(
    store: "Store", unit: dict[str, Any], records: list[dict[str, Any]], run_id: str | None, now: dt.datetime
) -> int:
    """Active message sources the unit stands for go dormant (a digest stands for all its members, any
    other unit for the ones it quotes verbatim); they stay reachable through the unit. Lessons, pinned
    and protected records stay active."""
    wanted = set(json_ids(unit["source_ids"]))
    digest = unit.get("attribute") == DIGEST_ATTRIBUTE
    unit_text = " ".join((unit["text"] or "").split()).lower()
    ids = [
        r["id"]
        for r in records
        if r["id"] in wanted
        and r["kind"] == "message"
        and r.get("state") == "active"
        and not r.get("tool_name")
        and r.get("category") not in NEVER_DORMANT_CATEGORIES
        and not r.get("pinned")
        and not r.get("protected")
        and (digest or " ".join(speaker_and_text(r)[1].split()).lower() in unit_text)
    ]
    return set_state(store, ids, "dormant", reason=f"covered by unit {unit['id']}", run_id=run_id, now=now)
