"""Aider's chat history: `.aider.chat.history.md` in the project's root, appended to by every run.

Aider writes Markdown: `# aider chat started at <time>` opens a run, `#### ` lines are what the user
typed, `> ` lines are the tool's own output (commands it ran and their output, `Applied edit to`,
`Commit <sha>`, errors, token costs, the start-up banner), anything else is the model's reply. A
`/run` or `/test` command is a tool call named by its program; the `> ` block after it is its result,
an error when it shows a traceback or a failing test run, as is any other block with a traceback.
Banners, token costs, interrupts and the model's `<thinking-content>` are skipped and counted. The
project is the folder the history lies in, named by its git root where it has one.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Iterable, Iterator

from ..events import Event
from .base import AgentReader, FileContext, as_reads, project_meta, timestamp

if TYPE_CHECKING:
    from ..otel import Read

STARTED = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
_THINKING = re.compile(r"<thinking-content-[0-9a-f]+>.*?</thinking-content-[0-9a-f]+>", re.DOTALL)
_FAILURE = re.compile(
    r"Traceback \(most recent call last\)|^\s*FAILED\b|\b\d+ failed\b|^\s*ERROR\b|^\w+(\.\w+)*(Error|Exception)\b|"
    r"\bcommand not found\b|^error(\[\w+\])?:",
    re.MULTILINE,
)
_BANNER = (
    "Aider v",
    "Main model:",
    "Weak model:",
    "Editor model:",
    "Model:",
    "Git repo:",
    "Repo-map:",
    "Use /help",
    "You can skip this check",
    "Add .aider* to .gitignore",
    "Added .aider* to .gitignore",
    "Cur working dir:",
    "Newer aider version",
    "Run pip install",
    "https://aider.chat/",
    "Initial repo scan",
    "Warning: it's best to only add files",
)
_SKIPPED_LINES = (
    ("Tokens: ", "token count"),
    ("^C ", "interrupt"),
    ("Added ", "file added"),
    ("Dropping ", "file dropped"),
)
_RUN_COMMANDS = ("/run", "/test", "/lint", "/git")
_PROMPT_COMMANDS = ("/ask", "/code", "/architect", "/context", "/help")


def is_aider_history(head: str) -> bool:
    return any(STARTED.match(line) for line in head.splitlines()[:20])


def project_of(path: str | None) -> dict[str, Any]:
    """The history's folder, named after its git root (the folder holding `.git`) where it lies in one."""
    if not path or path == "-":
        return {}
    folder = Path(path).resolve().parent
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return {**project_meta(str(folder)), "repo": candidate.name, "git_root": str(candidate)}
    return project_meta(str(folder))


