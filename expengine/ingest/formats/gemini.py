"""Gemini CLI sessions: `~/.gemini/tmp/<project>/chats/session-*.json` (one JSON document), the JSONL
of newer releases (a `{sessionId, projectHash, startTime, kind}` first line, then one message a line,
`$set` lines that update the session and `$rewindTo` lines that cut it back; subagents in
`chats/<parent>/<id>.jsonl`), and `/chat share` Markdown (`## USER` / `## MODEL` turns).

A message is `{id, timestamp, type: user | gemini | info | error | warning, content, toolCalls,
thoughts}`; a tool call is `{id, name, args, result, status}` and its result is an error when
`status` is `error`; a `cancelled` call is the user's choice, not a failure. Thoughts are skipped and
counted. The project is the folder whose SHA-256 is `projectHash`: Gemini CLI's own `.project_root`
file beside `chats/`, or the working folder the session's first prompt names.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator

from ...store.vocabulary import EventError
from ..events import Event, as_text
from .base import AgentReader, FileContext, as_reads, counted, mapping, project_meta, timestamp

if TYPE_CHECKING:
    from ..otel import Read

_WORKING_IN = re.compile(r"I'm currently working in the directory:\s*(\S[^\n]*)")
_TURN = re.compile(r"^(?:\S+\s)?## (USER|MODEL)\s*$", re.MULTILINE)
_FENCED_JSON = re.compile(r"\*\*Tool (Command|Response)\*\*:\s*```json\n(.*?)\n```", re.DOTALL)
_CONTEXT_PREAMBLE = "This is the Gemini CLI. We are setting up the context for our chat."


def is_gemini_session(obj: Any) -> bool:
    """The JSON document: `sessionId`, `projectHash` and a `messages` list."""
    return (
        isinstance(obj, dict) and "sessionId" in obj and "projectHash" in obj and isinstance(obj.get("messages"), list)
    )


def is_gemini_line(obj: Any) -> bool:
    """A JSONL session's first line (`sessionId` with `projectHash`, no `messages`)."""
    return isinstance(obj, dict) and "sessionId" in obj and "projectHash" in obj and "messages" not in obj


def is_gemini_prompt_log(obj: Any) -> bool:
    """`logs.json` beside `chats/`: the prompts typed, `[{sessionId, messageId, type, message, timestamp}]`."""
    return (
        isinstance(obj, list)
        and bool(obj)
        and all(isinstance(o, dict) and "sessionId" in o and "messageId" in o for o in obj[:3])
    )


_MESSAGE_TYPES = ("user", "gemini", "info", "error", "warning")


def is_gemini_message(obj: Any) -> bool:
    """A JSONL session's message line (`sessionId` is on the first line only) or its `$set` / `$rewindTo`."""
    if not isinstance(obj, dict):
        return False
    if "$set" in obj or "$rewindTo" in obj:
        return True
    return (
        obj.get("type") in _MESSAGE_TYPES
        and "id" in obj
        and "timestamp" in obj
        and not any(k in obj for k in ("sessionId", "uuid", "kind", "payload", "role"))
    )


def recognises(obj: Any) -> bool:
    return is_gemini_session(obj) or is_gemini_line(obj) or is_gemini_message(obj) or is_gemini_prompt_log(obj)


def object_reader(ctx: FileContext) -> Callable[[Any, int], list[Event]]:
    """A session document, a JSONL session line by line, or `logs.json`."""
    reader = GeminiReader(agent=ctx.agent, path=ctx.label, now=ctx.now)

    def read(obj: Any, _: int) -> list[Event]:
        if is_gemini_session(obj):
            return reader.document(obj)
        if isinstance(obj, list):
            return prompt_log_events(obj, agent=ctx.agent, now=ctx.now)
        return reader.line(obj)

    return counted(reader, read)


def read_share(stream: IO[bytes], ctx: FileContext) -> Iterator["Read"]:
    reader = GeminiReader(agent=ctx.agent, path=None, now=ctx.now)
    text = stream.read().decode("utf-8", "replace")
    return as_reads(reader, share_events(text, ctx.label, reader))


def is_gemini_share(head: str) -> bool:
    return bool(_TURN.search(head[:4096])) and ("## USER" in head[:200] or _CONTEXT_PREAMBLE in head[:4096])


def project_root(path: str | None, project_hash: str | None) -> str | None:
    """Gemini CLI writes the project's folder to `tmp/<project>/.project_root` (newer releases)."""
    if not path:
        return None
    for folder in list(Path(path).parents)[:3]:
        marker = folder / ".project_root"
        if marker.is_file():
            try:
                return marker.read_text(encoding="utf-8").strip() or None
            except OSError:
                return None
    return None


