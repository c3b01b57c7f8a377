"""The validated, normalised form of one input event, whatever format it came from."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ..store.vocabulary import GOAL_STATUSES, KINDS, OUTCOMES, ROLES, SIGNALS, EventError, parse_ts


class Skipped(Exception):
    """A line the tool writes that holds nothing to remember (hook progress, token counts): counted by its
    type, not rejected as bad input."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass
class Event:
    ts: dt.datetime
    kind: str
    id: str | None = None
    agent: str = "default"
    session: str | None = None
    goal_id: str | None = None
    role: str | None = None
    content: str | None = None
    tool_name: str | None = None
    tool_args: Any = None
    tool_result: Any = None
    tool_error: str | None = None
    tool_call_id: str | None = None
    goal_status: str | None = None
    goal_description: str | None = None
    goal_long_term: bool | None = None
    outcome: str | None = None
    feedback_signal: str | None = None
    feedback_target: str | None = None
    feedback_text: str | None = None
    importance: float | None = None
    category: str | None = None
    tags: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    source_file: str | None = None
    source_line: int | None = None

    def content_hash(self) -> str:
        """Hash of everything the event says (not where it came from): equal events share it."""
        payload = {
            k: v
            for k, v in self.__dict__.items()
            if k not in ("source_file", "source_line") and v not in (None, [], {})
        }
        payload["ts"] = self.ts.isoformat()
        blob = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def _opt_str(obj: dict[str, Any], key: str, where: str = "") -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and key in ("id", "session", "goal_id", "target")
    ):
        return str(value)
    if not isinstance(value, str):
        raise EventError(f"`{where}{key}` must be a string, got {type(value).__name__}")
    return value


def _choice(obj: dict[str, Any], key: str, allowed: tuple[str, ...], where: str = "") -> str | None:
    value = _opt_str(obj, key, where)
    if value is not None and value not in allowed:
        raise EventError(f"`{where}{key}` must be one of {', '.join(allowed)}, got {value!r}")
    return value


def event_from_native(obj: Any) -> Event:
    """Validate one parsed native JSON object; raise EventError naming the field on any problem."""
    if not isinstance(obj, dict):
        raise EventError(f"a line must be a JSON object, got {type(obj).__name__}")
    if "ts" not in obj:
        raise EventError("missing required field `ts` (ISO-8601 or epoch seconds)")
    if "kind" not in obj:
        raise EventError(f"missing required field `kind` (one of {', '.join(KINDS)})")
    kind = obj["kind"]
    if kind not in KINDS:
        raise EventError(f"unknown kind {kind!r} (use one of {', '.join(KINDS)})")
    ev = Event(ts=parse_ts(obj["ts"]), kind=kind)
    ev.id = _opt_str(obj, "id")
    ev.agent = _opt_str(obj, "agent") or "default"
    ev.session = _opt_str(obj, "session")
    ev.goal_id = _opt_str(obj, "goal_id")
    ev.role = _choice(obj, "role", ROLES)
    ev.content = _opt_str(obj, "content")
    tool = obj.get("tool")
    if tool is not None:
        if not isinstance(tool, dict):
            raise EventError(f"`tool` must be an object, got {type(tool).__name__}")
        ev.tool_name = _opt_str(tool, "name", "tool.")
        ev.tool_args = tool.get("args")
        if ev.tool_args is not None and not isinstance(ev.tool_args, (dict, list, str)):
            raise EventError("`tool.args` must be an object")
        ev.tool_result = tool.get("result")
        error = tool.get("error")
        ev.tool_error = error if isinstance(error, str) or error is None else json.dumps(error)
        ev.tool_call_id = _opt_str(tool, "call_id", "tool.")
    goal = obj.get("goal")
    if goal is not None:
        if not isinstance(goal, dict):
            raise EventError(f"`goal` must be an object, got {type(goal).__name__}")
        ev.goal_id = _opt_str(goal, "id", "goal.") or ev.goal_id
        ev.goal_status = _choice(goal, "status", GOAL_STATUSES, "goal.") or "open"
        ev.goal_description = _opt_str(goal, "description", "goal.")
        long_term = goal.get("long_term")
        if long_term is not None and not isinstance(long_term, bool):
            raise EventError("`goal.long_term` must be true or false")
        ev.goal_long_term = long_term
        if not ev.goal_id:
            raise EventError("`goal` needs an `id` (or the record a `goal_id`)")
    ev.outcome = _choice(obj, "outcome", OUTCOMES)
    feedback = obj.get("feedback")
    if feedback is not None:
        if not isinstance(feedback, dict):
            raise EventError(f"`feedback` must be an object, got {type(feedback).__name__}")
        ev.feedback_signal = _choice(feedback, "signal", SIGNALS, "feedback.")
        if ev.feedback_signal is None:
            raise EventError("`feedback.signal` is required (positive or negative)")
        ev.feedback_target = _opt_str(feedback, "target", "feedback.")
        ev.feedback_text = _opt_str(feedback, "text", "feedback.")
    importance = obj.get("importance")
    if importance is not None:
        if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0 <= importance <= 1:
            raise EventError(f"`importance` must be a number from 0 to 1, got {importance!r}")
        ev.importance = float(importance)
    ev.category = _opt_str(obj, "category")
    tags = obj.get("tags")
    if tags is not None:
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise EventError("`tags` must be a list of strings")
        ev.tags = tags
    meta = obj.get("meta")
    if meta is not None:
        if not isinstance(meta, dict):
            raise EventError("`meta` must be an object")
        ev.meta = meta
    if not (ev.content or ev.tool_name or ev.goal_id and goal is not None or ev.outcome or ev.feedback_signal):
        raise EventError("nothing to remember: give `content`, `tool`, `goal`, `outcome` or `feedback`")
    return ev


def as_text(value: Any) -> str | None:
    """Tool args and results may be any JSON: store them as compact JSON text."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def render(ev: Event) -> str:
    """The one-line text of an event: what is embedded, indexed and shown."""
    if ev.kind == "tool_call":
        args = as_text(ev.tool_args) or ""
        body = f"call {ev.tool_name or 'tool'}({args})"
        return f"{body} {ev.content}".strip() if ev.content else body
    if ev.kind == "tool_result":
        if ev.tool_error:
            return f"{ev.tool_name or 'tool'} error: {ev.tool_error}"
        return f"{ev.tool_name or 'tool'} returned: {as_text(ev.tool_result) or ev.content or ''}"
    if ev.kind == "goal":
        desc = ev.goal_description or ev.content or ev.goal_id
        return f"goal {ev.goal_status}: {desc}"
    if ev.kind == "outcome":
        return f"outcome {ev.outcome or ''}: {ev.content or ''}".strip().rstrip(":")
    if ev.kind == "feedback":
        target = f" on {ev.feedback_target}" if ev.feedback_target else ""
        return f"feedback {ev.feedback_signal}{target}: {ev.feedback_text or ev.content or ''}".strip().rstrip(":")
    # The role lives in its own column; a "user: " prefix on every text would only blur the vectors.
    return ev.content or ""