class AiderReader(AgentReader):
    """The runs of one history file, read line by line (so that a growing file is read as it grows)."""

    def __init__(self, *, agent: str, path: str | None, now: dt.datetime) -> None:
        super().__init__(agent=agent)
        self.meta = project_of(path)
        self.name = self.meta.get("repo") or (Path(path).parent.name if path and path != "-" else "aider")
        self.now = now
        self.start = now
        self.pending: str | None = None  # the id of a /run call whose output is the next `> ` block

    def read(self, lines: Iterable[str]) -> Iterator[tuple[int, list[Event]]]:
        """(first line, events) per block of user lines, tool lines or reply."""
        block: list[str] = []
        kind, first = "", 0
        for number, raw in enumerate(lines, start=1):
            line = raw.rstrip("\n").rstrip()
            started = STARTED.match(line)
            this = (
                "start"
                if started
                else "user"
                if line.startswith("####")
                else "tool"
                if line.startswith(">")
                else "reply"
            )
            if not line and kind == "tool":
                this = "tool"  # a blank line inside the tool's output does not end it
            if this != kind or started:
                if block:
                    yield first, self.block(kind, block, first)
                block, kind, first = [], this, number
            if started:
                self.begin(started.group(1))
                yield number, []
                continue
            block.append(line[4:].strip() if this == "user" else line[1:].strip() if this == "tool" else line)
        if block:
            yield first, self.block(kind, block, first)

    def begin(self, started: str) -> None:
        self.start = timestamp(started.replace(" ", "T"), self.now)
        self.session = f"{self.name}/{started.replace(' ', 'T')}"
        self.goals.discard(self.session)
        self.pending = None

    def block(self, kind: str, lines: list[str], line: int) -> list[Event]:
        if self.session is None:  # a history whose first run's header was cut off
            self.begin(self.now.strftime("%Y-%m-%d %H:%M:%S"))
        session = self.session or ""
        common: dict[str, Any] = {
            "id": f"{session}/L{line}",
            "ts": self.start + dt.timedelta(milliseconds=line),
            "session": session,
            "meta": {**self.meta, "time_assumed": True},
        }
        text = "\n".join(lines).strip()
        if not text:
            return []
        if kind == "user":
            return self.user(text, common)
        if kind == "tool":
            return self.tool_output(lines, common)
        reply, thoughts = _THINKING.subn("", text)
        self.skip("thinking", thoughts)
        reply = reply.strip()
        return [self.event("message", role="assistant", content=reply, **common)] if reply else []

    def user(self, text: str, common: dict[str, Any]) -> list[Event]:
        word = text.split(maxsplit=1)[0]
        if text.startswith("!") or word in _RUN_COMMANDS:
            command = text[1:].strip() if text.startswith("!") else text[len(word) :].strip()
            if word == "/git":
                command = f"git {command}"
            call = self.call(common["id"], word.lstrip("/!") or "run", {"command": command or word}, **common)
            self.pending = call.tool_call_id
            return [call]
        if word in _PROMPT_COMMANDS:
            text = text[len(word) :].strip()
        elif word.startswith("/"):
            return self.skip("aider command")  # /add, /drop, /model …: the session's setup
        return self.prompt(text, **common) if text else []

    def tool_output(self, lines: list[str], common: dict[str, Any]) -> list[Event]:
        kept: list[str] = []
        out: list[Event] = []
        for n, line in enumerate(lines):
            skipped = next((why for prefix, why in _SKIPPED_LINES if line.startswith(prefix)), None)
            if line.startswith(_BANNER) or "/aider " in line or line.startswith("aider "):
                if line.startswith("Main model:"):
                    self.meta = {**self.meta, "model": line.split(":", 1)[1].split(" with ")[0].strip()}
                self.skip("banner")
            elif skipped:
                self.skip(skipped)
            elif line.startswith(("Applied edit to ", "Commit ")):
                out.extend(self.action(line, {**common, "id": f"{common['id']}/{n}"}))
            elif line:
                kept.append(line)
        text = "\n".join(kept).strip()
        if not text:
            return out
        failed = bool(_FAILURE.search(text))
        if self.pending or failed:
            call_id, self.pending = self.pending, None
            result = self.result(call_id, text, failed, **common)
            if call_id is None:
                result.tool_name = "aider"
            return [result, *out]
        return [self.event("observation", role="tool", content=text, **common), *out]

    def action(self, line: str, common: dict[str, Any]) -> list[Event]:
        """`Applied edit to FILE` and `Commit SHA MESSAGE`: what Aider did, each a call and its result."""
        if line.startswith("Applied edit to "):
            name, args = "edit", {"path": line[len("Applied edit to ") :].strip()}
        else:
            name, args = "git", {"command": f"git commit -m {line.split(' ', 2)[-1]!r}", "sha": line.split(" ")[1]}
        call = self.call(f"{common['id']}/call", name, args, **common)
        result = self.result(call.tool_call_id, line, False, **{**common, "id": f"{common['id']}/result"})
        return [call, result]


def read_history(stream: IO[bytes], ctx: FileContext) -> Iterator["Read"]:
    reader = AiderReader(agent=ctx.agent, path=ctx.label, now=ctx.now)
    return as_reads(reader, reader.read(io.TextIOWrapper(stream, encoding="utf-8", errors="replace")))
