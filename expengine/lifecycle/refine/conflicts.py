"""Which of two units that say different things about the same situation stays active.

- Same cluster (and, for facts, same subject and attribute): the new unit is the re-refined view of
  the same evidence, so it replaces the old one.
- Rules with the same condition but a different action: the new one wins only with more support or
  fresher evidence (a later `as_of`, the time of its newest source). Lessons (rules with a `subject`,
  the feature that separates successes from failures) conflict only about the same feature.
- Facts with the same subject and attribute but a different statement: the newer one wins (ties:
  more support). Digests (which only quote) conflict only with their own cluster's older digest.
The loser is marked superseded (never deleted) and both are linked through supersedes / superseded_by.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from ...textutil import normalized
from .templates import DIGEST_ATTRIBUTE, Draft


@dataclass
class Decision:
    """`new_active`: whether the new unit becomes active; `losers`: active unit ids it supersedes;
    `winner`: the existing unit that beats it (when it does not become active)."""

    new_active: bool
    losers: list[str]
    winner: str | None = None


def _fresher(a: dt.datetime | None, b: dt.datetime | None) -> bool:
    return a is not None and (b is None or a > b)


def decide(draft: Draft, *, cluster_key: str, new_id: str, existing: list[dict[str, Any]]) -> Decision:
    """`existing`: the agent's active units of the same kind (dicts with id, cluster_key, condition,
    action, subject, attribute, statement, support, as_of)."""
    losers: list[str] = []
    for unit in existing:
        if unit["id"] == new_id:
            continue
        same_cluster = unit.get("cluster_key") == cluster_key
        if draft.kind == "fact":
            same_slot = normalized(unit.get("subject")) == normalized(draft.subject) and normalized(
                unit.get("attribute")
            ) == normalized(draft.attribute)
            if not same_slot or (draft.attribute == DIGEST_ATTRIBUTE and not same_cluster):
                continue  # digests quote, they claim nothing: only the same cluster's older digest gives way
            if (
                same_cluster
                or _fresher(draft.as_of, unit.get("as_of"))
                or (draft.as_of == unit.get("as_of") and draft.support > unit["support"])
            ):
                losers.append(unit["id"])
            else:
                return Decision(new_active=False, losers=[], winner=unit["id"])
            continue
        if same_cluster:
            losers.append(unit["id"])
            continue
        if normalized(unit.get("condition")) != normalized(draft.condition):
            continue
        if normalized(unit.get("action")) == normalized(draft.action):
            continue  # the same advice from two clusters: no contradiction
        if normalized(unit.get("subject")) != normalized(draft.subject):
            continue  # lessons about different features of one situation (or a lesson beside its procedure)
        if draft.support > unit["support"] or _fresher(draft.as_of, unit.get("as_of")):
            losers.append(unit["id"])
        else:
            return Decision(new_active=False, losers=[], winner=unit["id"])
    return Decision(new_active=True, losers=losers)
