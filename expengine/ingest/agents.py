"""Every coding agent's logs, found where they live and read from where the last run stopped.

`sources` lists what `discovery` finds with what is not yet ingested (against the store's cursors);
`ingest_agents` reads the new part of each source through the ordinary ingest pipeline, then saves
the cursors: only once the records are stored, so a run killed half-way is read again, idempotently.
"""

from __future__ import annotations

import datetime as dt
import io
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from ..results import Result
from ..store import cursors as cursor_table
from ..store.cursors import Cursor
from ..store.db import utcnow
from .discovery import Source, find_sources
from .formats import goose, opencode
from .formats.openhands import folder_events
from .formats.sqlite import Scan, connect
from .incremental import HEADER_FORMATS, Plan, RangeStream, cursor_after, first_line, plan, whole_lines_end
from .pipeline import IngestResult, ingest
from .readers import Item, read_items
from .whole_files import items_of

if TYPE_CHECKING:
    from ..store.store import Store

# the readers of the agents' databases, by format: rows from a high-water mark
DATABASES = {"opencode": opencode.database_reads, "goose": goose.database_reads}


@dataclass
class SourceRow:
    tool: str
    location: str  # the folder the tool keeps them in
    sessions: int
    bytes: int
    new_bytes: int  # not yet ingested: new files, what grew since the cursor, files rewritten
    new_sessions: int


@dataclass
class AgentsResult(Result):
    sources: int = 0
    read_sources: int = 0
    unchanged: int = 0
    bytes_read: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    ingest: IngestResult = field(default_factory=IngestResult)


def _location(source: Source) -> str:
    """The folder a tool keeps its sources in (a project's root for Aider)."""
    path = Path(source.path)
    marker = {"claude-code": "projects", "codex": "sessions", "gemini-cli": "tmp", "goose": "sessions"}.get(source.tool)
    for parent in path.parents:
        if parent.name == marker or (source.tool in ("cline", "roo-code") and parent.name == "tasks"):
            return str(parent)
        if source.tool == "opencode" and parent.name == "session":
            return str(parent.parent)
        if source.tool == "openhands" and parent.name in ("sessions", "conversations"):
            return str(parent)
    return str(path.parent)


def _plans(sources: list[Source], known: dict[str, Cursor]) -> list[Plan]:
    """What to read of each source; one the tool removed since it was found (a session deleted) is left out."""
    out = []
    for source in sources:
        try:
            out.append(plan(source, known.get(source.path)))
        except FileNotFoundError:
            continue
    return out


def list_sources(store: "Store | None", tools: list[str] | None, roots: list[str] | None) -> list[SourceRow]:
    """What is on this machine, per tool and folder, and how much of it the store (None: none yet) has
    not read yet."""
    known = cursor_table.load(store) if store is not None else {}
    rows: dict[tuple[str, str], SourceRow] = {}
    for p in _plans(find_sources(tools, roots), known):
        source = p.source
        key = (source.tool, _location(source))
        row = rows.setdefault(key, SourceRow(source.tool, key[1], 0, 0, 0, 0))
        row.sessions += 1
        row.bytes += p.stat.size if source.kind != "folder" else 0
        if not p.unchanged:
            row.new_bytes += p.stat.size - p.start if source.kind == "lines" else p.stat.size
            row.new_sessions += p.reason == "new"
    return list(rows.values())


def ingest_agents(
    store: "Store",
    tools: list[str] | None,
    roots: list[str] | None,
    *,
    strict: bool = False,
    defer_index: bool = False,
) -> AgentsResult:
    """Read what each source gained since the last run, store it, then move the cursors on (`defer_index`:
    as `ingest`'s)."""
    known = cursor_table.load(store)
    plans = _plans(find_sources(tools, roots), known)
    result = AgentsResult(sources=len(plans))
    by_reason: dict[str, int] = defaultdict(int)
    for p in plans:
        by_reason[p.reason] += 1
    result.by_reason = dict(by_reason)
    todo = {p.source.path: p for p in plans if not p.unchanged}
    result.unchanged, result.read_sources = len(plans) - len(todo), len(todo)
    moved: dict[str, Cursor] = {}
    read_bytes: dict[str, int] = {}
    now = utcnow()

    def reader(name: str) -> Iterator[Item]:
        yield from read_plan(store, todo[name], now, moved, read_bytes)

    if todo:
        result.ingest = ingest(store, list(todo), strict=strict, reader=reader, defer_index=defer_index)
    cursor_table.save(store, list(moved.values()), now=now)
    result.bytes_read = sum(read_bytes.values())
    return result


def read_plan(
    store: "Store", p: Plan, now: dt.datetime, moved: dict[str, Cursor], read_bytes: dict[str, int]
) -> Iterator[Item]:
    """The items of what `p` says to read, and (into `moved`) where the next run starts."""
    source, cfg = p.source, store.config.ingest
    common: dict[str, Any] = {
        "fmt": source.format,
        "max_line_bytes": cfg.max_line_bytes,
        "max_document_bytes": cfg.max_document_bytes,
        "agent": None,
        "now": now,
    }
    if source.kind == "folder":
        size = 0
        for name, events, size_of, error in folder_events(Path(source.path), agent="default", now=now):
            size += size_of
            if error:
                yield Item(name, 1, error=error)
            for ev in events:
                ev.source_file, ev.source_line = name, 1
                yield Item(name, 1, event=ev)
        read_bytes[source.path] = size
        moved[source.path] = cursor_after(p, p.stat.size, 0)
        return
    if source.kind == "database":
        scan = Scan(p.start, p.start)
        con = connect(source.path)
        try:
            reads = DATABASES[source.format](con, scan, agent="default", now=now)
            yield from items_of(reads, source.path)
        finally:
            con.close()
        read_bytes[source.path] = scan.bytes_read
        moved[source.path] = cursor_after(p, scan.mark, 0)
        return
    if source.kind == "whole":
        yield from read_items(source.path, **common)
        read_bytes[source.path] = p.stat.size
        moved[source.path] = cursor_after(p, p.stat.size, 0)
        return
    end = whole_lines_end(source.path, p.start, p.stat.size)
    header = first_line(source.path, cfg.max_line_bytes) if p.start and source.format in HEADER_FORMATS else b""
    stream = RangeStream(source.path, p.start, end, header)
    first = p.line + 1 - (1 if header else 0)
    for item in read_items(source.path, **common, opened=io.BufferedReader(stream), first_line=first):
        if item.line > p.line or not header:
            yield item
    read_bytes[source.path] = stream.bytes_read
    moved[source.path] = cursor_after(p, end, stream.newlines)
