"""Whose memory an event is, for logs that keep the person somewhere other than `user`
(`ingest --user-field meta.customer`)."""

from __future__ import annotations

from typing import Any

from .events import Event
from .readers import Item


def _fields(ev: Event) -> dict[str, Any]:
    """The event as the nested object a dotted path walks: its fields, with `tool` and `goal` as the
    native format spells them."""
    view: dict[str, Any] = dict(ev.__dict__)
    view["tool"] = {"name": ev.tool_name, "args": ev.tool_args, "result": ev.tool_result, "call_id": ev.tool_call_id}
    view["goal"] = {"id": ev.goal_id, "status": ev.goal_status, "description": ev.goal_description}
    return view


def user_at(ev: Event, path: str) -> str | None:
    """The value at the dotted `path` of the event (`meta.customer`), as text; None where the path
    leads nowhere (the event is shared). A value that is not a string or a number is a ValueError."""
    value: Any = _fields(ev)
    for step in path.split("."):
        if not isinstance(value, dict) or value.get(step) is None:
            return None
        value = value[step]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"--user-field {path} must lead to a string or a number, got {type(value).__name__}")
    return str(value) or None


def with_user(item: Item, path: str) -> Item:
    """`item` with its event's user taken from `path` (kept when the path leads nowhere), or a reject
    naming the field when the value there cannot be a user."""
    assert item.event is not None
    try:
        found = user_at(item.event, path)
    except ValueError as exc:
        return Item(item.file, item.line, error=str(exc), raw=None)
    if found is not None:
        item.event.user = found
    return item
