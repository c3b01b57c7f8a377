"""opencode: `~/.local/share/opencode/storage/` (`session/<project>/<id>.json`, `message/<session>/<id>.json`,
`part/<message>/<id>.json`) and what `opencode export <session>` prints (`{info, messages: [{info, parts}]}`).

A message is `{id, role, time: {created}, path: {cwd, root}, error}`; its parts are text, tool
(`{tool, callID, state: {status, input, output, error, metadata}}`), reasoning, step-start /
step-finish, snapshot, patch, file, compaction. A tool part whose state is `error` is a failed call,
unless the user aborted it; reasoning, steps and snapshots are skipped and counted. The project is the
session's `directory` (or the message's `path.root`).

Newer opencode keeps them in `opencode.db` (its Drizzle schema, `session/session.sql.ts`): tables
`session` (`id`, `directory`, `parent_id`, `time_created`), `message` (`id`, `session_id`, `data`: the
message's info without its ids) and `part` (`id`, `message_id`, `session_id`, `data`), each with
`time_created` and `time_updated` in milliseconds. A run reads the messages changed at or after the
last run's latest `time_updated`, with their parts changed since (a tool part is rewritten as its
call completes); records already stored are counted as duplicates.
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
from .base import AgentReader, FileContext, counted, from_ms, mapping, project_meta
from .sqlite import Scan, row_reads

if TYPE_CHECKING:
    from ..otel import Read

DATABASE_GLOB = "opencode*.db"  # opencode.db, and a release channel's own (opencode-beta.db)

_SKIPPED_PARTS = {"reasoning", "step-start", "step-finish", "snapshot", "patch", "file", "compaction", "agent", "retry"}


def is_opencode_export(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("info"), dict) and isinstance(obj.get("messages"), list)


def is_opencode_session(obj: Any) -> bool:
    """A stored session's info: `id` starting `ses_`, with `projectID` or `directory`."""
    return (
        isinstance(obj, dict)
        and str(obj.get("id", "")).startswith("ses")
        and ("projectID" in obj or "directory" in obj)
    )


class OpencodeReader(AgentReader):
    def __init__(self, *, agent: str, info: dict[str, Any], now: dt.datetime) -> None:
        super().__init__(agent=agent, session=str(info.get("id") or ""))
        self.now = from_ms((info.get("time") or {}).get("created"), now)
        self.meta = project_meta(info.get("directory"))
        if info.get("parentID"):
            self.meta["parent_session"] = info["parentID"]

    def message(self, info: dict[str, Any], parts: list[Any]) -> list[Event]:
        if not isinstance(info, dict) or "role" not in info:
            raise EventError("an opencode message needs `info` with a `role`")
        path = mapping(info, "path")
        if "cwd" not in self.meta and (path.get("root") or path.get("cwd")):
            self.meta = project_meta(path.get("root") or path.get("cwd"))
        ts = from_ms((info.get("time") or {}).get("created"), self.now)
        out: list[Event] = []
        for n, part in enumerate(parts):
            if not isinstance(part, dict):
                continue
            pts = from_ms(
                ((part.get("time") or {}).get("start")) or ((part.get("state") or {}).get("time") or {}).get("start"),
                ts,
            )
            common = self.at(str(part.get("id") or f"{info.get('id')}/{n}"), pts)
            kind = part.get("type")
            if kind == "text" and part.get("synthetic"):
                self.skip("synthetic")  # text the client adds (file contents, reminders), not said by anyone
            elif kind == "text":
                out.extend(self.said(info["role"] == "user", part.get("text"), **common))
            elif kind == "tool":
                out.extend(self.tool(part, common))
            elif kind in _SKIPPED_PARTS:
                self.skip(str(kind))
            else:
                self.skip(f"part {kind}")
        error = info.get("error")
        if isinstance(error, dict):
            name = str(error.get("name") or "error")
            if name == "MessageAbortedError":
                self.skip("aborted")
            else:
                detail = (error.get("data") or {}).get("message") if isinstance(error.get("data"), dict) else None
                at = self.at(f"{info.get('id')}/error", ts)
                result = self.result(None, f"{name}: {detail or ''}".strip(": "), True, **at)
                result.tool_name = "opencode"
                out.append(result)
        return out

    def tool(self, part: dict[str, Any], common: dict[str, Any]) -> list[Event]:
        state = mapping(part, "state")
        call_id = str(part.get("callID") or part.get("id") or "")
        call = self.call(
            call_id, str(part.get("tool") or "tool"), state.get("input"), **{**common, "id": f"{common['id']}/call"}
        )
        status = state.get("status")
        if status not in ("completed", "error"):
            return [call]
        error = str(state.get("error") or "")
        metadata = mapping(state, "metadata")
        code = metadata.get("exit")
        aborted = status == "error" and "aborted" in error.lower()
        failed = (status == "error" and not aborted) or (isinstance(code, int) and code != 0)
        output = error if status == "error" else as_text(state.get("output")) or ""
        end = from_ms((state.get("time") or {}).get("end"), common["ts"])
        at = {**common, "id": f"{common['id']}/result", "ts": end}
        result = self.result(call_id, output, failed, cancelled=aborted, **at)
        if isinstance(code, int):
            result.meta = {**result.meta, "exit_code": code}
        return [call, result]


