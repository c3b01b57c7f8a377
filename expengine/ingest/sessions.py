"""Coding assistants' session logs: Claude Code (`~/.claude/projects/<project>/<session>.jsonl`) and
Codex rollouts (`~/.codex/sessions/…/rollout-*.jsonl`), one JSON object per line.

A tool's result names its call only by id, on a later line, so each file is read by one stateful
reader that remembers the calls it has seen. Shell commands are named by the program they run (as
for trajectories), the tool itself goes to `meta.tool`; the working directory and git branch go
to `meta`. Boilerplate every session repeats (instructions, environment context, hook progress
lines, token counts) is not a memory and is skipped.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from ..store.vocabulary import EventError, parse_ts
from .events import Event, as_text
from .trajectories import program_of

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CODEX_BOILERPLATE = ("# AGENTS.md instructions", "<environment_context>", "<user_instructions>", "<INSTRUCTIONS>")


def is_claude_code(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and obj.get("type") in ("user", "assistant", "system", "summary")
        and ("sessionId" in obj or "leafUuid" in obj)
    )


def is_codex(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and obj.get("type") in ("session_meta", "response_item", "event_msg", "turn_context")
        and isinstance(obj.get("payload"), dict)
    )


def _text_of(content: Any) -> str:
    """A block's content: a string, or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("text"))
    return as_text(content) or ""


class SessionReader:
    """Shared by both readers: call ids remembered per file, and one way to make an event."""

    def __init__(self, *, agent: str) -> None:
        self.agent = agent
        self.calls: dict[str, Event] = {}
        self.goals: set[str] = set()

    def events(self, obj: dict[str, Any]) -> list[Event]:
        """The events one line holds (none for boilerplate)."""
        raise NotImplementedError

    def event(self, kind: str, id: str, ts: dt.datetime, session: str, meta: dict[str, Any], **fields: Any) -> Event:
        ev = Event(ts=ts, kind=kind, id=id, agent=self.agent, session=session, goal_id=session)
        ev.meta = dict(meta)
        for key, value in fields.items():
            setattr(ev, key, value)
        return ev

    def call(self, call_id: str | None, name: str, args: Any, **common: Any) -> Event:
        """A tool call; a shell command is named by its program."""
        command = args.get("command") if isinstance(args, dict) else None
        if isinstance(command, list):  # Codex: ["bash", "-lc", "cd x && pytest"]
            command = command[-1] if command[:1] in (["bash"], ["sh"], ["zsh"]) else " ".join(map(str, command))
        program = program_of(command) if isinstance(command, str) and command.strip() else name
        meta = {**common.pop("meta"), "tool": name}
        ev = self.event("tool_call", meta=meta, role="assistant", tool_name=program, tool_args=args, **common)
        ev.tool_call_id = call_id
        if call_id:
            self.calls[call_id] = ev
        return ev

    def result(self, call_id: str | None, output: str, failed: bool, **common: Any) -> Event:
        call = self.calls.get(call_id or "")
        meta = {**common.pop("meta"), **({"call_record": call.id} if call else {})}
        return self.event(
            "tool_result",
            meta=meta,
            role="tool",
            tool_name=call.tool_name if call else "tool",
            tool_call_id=call_id,
            tool_error=(output or "error") if failed else None,
            tool_result=None if failed else output,
            **common,
        )

    def prompt(self, text: str, **common: Any) -> list[Event]:
        """A user's words; the session's first one is also its goal."""
        out = []
        session = common["session"]
        if session not in self.goals:
            self.goals.add(session)
            goal = self.event("goal", **{**common, "id": f"{common['id']}/goal"})
            goal.goal_status, goal.goal_description, goal.role = "open", text, "user"
            out.append(goal)
        out.append(self.event("message", role="user", content=text, **common))
        return out


