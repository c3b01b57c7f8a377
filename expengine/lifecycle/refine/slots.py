"""Procedure rules that differ only in what the user asked about become one rule naming the slot.

Intents are grouped by the words of their requests, so "weather Chicago tomorrow?" and "Do I need an
umbrella in Boston?" land in different intents, each with the same procedure: get_weather with the
city taken from the user's words. Eight such rules on the support bot said one thing eight times. A
procedure rule of an intent whose action is the same as an active one of another intent, when that
action takes a value from the user (the slot: a city, an order id, a date), is merged into it: one
rule whose condition names the slot and keeps examples of both ("For a weather request for a city
(e.g. 'weather Chicago tomorrow?' / 'Do I need an umbrella in Boston?'): get_weather(city ← from the
user, …)"), with the sources and counts of both (write.py merges them as it merges twins). Only
procedures: lessons (a `subject`) contrast one intent's runs and stay with their intent.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ...textutil import normalized
from .templates import Draft
from .wording import WORDINGS

INTENT_PREFIX = "intent:"
MAX_EXAMPLES = 3
# a tool's leading verb, left out of the request's topic: get_weather → weather, lookup_order → order
_VERB = re.compile(r"^(?:get|lookup|look_up|search|find|fetch|check|read|list|request|create|send|book|set|run)_")
_ARGUMENT = re.compile(r"(\w+) ← ([^,)]+)")


def _procedure(unit: dict[str, Any]) -> bool:
    """An intent's procedure rule: of an intent's rules, only lessons have a subject."""
    return (
        unit.get("kind") == "rule"
        and not unit.get("subject")
        and str(unit.get("cluster_key") or "").startswith(INTENT_PREFIX)
    )


def user_slots(action: str | None, language: str) -> list[str]:
    """The argument names whose value the procedure takes from the user's words."""
    said = WORDINGS[language].from_user
    return [name for name, origin in _ARGUMENT.findall(action or "") if origin.strip() == said]


def generalised(draft: Draft, row: dict[str, Any], active: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, Draft]:
    """The active procedure rule of another intent that `row` (`draft` as a unit row) says the same as
    but for the slot's value, and `draft` with the condition naming the slot; (None, `draft`) when there
    is none."""
    if not _procedure(row) or not user_slots(draft.action, draft.language):
        return None, draft
    action = normalized(draft.action)
    twin = next(
        (u for u in active if u["id"] != row["id"] and _procedure(u) and normalized(u.get("action")) == action), None
    )
    if twin is None:
        return None, draft
    return twin, replace(draft, condition=slot_condition(draft, [twin.get("condition"), draft.condition]))


def examples(condition: str | None, language: str) -> list[str]:
    """The requests a condition quotes, in order."""
    words = WORDINGS[language]
    opening, closing = words.quote.split("{text}")
    body = condition or ""
    start = body.find(opening)
    if start < 0:
        return []
    end = body.rfind(closing)
    inner = body[start + len(opening) : end if end > start else len(body)]
    return [q.strip().strip(opening + closing) for q in inner.split(closing + words.request_separator + opening)]


def slot_condition(draft: Draft, conditions: list[str | None]) -> str:
    """ "For a weather request for a city (e.g. 'a' / 'b' / 'c')": the topic from the first tool's name, the
    slot from the first argument the user gives, examples taken in turn from each condition. Other
    languages keep their "requests like" wording with the examples of both."""
    words = WORDINGS[draft.language]
    quoted = [examples(c, draft.language) for c in conditions]
    picked: list[str] = []
    for n in range(max(map(len, quoted), default=0)):
        picked += [q[n] for q in quoted if n < len(q) and q[n] not in picked]
    quotes = words.request_separator.join(words.quoted(q) for q in picked[:MAX_EXAMPLES])
    if draft.language != "en":
        return words.requests_like.format(quotes=quotes)
    tool = (draft.action or "").split("(")[0].strip()
    topic = _VERB.sub("", tool).replace("_", " ")
    slot = user_slots(draft.action, draft.language)[0].replace("_", " ")
    return f"For {_a(topic)} request for {_a(slot)} (e.g. {quotes})"


def _a(noun: str) -> str:
    """ "an order", "a user id": by the first letter, a "u" sounding "you" unless "un…"/"up…"."""
    vowel = noun[:1] in "aeio" or noun[:2] in ("un", "up")
    return f"{'an' if vowel else 'a'} {noun}"