def export_events(obj: dict[str, Any], *, agent: str, now: dt.datetime) -> tuple[list[Event], OpencodeReader]:
    reader = OpencodeReader(agent=agent, info=obj["info"], now=now)
    events = [
        ev
        for m in obj["messages"]
        if isinstance(m, dict)
        for ev in reader.message(m.get("info") or {}, m.get("parts") or [])
    ]
    return events, reader


def stored_session(path: Path) -> dict[str, Any]:
    """`storage/session/<project>/<id>.json` with its messages and their parts, as `opencode export` prints it."""
    info = json.loads(path.read_text(encoding="utf-8"))
    storage = path.parents[2]
    messages = []
    for m in sorted((storage / "message" / str(info.get("id"))).glob("*.json")):
        minfo = json.loads(m.read_text(encoding="utf-8"))
        parts = [
            json.loads(p.read_text(encoding="utf-8"))
            for p in sorted((storage / "part" / str(minfo.get("id"))).glob("*.json"))
        ]
        messages.append({"info": minfo, "parts": parts})
    messages.sort(key=lambda m: ((m["info"].get("time") or {}).get("created") or 0, str(m["info"].get("id"))))
    return {"info": info, "messages": messages}


def recognises(obj: Any) -> bool:
    return is_opencode_export(obj) or is_opencode_session(obj)


def object_reader(ctx: FileContext) -> Callable[[Any, int], list[Event]]:
    """`opencode export` output, or a stored session's info file (read with its messages and parts)."""

    def read(obj: Any, _: int) -> list[Event]:
        export = obj if is_opencode_export(obj) else stored_session(Path(ctx.label))
        events, reader = export_events(export, agent=ctx.agent, now=ctx.now)
        return counted(reader, lambda *_: events)(obj, 1)

    return read


def database_reads(con: sqlite3.Connection, scan: Scan, *, agent: str, now: dt.datetime) -> Iterator["Read"]:
    """The messages and parts changed at or after `scan.since` (ms), session by session; a session begun
    before it has had its goal."""
    since = scan.since
    sessions = {
        sid: {"id": sid, "directory": directory, "parentID": parent, "time": {"created": created}}
        for sid, directory, parent, created in con.execute("SELECT id, directory, parent_id, time_created FROM session")
    }
    begun = {r[0] for r in con.execute("SELECT DISTINCT session_id FROM message WHERE time_created < ?", (since,))}
    rows = con.execute(
        "SELECT id, session_id, data, time_updated FROM message WHERE time_updated >= ?"
        " OR id IN (SELECT message_id FROM part WHERE time_updated >= ?) ORDER BY session_id, time_created, id",
        (since, since),
    )
    line = 0
    for session, group in groupby(rows, key=lambda r: r[1]):
        reader = OpencodeReader(agent=agent, info=sessions.get(session) or {"id": session}, now=now)
        if session in begun:
            reader.goals.add(str(session))
        for message_id, _, data, updated in group:
            line += 1
            parts = con.execute(
                "SELECT id, data, time_updated FROM part WHERE message_id = ? AND time_updated >= ? ORDER BY id",
                (message_id, since),
            ).fetchall()
            scan.row(max([updated, *(p[2] for p in parts)]), len(data or "") + sum(len(p[1] or "") for p in parts))

            def read() -> list[Event]:
                info = {**json.loads(data or "{}"), "id": message_id}
                return reader.message(info, [{**json.loads(p[1] or "{}"), "id": p[0]} for p in parts])

            yield from row_reads(reader, line, read, data or "")