class ClaudeCodeReader(SessionReader):
    """Claude Code: `user` / `assistant` lines with content blocks, `system` hook lines, `summary` titles."""

    def events(self, obj: dict[str, Any]) -> list[Event]:
        if obj.get("type") == "summary" or obj.get("isMeta"):
            return []  # a title pointing at a leaf; command caveats the client adds
        uuid, session = obj.get("uuid"), obj.get("sessionId")
        if not isinstance(uuid, str) or not isinstance(session, str):
            raise EventError("a Claude Code line needs `uuid` and `sessionId`")
        meta: dict[str, Any] = {k: v for k, v in (("cwd", obj.get("cwd")), ("git_branch", obj.get("gitBranch"))) if v}
        if obj.get("isSidechain"):  # a subagent: its own session, linked to the one that started it
            meta["parent_session"] = session
            session = f"{session}/agent-{obj.get('agentId') or 'sidechain'}"
        ts = parse_ts(obj.get("timestamp"))
        if obj["type"] == "system":
            if obj.get("level") not in ("warning", "error"):
                return []  # "Running PostToolUse:Bash…" progress lines
            text = _ANSI.sub("", str(obj.get("content") or "")).strip()
            return [self.event("observation", id=uuid, ts=ts, session=session, meta=meta, content=text)] if text else []
        message = obj.get("message") or {}
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        out: list[Event] = []
        for n, block in enumerate(blocks):
            if not isinstance(block, dict):
                continue
            common: dict[str, Any] = {"id": f"{uuid}/{n}", "ts": ts, "session": session, "meta": meta}
            kind = block.get("type")
            if kind == "text" and str(block.get("text") or "").strip():
                text = str(block["text"]).strip()
                if obj["type"] == "user":
                    out.extend(self.prompt(text, **common))
                else:
                    out.append(self.event("message", role="assistant", content=text, **common))
            elif kind == "tool_use":
                out.append(self.call(block.get("id"), str(block.get("name") or "tool"), block.get("input"), **common))
            elif kind == "tool_result":
                output = _text_of(block.get("content"))
                out.append(self.result(block.get("tool_use_id"), output, bool(block.get("is_error")), **common))
        return out


class CodexReader(SessionReader):
    """Codex: `session_meta` (id, cwd, git), then `response_item` lines; `event_msg` repeats them."""

    def __init__(self, *, agent: str) -> None:
        super().__init__(agent=agent)
        self.session: str | None = None
        self.meta: dict[str, Any] = {}
        self.line = 0

    def events(self, obj: dict[str, Any]) -> list[Event]:
        self.line += 1
        payload, ts = obj["payload"], parse_ts(obj.get("timestamp"))
        if obj["type"] == "session_meta":
            self.session = str(payload.get("id") or "")
            git = payload.get("git") if isinstance(payload.get("git"), dict) else {}
            self.meta = {k: v for k, v in (("cwd", payload.get("cwd")), ("git_branch", git.get("branch"))) if v}
            return []
        if obj["type"] == "turn_context" and payload.get("cwd"):
            self.meta = {**self.meta, "cwd": payload["cwd"]}
            return []
        if obj["type"] != "response_item":
            return []  # event_msg lines echo the items, token counts, reasoning summaries
        if not self.session:
            raise EventError("a Codex rollout starts with a `session_meta` line naming the session")
        common: dict[str, Any] = {
            "id": f"{self.session}/{self.line}",
            "ts": ts,
            "session": self.session,
            "meta": self.meta,
        }
        kind = payload.get("type")
        if kind == "message":
            text = _text_of(payload.get("content")).strip()
            if not text or text.startswith(_CODEX_BOILERPLATE):
                return []
            if payload.get("role") == "user":
                return self.prompt(text, **common)
            return [self.event("message", role="assistant", content=text, **common)]
        if kind in ("function_call", "custom_tool_call", "local_shell_call"):
            raw = payload.get("arguments", payload.get("input", payload.get("action")))
            try:
                args = json.loads(raw) if isinstance(raw, str) and raw.strip().startswith("{") else raw
            except json.JSONDecodeError:
                args = {"_raw": raw}
            if isinstance(args, dict) and "cmd" in args and "command" not in args:
                args = {**args, "command": args["cmd"]}
            name = str(payload.get("name") or ("shell" if kind == "local_shell_call" else "tool"))
            return [self.call(payload.get("call_id"), name, args, **common)]
        if kind in ("function_call_output", "custom_tool_call_output"):
            output, code = _codex_output(payload.get("output"))
            return [self.result(payload.get("call_id"), output, code not in (None, 0), **common)]
        return []


def _codex_output(raw: Any) -> tuple[str, int | None]:
    """A call's output and exit code: JSON `{output, metadata: {exit_code}}`, or text `Exit code: N …`."""
    if isinstance(raw, dict):
        raw = raw.get("content", json.dumps(raw))
    text = str(raw or "")
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and "output" in parsed:
        code = (parsed.get("metadata") or {}).get("exit_code")
        return str(parsed["output"]), code if isinstance(code, int) else None
    match = re.match(r"^Exit code: (-?\d+)", text)
    return text, int(match.group(1)) if match else None
