"""Claude Code sessions (`~/.claude/projects/<project>/<session>.jsonl`, subagents under
`<session>/subagents/agent-*.jsonl`), one JSON object per line.

`user` and `assistant` lines carry content blocks: text, tool calls and results are stored; `thinking`
blocks are skipped (the model's scratch work, signed and often empty). Every other line type the
client writes is bookkeeping and is skipped by its type: `progress` (hook and subagent progress),
`file-history-snapshot`, `queue-operation`, `summary` (a title), `system` lines other than warnings
and errors (hook summaries, turn durations, compaction markers).
"""

from __future__ import annotations

import re
from typing import Any

from ...store.vocabulary import EventError, parse_ts
from ..events import Event, Skipped
from ..sessions import SessionReader, project_of, text_of

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CONTENT_TYPES = ("user", "assistant", "system")
# a line type only Claude Code writes, recognised even without a session id (a session's usual first line)
_OWN_TYPES = ("file-history-snapshot", "queue-operation", "summary", "progress")
# a call the client cancelled: a parallel sibling failed, or the user refused or interrupted it
_CANCELLED = ("Sibling tool call errored", "The user doesn't want to proceed", "[Request interrupted by user")
# the prompt of the subagent that compacts a conversation: the client's words, not a task
_SUMMARY_REQUEST = "Your task is to create a detailed summary"


def is_claude_code(obj: Any) -> bool:
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        return False
    return obj["type"] in _OWN_TYPES or (
        obj["type"] in _CONTENT_TYPES and ("sessionId" in obj or "leafUuid" in obj) and "uuid" in obj
    )


class ClaudeCodeReader(SessionReader):
    def __init__(self, *, agent: str) -> None:
        super().__init__(agent=agent)
        self.project: str | None = None  # from the first cwd: where the session was started

    def events(self, obj: dict[str, Any], _: int = 0) -> list[Event]:
        kind = obj["type"]
        if kind not in _CONTENT_TYPES:
            raise Skipped(kind)
        if obj.get("isMeta"):
            raise Skipped("meta")  # command caveats the client adds
        uuid, session = obj.get("uuid"), obj.get("sessionId")
        if not isinstance(uuid, str) or not isinstance(session, str):
            raise EventError("a Claude Code line needs `uuid` and `sessionId`")
        if self.project is None:
            self.project = project_of(obj.get("cwd"))
        meta: dict[str, Any] = {
            k: v
            for k, v in (("cwd", obj.get("cwd")), ("git_branch", obj.get("gitBranch")), ("repo", self.project))
            if v
        }
        agent_id = str(obj.get("agentId") or "sidechain")
        if obj.get("isSidechain"):  # a subagent: its own session, linked to the one that started it
            meta["parent_session"] = session
            session = f"{session}/agent-{agent_id}"
        ts = parse_ts(obj.get("timestamp"))
        if kind == "system":
            if obj.get("level") not in ("warning", "error"):
                raise Skipped(f"system:{obj.get('subtype') or 'info'}")
            text = _ANSI.sub("", str(obj.get("content") or "")).strip()
            return [self.event("observation", id=uuid, ts=ts, session=session, meta=meta, content=text)] if text else []
        message = obj.get("message") or {}
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        compacting = agent_id.startswith("acompact") or bool(obj.get("isCompactSummary"))
        out: list[Event] = []
        skipped = None
        for n, block in enumerate(blocks):
            if not isinstance(block, dict):
                continue
            common: dict[str, Any] = {"id": f"{uuid}/{n}", "ts": ts, "session": session, "meta": meta}
            block_type = block.get("type")
            if block_type == "text" and str(block.get("text") or "").strip():
                text = str(block["text"]).strip()
                if kind == "user":
                    goal = not (compacting or text.startswith(_SUMMARY_REQUEST) or "<system-reminder>" in text[:40])
                    out.extend(self.prompt(text, goal=goal, **common))
                else:
                    out.append(self.event("message", role="assistant", content=text, **common))
            elif block_type == "tool_use":
                out.append(self.call(block.get("id"), str(block.get("name") or "tool"), block.get("input"), **common))
            elif block_type == "tool_result":
                output = text_of(block.get("content"))
                cancelled = any(marker in output for marker in _CANCELLED)
                failed = bool(block.get("is_error"))
                out.append(self.result(block.get("tool_use_id"), output, failed, cancelled=cancelled, **common))
            elif block_type in ("thinking", "redacted_thinking", "image"):
                skipped = str(block_type)
        if not out:
            raise Skipped(skipped or "empty message")
        return out
