"""Goose: `~/.local/share/goose/sessions/<id>.jsonl` (before its sessions moved into `sessions.db`): a
metadata line (`{working_dir, description, message_count, …}`), then one message a line
(`{role, created, content: [text | toolRequest | toolResponse | thinking …]}`). Since then
`sessions/sessions.db`: table `sessions` (`id`, `working_dir`, …) and `messages` (`id` autoincrement,
`message_id`, `session_id`, `role`, `content_json`: the same content list, `created_timestamp` in
seconds), read from the last message id read.

A `toolRequest` is a call (`toolCall.value: {name, arguments}`; the developer extension's shell is
named by its program), a `toolResponse` its result, an error when `toolResult.status` is `error`.
Thinking is skipped and counted. The project is the session's `working_dir`.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ...store.vocabulary import EventError
from ..events import Event, as_text
from .base import AgentReader, FileContext, counted, mapping, project_meta, timestamp
from .sqlite import Scan, row_reads

if TYPE_CHECKING:
    from ..otel import Read

DATABASE = "sessions.db"


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
        super().__init__(agent=agent, session=session)
        self.now = now

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
            common = self.at(f"{obj.get('id') or number}/{n}", ts)
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


def database_reads(con: sqlite3.Connection, scan: Scan, *, agent: str, now: dt.datetime) -> Iterator["Read"]:
    """The messages after `scan.since` (a message id), session by session; a session begun before it
    has had its goal."""
    folders = dict(con.execute("SELECT id, working_dir FROM sessions").fetchall())
    begun = {r[0] for r in con.execute("SELECT DISTINCT session_id FROM messages WHERE id <= ?", (scan.since,))}
    rows = con.execute(
        "SELECT id, message_id, session_id, role, content_json, created_timestamp FROM messages"
        " WHERE id > ? ORDER BY session_id, id",
        (scan.since,),
    )
    for session, group in groupby(rows, key=lambda r: r[2]):
        reader = GooseReader(agent=agent, session=str(session), now=now)
        reader.meta = project_meta(folders.get(session))
        if session in begun:
            reader.goals.add(str(session))
        for rowid, message_id, _, role, content, created in group:
            scan.row(rowid, len(content or ""))

            def read() -> list[Event]:
                message = {"id": message_id, "role": role, "created": created, "content": json.loads(content or "[]")}
                return reader.events(message, rowid)

            yield from row_reads(reader, rowid, read, content or "")
