"""Rules that give the same fix (or make the same call) in other words become one rule.

A run that hit get_weather's 429 wrote down why it waited in its own words, so each cluster of such
runs gave its own rule: "When get_weather fails with '429 Too Many Requests': note 'Rate limit hit,
sleeping 60s', then rerun get_weather", and again with "note 'Backing off 60 seconds'", three times in
one prompt; a tool's rule kept one cluster's recurring value ("call get_weather(city=Dublin, …)")
beside the rule without it. A rule whose action is an active rule's but for its values (quoted text,
arguments' values, ids, numbers), for the same situation (the same tool and an error that differs at
most in its ids and days, or the same condition but for its ids), is merged into that rule (write.py
merges it as it merges twins and slot rules, slots.py): one rule with the sources and counts of both,
worded as the one with more support, but for the values the two do not share (an argument's value, an
id), which it names "…", as it does an error that differed in an id or a day. Lessons
(rules with a subject) stay with their cluster; rules for other requests are slots.py's.
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from typing import Any

from ...textutil import ANY_VALUE, ARGUMENT_VALUE, ID, fix_without_values, normalized
from .templates import Draft
from .wording import WORDINGS

# a day (and time) an error names: "flight HAT001 not available on date 2024-05-14"
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b")


@functools.cache
def _fails(language: str) -> re.Pattern[str]:
    """The language's "When {tool} fails with {error}" as a pattern with the tool and the error named."""
    template = re.escape(WORDINGS[language].when_fails)
    tool, error = re.escape("{tool}"), re.escape("{error}")
    return re.compile(template.replace(tool, r"(?P<tool>\S+)").replace(error, r"(?P<error>.+)"), re.DOTALL)


def _without_ids(text: str) -> str:
    return ID.sub(ANY_VALUE, _DATE.sub(ANY_VALUE, text))


def _situation(condition: str | None, language: str) -> tuple[str, ...] | None:
    """What a rule's condition is about: a tool and its error (its ids and days aside), or the condition
    itself (its ids aside); None without one."""
    if not condition:
        return None
    match = _fails(language).fullmatch(condition)
    if match:
        return ("fails", match["tool"], normalized(_without_ids(match["error"])))
    return ("when", normalized(ID.sub(ANY_VALUE, condition)))


def _common_values(action: str, other: str) -> str:
    """`action` with each argument's value and id that `other` does not give too as "…": one run's or
    one user's values ("passenger_id=u-104, seat_pref=aisle") are not the merged rule's, and a rule
    learnt from several users' runs quotes no one."""
    given = dict(ARGUMENT_VALUE.findall(other))
    action = ARGUMENT_VALUE.sub(lambda m: m[0] if given.get(m[1]) == m[2] else f"{m[1]}={ANY_VALUE}", action)
    ids = set(ID.findall(other))
    return ID.sub(lambda m: m[0] if m[0] in ids else ANY_VALUE, action)


def _not_a_lesson(unit: dict[str, Any]) -> bool:
    """A rule without a subject: lessons (lessons.py) contrast one cluster's runs and stay with it."""
    return unit.get("kind") == "rule" and not unit.get("subject")


def same_fix(draft: Draft, row: dict[str, Any], active: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, Draft]:
    """The active rule that `row` (`draft` as a unit row) gives the same fix or call as, in other words,
    and `draft` worded as the one of the two with more support; (None, `draft`) when there is none."""
    situation = _situation(draft.condition, draft.language)
    if situation is None or not _not_a_lesson(row):
        return None, draft
    fix = fix_without_values(draft.action)
    for unit in active:
        if unit["id"] == row["id"] or not _not_a_lesson(unit):
            continue
        if (
            _situation(unit.get("condition"), draft.language) != situation
            or fix_without_values(unit.get("action")) != fix
        ):
            continue
        worded = unit if (unit.get("support") or 0) >= draft.support else row
        condition = worded["condition"]
        if normalized(unit["condition"]) != normalized(draft.condition):
            condition = _without_ids(condition)  # the errors differ in an id or a day
        other = row if worded is unit else unit
        action = _common_values(worded["action"] or "", other.get("action") or "")
        fields = {name: worded[name] for name in ("expected_outcome", "pitfall")}
        return unit, replace(draft, condition=condition, action=action, **fields)
    return None, draft
