"""OpenAI-style chat trajectories (as most agent frameworks log them) turned into native events.

A run is an object with a list of messages under `traj` or `messages`, an optional `reward` or
`outcome`, and optional `task_id` / `trial` / `id`. Ids are `<run>/step<N>` so they are stable.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any, Iterator

from ..store.vocabulary import TIME_ASSUMED, parse_ts
from .events import Event, EventError, as_text


def is_run(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("traj", obj.get("messages")), list)


def run_id(obj: dict[str, Any], index: int) -> str:
    if obj.get("id") is not None:
        return str(obj["id"])
    if obj.get("task_id") is not None:
        return f"task{obj['task_id']}/trial{obj.get('trial', 0)}"
    return f"run{index}"


def _first_id(ids: Any) -> str | None:
    """`tool_call_ids` (SWE-agent's histories): a list of call ids, or that list written as Python text."""
    if isinstance(ids, str):
        ids = re.findall(r"[\w.:-]+", ids.strip("[]"))
    if isinstance(ids, list) and ids and isinstance(ids[0], (str, int)):
        return str(ids[0])
    return None


def _outcome(obj: dict[str, Any]) -> str | None:
    if isinstance(obj.get("outcome"), str) and obj["outcome"] in ("success", "failure", "partial"):
        return obj["outcome"]
    reward = obj.get("reward")
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        if reward >= 1:
            return "success"
        return "failure" if reward <= 0 else "partial"
    return None


def events_from_run(obj: dict[str, Any], index: int, *, agent: str, base_ts: dt.datetime) -> Iterator[Event]:
    """One run → goal (from the first user message), messages, tool calls and results, outcome."""
    rid = run_id(obj, index)
    messages = obj.get("traj", obj.get("messages"))
    agent = str(obj.get("agent") or agent)
    step = 0

    def stamp(message: dict[str, Any] | None = None) -> dt.datetime:
        if message and message.get("ts") is not None:
            return parse_ts(message["ts"])
        return base_ts + dt.timedelta(milliseconds=step)

    def new(kind: str, message: dict[str, Any] | None = None, **fields: Any) -> Event:
        nonlocal step
        ev = Event(ts=stamp(message), kind=kind, id=f"{rid}/step{step}", agent=agent, session=rid, goal_id=rid)
        if not (message and message.get("ts") is not None):
            ev.meta[TIME_ASSUMED] = True  # ingest time keeps the order; units must not show it as a date
        for key, value in fields.items():
            setattr(ev, key, value)
        step += 1
        return ev

    goal_opened = False
    # Frameworks reuse call ids inside one run, so a result answers the latest call with its id.
    latest_call: dict[str, Event] = {}
    for message in messages or []:
        if not isinstance(message, dict):
            raise EventError(f"run {rid}: every message must be an object")
        role = message.get("role")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            content = as_text(content)
        if role == "system":
            step += 1  # the policy prompt repeats in every run: counted, not stored
            continue
        if role == "user" and not goal_opened and content:
            goal_opened = True
            instruction = (
                ((obj.get("info") or {}).get("task") or {}).get("instruction")
                if isinstance(obj.get("info"), dict)
                else None
            )
            yield new(
                "goal",
                message,
                goal_status="open",
                goal_description=content,
                role="user",
                meta={"instruction": instruction} if instruction else {},
            )
            yield new("message", message, role="user", content=content)
            continue
        if role == "tool":
            call_id = message.get("tool_call_id") or _first_id(message.get("tool_call_ids"))
            call = latest_call.get(call_id or "")
            name = message.get("name") or (call.tool_name if call else None) or "tool"
            is_error = isinstance(content, str) and content.lower().startswith("error")
            yield new(
                "tool_result",
                message,
                role="tool",
                tool_name=name,
                tool_call_id=call_id,
                tool_error=content if is_error else None,
                tool_result=None if is_error else content,
                meta={"call_record": call.id} if call else {},
            )
            continue
        if role not in ("user", "assistant"):
            raise EventError(f"run {rid}: unknown role {role!r}")
        if content:
            yield new("message", message, role=role, content=content)
        for call in message.get("tool_calls") or []:
            function = (call or {}).get("function") or {}
            raw_args = function.get("arguments")
            try:
                args = json.loads(raw_args) if isinstance(raw_args, str) and raw_args.strip() else raw_args
            except json.JSONDecodeError:
                args = {"_raw": raw_args}
            call_id = call.get("id")
            event = new(
                "tool_call",
                message,
                role="assistant",
                tool_name=function.get("name"),
                tool_args=args,
                tool_call_id=call_id,
            )
            if call_id:
                latest_call[call_id] = event
            yield event
    outcome = _outcome(obj)
    if outcome is not None:
        status = {"success": "succeeded", "failure": "failed"}.get(outcome, "open")
        reward = obj.get("reward")
        yield new(
            "goal",
            None,
            goal_status=status,
            goal_description=None,
            content=f"run {rid} finished",
            meta={"reward": reward} if reward is not None else {},
        )
        yield new(
            "outcome",
            None,
            outcome=outcome,
            content=f"run {rid} ended in {outcome}" + (f" (reward {reward})" if reward is not None else ""),
        )
