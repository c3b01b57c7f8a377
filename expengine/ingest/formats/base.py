"""What every coding agent's reader shares: the session helpers of `sessions.py`, a count of what was
skipped by type (thinking, token counts, banners), and the project a session ran in.

The project goes to `meta.repo` (the key the per-project rules read) as the name of the folder the
agent worked in, and the folder itself to `meta.cwd`, so a rule learnt in one agent's sessions holds
for the same project in another agent's.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from ...store.vocabulary import EventError, parse_ts
from ..events import Event
from ..sessions import SessionReader


class AgentReader(SessionReader):
    """A session reader that counts what it leaves out, by type."""

    def __init__(self, *, agent: str) -> None:
        super().__init__(agent=agent)
        self.skipped: Counter[str] = Counter()

    def skip(self, kind: str, n: int = 1) -> list[Event]:
        self.skipped[kind] += n
        return []


# sandbox and home folders: where an agent runs, not what project it works on
_NO_PROJECT = {"workspace", "testbed", "app", "home", "root", "tmp", "/", "\\", "src", "code", "repo"}


def project_meta(cwd: Any) -> dict[str, Any]:
    """`{cwd, repo}` for a working folder (POSIX or Windows), nothing for none."""
    if not isinstance(cwd, str) or not cwd.strip():
        return {}
    cwd = cwd.strip()
    pure = PureWindowsPath(cwd) if ("\\" in cwd or cwd[1:3] == ":\\") else PurePosixPath(cwd)
    name = pure.name or str(pure)
    return {"cwd": cwd, "repo": name} if name.lower() not in _NO_PROJECT else {"cwd": cwd}


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
