"""The one owner of `source_cursors`: how far each agent log file has been read.

A cursor names the file (path, inode, size, modification time), where reading stopped (`offset`,
the end of the last whole line, and `line`, that line's number) and the hash of the file's first
`head_bytes`: a file whose inode or head changed, or that shrank below the offset, was rewritten or
rotated, and is read again from its start (the records' ids make that idempotent).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import astuple, dataclass, fields
from typing import TYPE_CHECKING

from .db import utcnow

if TYPE_CHECKING:
    from .store import Store


@dataclass(frozen=True)
class Cursor:
    path: str
    tool: str
    format: str
    inode: int
    size: int
    mtime_ns: int
    offset: int
    line: int
    head_bytes: int
    head_hash: str


_COLUMNS = ", ".join(f'"{f.name}"' for f in fields(Cursor))


def load(store: "Store") -> dict[str, Cursor]:
    rows = store.con.execute(f"SELECT {_COLUMNS} FROM source_cursors").fetchall()
    return {row[0]: Cursor(*row) for row in rows}


def save(store: "Store", cursors: list[Cursor], *, now: dt.datetime | None = None) -> None:
    """Record where reading stopped, after the records read up to there are stored."""
    if not cursors:
        return
    stamp = now or utcnow()
    store.con.executemany(
        f"INSERT OR REPLACE INTO source_cursors ({_COLUMNS}, updated_at) VALUES ({', '.join('?' * (len(fields(Cursor)) + 1))})",
        [[*astuple(c), stamp] for c in cursors],
    )