class GeminiReader(AgentReader):
    """One session: its messages, from the JSON document or line by line from the JSONL."""

    def __init__(self, *, agent: str, path: str | None = None, now: dt.datetime | None = None) -> None:
        super().__init__(agent=agent)
        self.path = path
        self.now = now or dt.datetime(1970, 1, 1)
        self.project_hash: str | None = None

    def start(self, obj: dict[str, Any], parent: str | None = None) -> None:
        self.session = str(obj.get("sessionId") or "")
        self.project_hash = obj.get("projectHash") if isinstance(obj.get("projectHash"), str) else None
        self.meta = {"project_hash": self.project_hash} if self.project_hash else {}
        self.meta.update(project_meta(project_root(self.path, self.project_hash)))
        if parent:
            self.meta["parent_session"] = parent
        if obj.get("kind") not in (None, "main"):
            self.meta["session_kind"] = obj["kind"]

    def document(self, obj: dict[str, Any]) -> list[Event]:
        self.start(obj)
        return [ev for message in obj["messages"] for ev in self.message(message)]

    def line(self, obj: dict[str, Any]) -> list[Event]:
        """One JSONL line: the session header, a `$set` / `$rewindTo` update, or a message."""
        if is_gemini_line(obj) and "type" not in obj:
            self.start(obj, parent=_parent_of(self.path))
            return []
        if "$set" in obj:
            return self.skip("session update")
        if "$rewindTo" in obj:
            return self.skip("rewind")  # the user went back: what follows replaces, nothing failed
        if self.session is None:
            raise EventError("a Gemini CLI JSONL session starts with a `{sessionId, projectHash}` line")
        return self.message(obj)

    def message(self, m: Any) -> list[Event]:
        if not isinstance(m, dict):
            raise EventError("a Gemini CLI message must be a JSON object")
        kind, mid = m.get("type"), str(m.get("id") or "")
        if not mid:
            raise EventError("a Gemini CLI message needs an `id`")
        ts = timestamp(m.get("timestamp"), self.now)
        self._learn_cwd(m)
        common = self.at(mid, ts)
        text = _text(m.get("content"))
        if m.get("thoughts"):
            self.skip("thought", len(m["thoughts"]) if isinstance(m["thoughts"], list) else 1)
        if kind == "user":
            return self.prompt(text, **common) if text else self.skip("empty")
        out: list[Event] = []
        if kind == "gemini":
            if text:
                out.append(self.event("message", role="assistant", content=text, **common))
            for n, call in enumerate(m.get("toolCalls") or []):
                out.extend(self._tool(call, n, common))
            return out or self.skip("empty")
        if kind in ("error", "warning"):
            return [
                self.event(
                    "observation", role="system", content=text, **{**common, "meta": {**self.meta, "level": kind}}
                )
            ]
        if kind == "info":
            return self.skip("info")
        raise EventError(f"unknown Gemini CLI message type {kind!r} (user, gemini, info, error, warning)")

    def _tool(self, call: Any, n: int, common: dict[str, Any]) -> list[Event]:
        if not isinstance(call, dict):
            return self.skip("malformed tool call")
        call_id = str(call.get("id") or f"{common['id']}/call{n}")
        if "cwd" not in self.meta and isinstance(call.get("args"), dict):
            self._project_from_paths(call["args"].values())
            common = {**common, "meta": self.meta}
        name = str(call.get("name") or "tool")
        at = {**common, "ts": timestamp(call.get("timestamp"), common["ts"])}
        out = [self.call(call_id, name, call.get("args"), **{**at, "id": f"{common['id']}/call{n}"})]
        status = call.get("status")
        if status is None and call.get("result") is None:
            return out  # still running when the file was written
        output = _result_text(call.get("result")) or as_text(call.get("resultDisplay")) or ""
        at = {**at, "id": f"{common['id']}/result{n}"}
        result = self.result(call_id, output, status == "error", cancelled=status == "cancelled", **at)
        out.append(result)
        return out

    def _learn_cwd(self, m: dict[str, Any]) -> None:
        """Where `.project_root` is absent, the folder the CLI's context preamble names (checked against the hash)."""
        if "cwd" in self.meta:
            return
        match = _WORKING_IN.search(_text(m.get("content")))
        if match and _hash_matches(match.group(1).strip(), self.project_hash):
            self.meta = {**self.meta, **project_meta(match.group(1).strip())}

    def _project_from_paths(self, values: Any) -> None:
        """The folder a call's absolute path lies in whose SHA-256 is `projectHash` (how the CLI names it)."""
        if not self.project_hash:
            return
        for value in values:
            if isinstance(value, str) and value.startswith("/") and "\n" not in value:
                for folder in PurePosixPath(value).parents:
                    if _hash_matches(str(folder), self.project_hash):
                        self.meta = {**self.meta, **project_meta(str(folder))}
                        return


