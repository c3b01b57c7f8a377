"""What the coding assistants' session logs share (Claude Code and Codex, in formats/): one stateful
reader per file, since a tool's result names its call only by id on a later line, and the project a
session worked in.

Shell commands are named by the program they run (as for trajectories), the tool itself goes to
`meta.tool`, the whole command line (normalised: no `bash -lc` wrapper) stays in `tool_args.command`.
The project goes to `meta.repo`, the key SWE-agent runs use, so the per-project test-command and
error → fix rules fire for every coding agent: `owner/name` from the git remote when the log has it,
else the folder the session was started in, a worktree counted as its repository.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import PurePosixPath
from typing import Any

from .events import Event, as_text
from .trajectories import program_of

_REMOTE = re.compile(r"^(?:[\w+.-]+://)?(?:[^@/]+@)?[^/:]+[:/](?P<path>.+?)(?:\.git)?/?$")
# `spotter-worktrees/spotter-fum`, `repo/.worktrees/feature`, `repo/.claude/worktrees/x`
_WORKTREES = re.compile(r"^(?P<name>.+?)[-_.]worktrees?$")
_SHELLS = ("bash", "sh", "zsh")


def project_of(cwd: Any, remote: Any = None) -> str | None:
    """`owner/name` from a git remote (`git@github.com:o/n.git`, `https://host/o/n`), else the name of the
    session's folder; worktrees of one repository are that repository."""
    if isinstance(remote, str) and remote.strip():
        match = _REMOTE.match(remote.strip())
        if match:
            parts = match.group("path").strip("/").split("/")
            if len(parts) >= 2:
                return "/".join(parts[-2:])
    if not isinstance(cwd, str) or not cwd.strip("/ "):
        return None
    parts = [p for p in PurePosixPath(cwd.replace("\\", "/")).parts if p not in ("/", "")]
    for i, part in enumerate(parts):
        named = _WORKTREES.match(part)
        if named and i + 1 < len(parts):
            return named.group("name")
        if part in ("worktrees", ".worktrees") and i > 0:
            owner = [p for p in parts[:i] if p not in (".claude", ".git", ".codex")]
            return owner[-1] if owner else None
    return parts[-1] if parts else None


def command_line(command: Any) -> str | None:
    """A shell call's command as one line of text: `["bash", "-lc", "cd x && pytest"]` → `cd x && pytest`."""
    if isinstance(command, list):
        words = [str(w) for w in command]
        if len(words) >= 3 and PurePosixPath(words[0]).name in _SHELLS and words[1] in ("-c", "-lc", "-l"):
            return words[-1]
        return " ".join(words)
    return command if isinstance(command, str) and command.strip() else None


def text_of(content: Any) -> str:
    """A block's content: a string, or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("text"))
    return as_text(content) or ""


class SessionReader:
    """Call ids remembered per file, the sessions that have their goal, and one way to make an event."""

    def __init__(self, *, agent: str) -> None:
        self.agent = agent
        self.calls: dict[str, Event] = {}
        self.goals: set[str] = set()

    def event(self, kind: str, id: str, ts: dt.datetime, session: str, meta: dict[str, Any], **fields: Any) -> Event:
        ev = Event(ts=ts, kind=kind, id=id, agent=self.agent, session=session, goal_id=session)
        ev.meta = dict(meta)
        for key, value in fields.items():
            setattr(ev, key, value)
        return ev

    def call(self, call_id: str | None, name: str, args: Any, **common: Any) -> Event:
        """A tool call; a shell command is named by its program and keeps its whole command line."""
        command = command_line(args.get("command")) if isinstance(args, dict) else None
        if command is not None:
            args = {**args, "command": command}
        program = program_of(command) if command else name
        meta = {**common.pop("meta"), "tool": name}
        ev = self.event("tool_call", meta=meta, role="assistant", tool_name=program, tool_args=args, **common)
        ev.tool_call_id = call_id
        if call_id:
            self.calls[call_id] = ev
        return ev

    def result(
        self, call_id: str | None, output: str, failed: bool, *, cancelled: bool = False, **common: Any
    ) -> Event:
        """A call's result: an error when it failed; a cancelled call (its sibling failed, the user said
        no) is neither a success nor a failure of its own, and says so in `meta.cancelled`."""
        call = self.calls.get(call_id or "")
        meta = {**common.pop("meta"), **({"call_record": call.id} if call else {})}
        if cancelled:
            meta["cancelled"] = True
        failed = failed and not cancelled
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

    def prompt(self, text: str, *, goal: bool = True, **common: Any) -> list[Event]:
        """A user's words; the session's first one is also its goal (unless `goal` is False: a prompt the
        tool wrote itself, such as the request to summarise a conversation)."""
        out = []
        session = common["session"]
        if goal and session not in self.goals:
            self.goals.add(session)
            opened = self.event("goal", **{**common, "id": f"{common['id']}/goal"})
            opened.goal_status, opened.goal_description, opened.role = "open", text, "user"
            out.append(opened)
        out.append(self.event("message", role="user", content=text, **common))
        return out
