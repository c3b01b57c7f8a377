"""Read agent log sources from where the last run stopped (the cursors of `store/cursors.py`).

A JSONL source is read from its cursor's offset to the end of its last whole line: a half-written
last line waits for the next run. A source whose inode changed (rotated), that shrank below the
offset or whose head changed (rewritten) is read again from its start; the records' ids make that
idempotent. A source the tool rewrites whole is read again when its size, time or inode changed. A
source whose inode, size and time are those of its cursor is not opened at all, so a run with
nothing new reads no bytes. A database's cursor offset is the high-water mark its reader names (a row
id, an update time); its size and time include its write-ahead log, where new rows land first.

The cursor read here is saved only after the records are stored: a run killed half-way leaves the
old cursors, and the next run reads that part again, its records already stored counted as duplicates.
"""

from __future__ import annotations

import hashlib
import io
import os
from dataclasses import dataclass
from typing import IO, Any

from ..store.cursors import Cursor
from .discovery import Source
from .formats.sqlite import SIDE_FILES

HEAD_BYTES = 4096
# formats whose first line names the session (or its project): replayed before reading on from an offset
HEADER_FORMATS = {"codex", "gemini-cli", "goose"}
_TAIL_CHUNK = 1 << 16


@dataclass(frozen=True)
class Stat:
    inode: int
    size: int
    mtime_ns: int


def stat_of(source: Source) -> Stat:
    """A folder source (one event per file) changes size as files are added: its size is their count."""
    st = os.stat(source.path)
    if source.kind == "folder":
        names = [n for n in os.listdir(source.path) if n.endswith(".json")]
        latest = max((os.stat(os.path.join(source.path, n)).st_mtime_ns for n in names), default=st.st_mtime_ns)
        return Stat(st.st_ino, len(names), max(latest, st.st_mtime_ns))
    if source.kind == "database":
        sides = [os.stat(source.path + s) for s in SIDE_FILES if os.path.isfile(source.path + s)]
        return Stat(
            st.st_ino,
            st.st_size + sum(s.st_size for s in sides),
            max([st.st_mtime_ns, *(s.st_mtime_ns for s in sides)]),
        )
    return Stat(st.st_ino, st.st_size, st.st_mtime_ns)


def head_hash(path: str, length: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(length)).hexdigest()


@dataclass
class Plan:
    """What to read of one source: from `start` (line `line` + 1; a database: its high-water mark), or
    nothing."""

    source: Source
    stat: Stat
    start: int
    line: int
    reason: str  # new | grown | rotated | rewritten | changed | unchanged

    @property
    def unchanged(self) -> bool:
        return self.reason == "unchanged"


def plan(source: Source, cursor: Cursor | None) -> Plan:
    st = stat_of(source)
    if cursor is None:
        return Plan(source, st, 0, 0, "new")
    if (st.inode, st.size, st.mtime_ns) == (cursor.inode, cursor.size, cursor.mtime_ns):
        return Plan(source, st, cursor.offset, cursor.line, "unchanged")
    if source.kind == "database" and st.inode == cursor.inode:
        return Plan(source, st, cursor.offset, 0, "grown")
    if source.kind != "lines":
        return Plan(source, st, 0, 0, "changed")
    if st.inode != cursor.inode:
        return Plan(source, st, 0, 0, "rotated")
    if st.size < cursor.offset or head_hash(source.path, cursor.head_bytes) != cursor.head_hash:
        return Plan(source, st, 0, 0, "rewritten")
    return Plan(source, st, cursor.offset, cursor.line, "grown")


def whole_lines_end(path: str, start: int, size: int) -> int:
    """The offset just past the last newline at or after `start` (`start` when there is none): a line
    the tool is still writing is left for the next run."""
    with open(path, "rb") as f:
        end = size
        while end > start:
            begin = max(start, end - _TAIL_CHUNK)
            f.seek(begin)
            chunk = f.read(end - begin)
            at = chunk.rfind(b"\n")
            if at >= 0:
                return begin + at + 1
            end = begin
    return start


class RangeStream(io.RawIOBase):
    """`header` (the source's first line, replayed) and then bytes `start` to `end` of the file; it counts
    the newlines it passes in the range, the lines the cursor moves on by."""

    def __init__(self, path: str, start: int, end: int, header: bytes = b"") -> None:
        self.file: IO[bytes] = open(path, "rb")
        self.file.seek(start)
        self.left = end - start
        self.header = memoryview(header)
        self.bytes_read = len(header)
        self.newlines = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.header:
            n = min(len(buffer), len(self.header))
            buffer[:n], self.header = self.header[:n], self.header[n:]
            return n
        if self.left <= 0:
            return 0
        data = self.file.read(min(len(buffer), self.left))
        self.left -= len(data)
        self.bytes_read += len(data)
        self.newlines += data.count(b"\n")
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.file.close()
        super().close()


def first_line(path: str, limit: int) -> bytes:
    with open(path, "rb") as f:
        line = f.readline(limit + 1)
    return line if line.endswith(b"\n") else b""


def cursor_after(p: Plan, end: int, lines: int) -> Cursor:
    """Where the next run starts: `end` (the last whole line's end, a database's high-water mark),
    `lines` later."""
    source = p.source
    head_len = min(HEAD_BYTES, end) if source.kind == "lines" else 0
    digest = head_hash(source.path, head_len) if head_len else ""
    offset = end if source.kind in ("lines", "database") else p.stat.size
    return Cursor(
        path=source.path,
        tool=source.tool,
        format=source.format,
        inode=p.stat.inode,
        size=p.stat.size if source.kind != "lines" or end == p.stat.size else end,
        mtime_ns=p.stat.mtime_ns if source.kind != "lines" or end == p.stat.size else 0,
        offset=offset,
        line=p.line + lines,
        head_bytes=head_len,
        head_hash=digest,
    )
