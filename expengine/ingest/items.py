"""One input line's result (an event, a reject or a skipped line), and JSON parsing that refuses values
nested deeper than every reader and the redactor can walk."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .events import Event, EventError

# deeper than this, a JSON value is hostile: every reader and the redactor walk it recursively
MAX_DEPTH = 200
TOO_DEEP = f"JSON nested deeper than {MAX_DEPTH} levels"


@dataclass
class Item:
    """One input line's result: an event, a reject with the reason and raw text, or a line skipped by type."""

    file: str
    line: int
    event: Event | None = None
    error: str | None = None
    raw: str | None = None
    # the event was redacted already, this many times (a fleet's prepare stage, `redact_event`); None: not yet
    redacted: int | None = None
    # a line the tool writes that holds nothing to remember (`progress`, `token_count`): its type
    skipped: str | None = None


def parse(text: str | bytes) -> Any:
    """One JSON value; EventError when it is not JSON or is nested deeper than MAX_DEPTH."""
    try:
        obj = json.loads(text)
    except RecursionError:
        raise EventError(TOO_DEEP) from None
    except json.JSONDecodeError as exc:
        raise EventError(f"malformed JSON: {exc.msg} at column {exc.colno}") from None
    if nests_too_deep(obj, text):
        raise EventError(TOO_DEEP)
    return obj


def nests_too_deep(obj: Any, text: str | bytes) -> bool:
    """Whether a value parsed from `text` nests deeper than MAX_DEPTH."""
    return _may_nest(text) and _depth_over(obj, MAX_DEPTH)


def _may_nest(text: str | bytes) -> bool:
    """A cheap filter before walking a value: it cannot nest deeper than its number of brackets."""
    if isinstance(text, bytes):
        return text.count(b"[") + text.count(b"{") > MAX_DEPTH
    return text.count("[") + text.count("{") > MAX_DEPTH


def _depth_over(obj: Any, limit: int) -> bool:
    """Whether `obj` nests deeper than `limit`, walked without recursion (most lines are shallow: cheap)."""
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


def located(ev: Event, label: str, number: int, *, agent_override: str | None) -> Item:
    ev.source_file, ev.source_line = label, number
    if agent_override and ev.agent == "default":
        ev.agent = agent_override
    return Item(label, number, event=ev)
