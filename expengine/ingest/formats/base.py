"""What every coding agent's reader shares: the session helpers of `sessions.py`, a count of what was
skipped by type (thinking, token counts, banners), and the project a session ran in.

The project goes to `meta.repo` (the key the per-project rules read) as the name of the folder the
agent worked in, and the folder itself to `meta.cwd`, so a rule learnt in one agent's sessions holds
for the same project in another agent's.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from ...store.vocabulary import EventError, parse_ts
from ..events import Event, Skipped
from ..sessions import SessionReader, project_of

if TYPE_CHECKING:
    from ..otel import Read


class FileContext(Protocol):
    """What a reader knows of the file it reads (the registry's `Context`)."""

    @property
    def label(self) -> str: ...

    @property
    def agent(self) -> str: ...

    @property
    def now(self) -> dt.datetime: ...


class AgentReader(SessionReader):
    """A session reader that counts what it leaves out, by type."""

    def __init__(self, *, agent: str, session: str | None = None) -> None:
        super().__init__(agent=agent)
        self.skipped: Counter[str] = Counter()
        self.session = session  # None: not known yet (a log whose header names it)
        self.meta: dict[str, Any] = {}

    def at(self, key: str, ts: dt.datetime) -> dict[str, Any]:
        """What every event of this session read at `key` (its place in the log) shares."""
        session = self.session or ""
        return {"id": f"{session}/{key}", "ts": ts, "session": session, "meta": self.meta}

    def said(self, user: bool, text: Any, **common: Any) -> list[Event]:
        """A text: the user's (the session's first is its goal) or the assistant's; empty text is skipped."""
        words = str(text or "").strip()
        if not words:
            return self.skip("empty")
        if user:
            return self.prompt(words, **common)
        return [self.event("message", role="assistant", content=words, **common)]

    def skip(self, kind: str, n: int = 1) -> list[Event]:
        self.skipped[kind] += n
        return []


# sandbox and home folders: where an agent runs, not what project it works on
_NO_PROJECT = {"workspace", "testbed", "app", "home", "root", "tmp", "src", "code", "repo"}


def project_meta(cwd: Any, remote: Any = None) -> dict[str, Any]:
    """`{cwd, repo}` for a working folder (POSIX or Windows; `repo` as Claude Code's and Codex's readers
    name it), nothing for none."""
    if not isinstance(cwd, str) or not cwd.strip():
        return {}
    repo = project_of(cwd.strip(), remote)
    return {"cwd": cwd.strip(), **({"repo": repo} if repo and repo.lower() not in _NO_PROJECT else {})}


def timestamp(value: Any, fallback: dt.datetime) -> dt.datetime:
    """The record's own time, or `fallback` where it has none or one that does not parse."""
    if value in (None, ""):
        return fallback
    try:
        return parse_ts(value)
    except EventError:
        return fallback


def mapping(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """`obj[key]` where it is an object, else an empty one: the tools leave fields out, or null."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def from_ms(value: Any, fallback: dt.datetime) -> dt.datetime:
    """Epoch milliseconds (as the editor extensions and opencode write times), or ISO text."""
    return timestamp(
        value / 1000 if isinstance(value, (int, float)) and not isinstance(value, bool) else value, fallback
    )


def counted(reader: AgentReader, read: Callable[[Any, int], list[Event]]) -> Callable[[Any, int], list[Event]]:
    """`read` as a registry's object reader: an object that gives no event is skipped, counted by the
    type the reader skipped it as."""

    def run(obj: Any, number: int) -> list[Event]:
        before = Counter(reader.skipped)
        events = read(obj, number)
        if not events:
            new = reader.skipped - before
            if new:
                raise Skipped(next(iter(new)))
        return events

    return run


def as_reads(reader: AgentReader, blocks: Iterator[tuple[int, list[Event]]]) -> Iterator["Read"]:
    """(line, events) blocks of a text log as the registry's reads: each event, and each thing the reader
    skipped (by type) on the way."""
    seen: Counter[str] = Counter()
    for line, events in blocks:
        for ev in events:
            yield line, ev, None, None
        for kind, n in (reader.skipped - seen).items():
            for _ in range(n):
                yield line, None, None, kind
        seen = Counter(reader.skipped)
