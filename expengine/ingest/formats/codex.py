"""Codex rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`), one JSON object per line.

`session_meta` names the session, its folder and git remote; `response_item` lines hold the messages,
tool calls and their outputs. `event_msg` lines mostly echo them for the UI, except that Codex Desktop
writes some prompts only as `event_msg user_message`: a user's or the agent's words are stored from
whichever line says them first, once. Instructions Codex injects (AGENTS.md, environment context),
reasoning (encrypted or a summary), token counts and turn markers are skipped by type.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ...store.vocabulary import parse_ts
from ..events import Event, Skipped
from ..sessions import SessionReader, project_of, text_of

_BOILERPLATE = ("# AGENTS.md instructions", "<environment_context>", "<user_instructions>", "<INSTRUCTIONS>")
_LINE_TYPES = ("session_meta", "response_item", "event_msg", "turn_context")
_CALLS = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
# exit codes as each Codex version prints them in a call's output
_EXIT = re.compile(r"^(?:Exit code: |Process exited with code )(-?\d+)\s*$", re.M)
_TOOL_FAILED = re.compile(r"^\w+ failed: ")  # `write_stdin failed: stdin is closed for this session`


def is_codex(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") in _LINE_TYPES and isinstance(obj.get("payload"), dict)


class CodexReader(SessionReader):
    def __init__(self, *, agent: str, label: str = "") -> None:
        super().__init__(agent=agent)
        # a rollout whose `session_meta` line is lost is still one session, named by its file
        self.session = Path(label).name.split(".")[0] if label else ""
        self.meta: dict[str, Any] = {}
        self.said: set[tuple[str, str]] = set()  # (role, text) stored once from response_item or event_msg

    def events(self, obj: dict[str, Any], number: int = 0) -> list[Event]:
        payload, ts = obj["payload"], parse_ts(obj.get("timestamp"))
        kind, item = obj["type"], str(payload.get("type") or "")
        if kind == "session_meta":
            self.session = str(payload.get("id") or self.session)
            git = payload.get("git") if isinstance(payload.get("git"), dict) else {}
            repo = project_of(payload.get("cwd"), git.get("repository_url"))
            fields = (("cwd", payload.get("cwd")), ("git_branch", git.get("branch")), ("repo", repo))
            self.meta = {k: v for k, v in fields if v}
            raise Skipped("session_meta")
        if kind == "turn_context":
            if payload.get("cwd"):
                self.meta = {**self.meta, "cwd": payload["cwd"]}
                self.meta.setdefault("repo", project_of(payload["cwd"]))
            raise Skipped("turn_context")
        common: dict[str, Any] = {
            "id": f"{self.session}/{number}",
            "ts": ts,
            "session": self.session,
            "meta": self.meta,
        }
        if kind == "event_msg":
            if item in ("user_message", "agent_message") and isinstance(payload.get("message"), str):
                role = "user" if item == "user_message" else "assistant"
                said = self._words(role, payload["message"], common)
                if said:
                    return said
            raise Skipped(f"event_msg:{item}")
        if item == "message":
            role = str(payload.get("role"))
            if role not in ("user", "assistant"):
                raise Skipped(f"{role} message")
            text = text_of(payload.get("content")).strip()
            if not text:
                raise Skipped("empty message")
            if text.startswith(_BOILERPLATE):
                raise Skipped("instructions")
            said = self._words(role, text, common)
            if not said:
                raise Skipped("repeated message")
            return said
        if item in _CALLS:
            raw = payload.get("arguments", payload.get("input", payload.get("action")))
            try:
                args = json.loads(raw) if isinstance(raw, str) and raw.strip().startswith("{") else raw
            except json.JSONDecodeError:
                args = {"_raw": raw}
            if isinstance(args, dict) and "cmd" in args and "command" not in args:
                args = {**args, "command": args["cmd"]}
            default = {"local_shell_call": "shell", "web_search_call": "web_search"}.get(item, "tool")
            name = str(payload.get("name") or default)
            return [self.call(payload.get("call_id") or payload.get("id"), name, args, **common)]
        if item in _OUTPUTS:
            output, code = _output(payload.get("output"))
            failed = code not in (None, 0) or bool(_TOOL_FAILED.match(output))
            return [self.result(payload.get("call_id"), output, failed, **common)]
        raise Skipped(item or kind)  # reasoning, and item types this reader does not know

    def _words(self, role: str, text: str, common: dict[str, Any]) -> list[Event]:
        """A user's or the agent's words, the first time they are said (Codex logs them twice)."""
        text = text.strip()
        if not text or (role, text) in self.said:
            return []
        self.said.add((role, text))
        if role == "user":
            return self.prompt(text, **common)
        return [self.event("message", role="assistant", content=text, **common)]


def _output(raw: Any) -> tuple[str, int | None]:
    """A call's output and exit code: JSON `{output, metadata: {exit_code}}`, or text with `Exit code: N`
    (Codex 0.4x) or `Process exited with code N` (0.12x)."""
    if isinstance(raw, dict):
        raw = raw.get("content", json.dumps(raw))
    if isinstance(raw, list):
        raw = text_of(raw)
    text = str(raw or "")
    try:
        parsed = json.loads(text) if text.startswith("{") else None
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and "output" in parsed:
        code = (parsed.get("metadata") or {}).get("exit_code")
        return str(parsed["output"]), code if isinstance(code, int) else None
    match = _EXIT.search(text[:2000])
    return text, int(match.group(1)) if match else None