def _hash_matches(folder: str, project_hash: str | None) -> bool:
    return project_hash is None or hashlib.sha256(folder.encode("utf-8")).hexdigest() == project_hash


def _parent_of(path: str | None) -> str | None:
    """A subagent's session lives in `chats/<parent session>/<id>.jsonl`."""
    if not path:
        return None
    parent = Path(path).parent
    return parent.name if parent.name != "chats" and parent.parent.name == "chats" else None


def _text(content: Any) -> str:
    """`content` is a string, or Gemini parts (`[{text}]`)."""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "\n".join(str(p.get("text")) for p in content if isinstance(p, dict) and p.get("text")).strip()
    return ""


def _result_text(result: Any) -> str:
    """A call's result: `[{functionResponse: {response: {output | error}}}]`, or plain text."""
    if isinstance(result, list):
        parts = []
        for part in result:
            response = part.get("functionResponse", {}).get("response") if isinstance(part, dict) else None
            if isinstance(response, dict):
                parts.append(str(response.get("output", response.get("error", as_text(response)))))
            elif isinstance(part, dict) and part.get("text"):
                parts.append(str(part["text"]))
        return "\n".join(parts)
    return as_text(result) or ""


def prompt_log_events(entries: list[Any], *, agent: str, now: dt.datetime) -> list[Event]:
    """`logs.json`: each prompt a user message of its session (the goal is the session file's)."""
    reader = GeminiReader(agent=agent, now=now)
    out = []
    for e in entries:
        if not isinstance(e, dict) or e.get("type") != "user" or not str(e.get("message") or "").strip():
            reader.skip("non-prompt")
            continue
        session = str(e.get("sessionId"))
        ts = timestamp(e.get("timestamp"), now)
        out.append(
            reader.event(
                "message",
                id=f"{session}/prompt{e.get('messageId')}",
                ts=ts,
                session=session,
                meta={"source": "gemini prompt log"},
                role="user",
                content=str(e["message"]).strip(),
            )
        )
    return out


def share_events(text: str, name: str, reader: GeminiReader) -> Iterator[tuple[int, list[Event]]]:
    """`/chat share` Markdown: (line, events) per turn. A USER turn that is a **Tool Response** is the
    result of the MODEL turn's **Tool Command** before it; the CLI's context preamble is skipped."""
    now = reader.now
    session = Path(name).stem
    reader.session = session
    marks = list(_TURN.finditer(text))
    pending: dict[str, str] = {}  # a tool's name -> its last call's id, until its response
    for n, mark in enumerate(marks):
        body = text[mark.end() : marks[n + 1].start() if n + 1 < len(marks) else len(text)].strip()
        body = body.removesuffix("---").strip()
        line = text.count("\n", 0, mark.start()) + 1
        ts = now + dt.timedelta(milliseconds=n)
        common: dict[str, Any] = {"id": f"{session}/turn{n}", "ts": ts, "session": session, "meta": reader.meta}
        if body.startswith(_CONTEXT_PREAMBLE):
            match = _WORKING_IN.search(body)
            reader.meta = {
                **reader.meta,
                **project_meta(match.group(1).strip() if match else None),
                "time_assumed": True,
            }
            yield line, reader.skip("context preamble")
            continue
        common["meta"] = {**reader.meta, "time_assumed": True}
        events: list[Event] = []
        rest = body
        for k, block in enumerate(_FENCED_JSON.finditer(body)):
            rest = rest.replace(block.group(0), "")
            try:
                obj = json.loads(block.group(2))
            except json.JSONDecodeError:
                reader.skip("malformed tool block")
                continue
            at = {**common, "id": f"{session}/turn{n}/{k}"}
            name = str(obj.get("name") or "tool")
            if block.group(1) == "Command":
                events.append(reader.call(at["id"], name, obj.get("args"), **at))
                pending[name] = at["id"]
            else:
                response = mapping(obj, "response")
                failed = "error" in response
                output = str(response.get("error") if failed else response.get("output", as_text(response)))
                events.append(reader.result(pending.pop(name, None), output, failed, **at))
        rest = rest.strip()
        if rest:
            if mark.group(1) == "USER":
                events[:0] = reader.prompt(rest, **common)
            else:
                events.insert(0, reader.event("message", role="assistant", content=rest, **common))
        yield line, events
