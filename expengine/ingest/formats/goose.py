"""Goose: `~/.local/share/goose/sessions/<id>.jsonl` (before its sessions moved into `sessions.db`): a
metadata line (`{working_dir, description, message_count, …}`), then one message a line
(`{role, created, content: [text | toolRequest | toolResponse | thinking …]}`).

A `toolRequest` is a call (`toolCall.value: {name, arguments}`; the developer extension's shell is
named by its program), a `toolResponse` its result, an error when `toolResult.status` is `error`.
Thinking is skipped and counted. The project is the session's `working_dir`.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Callable

from ...store.vocabulary import EventError
from ..events import Event, as_text
from .base import AgentReader, FileContext, counted, mapping, project_meta, timestamp


def is_goose_metadata(obj: Any) -> bool:
    return isinstance(obj, dict) and "working_dir" in obj and ("description" in obj or "message_count" in obj)


def is_goose_message(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and obj.get("role") in ("user", "assistant")
        and "created" in obj
        and isinstance(obj.get("content"), list)
    )


class GooseReader(AgentReader):
    def __init__(self, *, agent: str, session: str, now: dt.datetime) -> None:
        super().__init__(agent=agent)
        self.session = session
        self.now = now
        self.meta: dict[str, Any] = {}

    def events(self, obj: dict[str, Any], number: int) -> list[Event]:
        """One line (`number`: its line in the file, the id of a message that has none)."""
        if is_goose_metadata(obj):
            self.meta = project_meta(obj.get("working_dir"))
            return self.skip("metadata")
        if not is_goose_message(obj):
            raise EventError("a Goose session line is its metadata or a `{role, created, content}` message")
        ts = timestamp(obj.get("created"), self.now)
        out: list[Event] = []
        for n, c in enumerate(obj["content"]):
            if not isinstance(c, dict):
                continue
            common: dict[str, Any] = {
                "id": f"{self.session}/{obj.get('id') or number}/{n}",
                "ts": ts,
                "session": self.session,
                "meta": self.meta,
            }
            kind = c.get("type")
            if kind == "text":
                out.extend(self.said(obj["role"] == "user", c.get("text"), **common))
            elif kind == "toolRequest":
                call = mapping(c, "toolCall")
                value = mapping(call, "value")
                name = str(value.get("name") or "tool")
                ev = self.call(c.get("id"), name, value.get("arguments"), **common)
                if not name.endswith("shell"):
                    ev.tool_name = name
                out.append(ev)
            elif kind == "toolResponse":
                result = mapping(c, "toolResult")
                failed = result.get("status") == "error"
                payload: Any = result.get("error") if failed else result.get("value")
                text = (
                    "\n".join(str(v.get("text", "")) for v in payload if isinstance(v, dict))
                    if isinstance(payload, list)
                    else as_text(payload) or ""
                )
                out.append(self.result(c.get("id"), text, failed, **common))
            elif kind in ("thinking", "redactedThinking", "reasoning"):
                self.skip("thinking")
            else:
                self.skip(str(kind))
        return out


def recognises(obj: Any) -> bool:
    return is_goose_metadata(obj) or is_goose_message(obj)


def object_reader(ctx: FileContext) -> Callable[[Any, int], list[Event]]:
    reader = GooseReader(agent=ctx.agent, session=Path(ctx.label).stem, now=ctx.now)
    return counted(reader, reader.events)
