"""Error rules that give the same fix in other words become one rule.

A run that hit get_weather's 429 wrote down why it waited in its own words, so each cluster of such
runs gave its own rule: "When get_weather fails with '429 Too Many Requests': note 'Rate limit hit,
sleeping 60s', then rerun get_weather", and again with "note 'Backing off 60 seconds'", three times in
one prompt. An error rule (`when_fails`: a tool and its error) whose action is an active error rule's
but for the quoted text, ids and numbers in it, for the same tool and an error that differs at most
in its ids, is merged into that rule (write.py merges it as it merges twins and slot rules, slots.py):
one rule with the sources and counts of both. It keeps the wording of the one with more support; an
error that differed in an id names it "…". Coding projects' fix rules ("In django/django, when …",
fixes.py) are keyed by their error already and are not error rules here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from typing import Any

from ...textutil import ID, normalized
from .templates import Draft
from .wording import WORDINGS

# a value the same fix is written down with: a quoted text (a note, an argument), then an id, then a number
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|“[^”\n]*”")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
ANY_VALUE = "…"


@functools.cache
def _fails(language: str) -> re.Pattern[str]:
    """The language's "When {tool} fails with {error}" as a pattern with the tool and the error named."""
    template = re.escape(WORDINGS[language].when_fails)
    tool, error = re.escape("{tool}"), re.escape("{error}")
    return re.compile(template.replace(tool, r"(?P<tool>\S+)").replace(error, r"(?P<error>.+)"), re.DOTALL)


def _tool_and_error(condition: str | None, language: str) -> tuple[str, str] | None:
    match = _fails(language).fullmatch(condition or "")
    return (match["tool"], match["error"]) if match else None


def _fix(action: str | None) -> str:
    """The action without its values: what two wordings of the same fix share."""
    return normalized(_NUMBER.sub("N", ID.sub(ANY_VALUE, _QUOTED.sub(ANY_VALUE, action or ""))))


def _error(error: str) -> str:
    return normalized(ID.sub(ANY_VALUE, error))


def _not_a_lesson(unit: dict[str, Any]) -> bool:
    """A rule without a subject: lessons (lessons.py) contrast one cluster's runs and stay with it."""
    return unit.get("kind") == "rule" and not unit.get("subject")


def same_fix(draft: Draft, row: dict[str, Any], active: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, Draft]:
    """The active error rule that `row` (`draft` as a unit row) gives the same fix as, in other words,
    and `draft` worded as the one of the two with more support; (None, `draft`) when there is none."""
    failing = _tool_and_error(draft.condition, draft.language)
    if failing is None or not _not_a_lesson(row):
        return None, draft
    tool, error = failing[0], _error(failing[1])
    fix = _fix(draft.action)
    for unit in active:
        if unit["id"] == row["id"] or not _not_a_lesson(unit):
            continue
        theirs = _tool_and_error(unit.get("condition"), draft.language)
        if theirs is None or theirs[0] != tool or _error(theirs[1]) != error or _fix(unit.get("action")) != fix:
            continue
        worded = unit if (unit.get("support") or 0) >= draft.support else row
        condition = worded["condition"]
        if normalized(unit["condition"]) != normalized(draft.condition):
            condition = ID.sub(ANY_VALUE, condition)  # the errors differ in an id
        fields = {name: worded[name] for name in ("action", "expected_outcome", "pitfall")}
        return unit, replace(draft, condition=condition, **fields)
    return None, draft
