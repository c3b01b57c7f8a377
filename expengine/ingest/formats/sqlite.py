"""Agents that keep their sessions in a SQLite database (opencode's `opencode.db`, Goose's `sessions.db`):
opened read-only, so reading never creates, locks for writing or changes the tool's file, and read
from a high-water mark (a row id or an update time the tool keeps), so a nightly run reads only the
rows added or changed since the last one.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from ...store.vocabulary import EventError
from ..events import Event
from .base import AgentReader

if TYPE_CHECKING:
    from ..otel import Read

# beside the database: the write-ahead log holds what the tool wrote since its last checkpoint
SIDE_FILES = ("-wal",)


def connect(path: str) -> sqlite3.Connection:
    """The database read-only (a missing file is an error, never a new empty database)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(path)
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)


@dataclass
class Scan:
    """One read of a database from the mark `since`: the mark it reached, and the bytes of rows it read."""

    since: int
    mark: int
    bytes_read: int = 0

    def row(self, mark: int, size: int) -> None:
        self.mark = max(self.mark, mark)
        self.bytes_read += size


def row_reads(reader: AgentReader, line: int, read: Callable[[], list[Event]], raw: str) -> Iterator["Read"]:
    """One row's reads: its events and what the reader skipped on the way (by type), or its error."""
    before = Counter(reader.skipped)
    try:
        events = read()
    except (EventError, ValueError) as exc:
        yield line, None, str(exc), raw[:2000]
        return
    for ev in events:
        yield line, ev, None, None
    for kind, n in (reader.skipped - before).items():
        for _ in range(n):
            yield line, None, None, kind
