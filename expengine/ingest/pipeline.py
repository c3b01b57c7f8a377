"""Ingest: validate → redact → assess → embed (cached) → DuckDB (truth) → LanceDB (index)."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ..clock import utcnow
from ..errors import RejectedLinesError
from ..results import Result
from ..store.db import in_ids
from ..store.embeddings import EmbedCounts
from ..store.index import MEMORIES
from ..store.journal import journal_ingest
from ..store.pause import pause_for_tests
from ..textutil import count_scripts, shares
from .checks import file_warnings
from .events import Event, as_text, render
from .outputs import shorten_outputs
from .readers import Item, expand_paths, read_items
from .redact import Redactor
from .remote import absolute_source
from .rules import assess
from .scripts import embedder_warning, pick_model
from .users import with_user
from .writer import BatchWriter

# events per file read ahead to choose a new store's embedder from all the files of its first ingest
PRESCAN = 2000

if TYPE_CHECKING:
    from ..store.store import Store

# events per write (one DuckDB transaction, one LanceDB append): each batch costs a few fixed queries and
# commits, so 2,048 took a third less CPU per record than 512 outside the encoder (`bench/ingest.py`)
BATCH = 2048
# and at most this many characters of text (tool output is most of an agent log's bytes): a batch is held
# while the next one is read, then copied into Arrow, DuckDB and LanceDB, so 2,048 long tool results took
# half a GB on top of the libraries (`bench/sources.py`, 500 KB sessions)
BATCH_CHARS = 4_000_000
# the bound of an ingest that leaves LanceDB to the next open (a cron's `ingest --from-agents`): its batches
# make no LanceDB fragment each, so small ones cost no more CPU, and each one held is memory at its peak
# (200 agent sessions, 22 MB: 4M characters a batch peaked ~20 MB higher, `bench/sources.py`)
DEFERRED_BATCH_CHARS = 1_000_000


@dataclass
class Reject:
    file: str
    line: int
    error: str


@dataclass
class IngestResult(Result):
    read: int = 0
    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    # lines the tools write that hold nothing to remember, by type (`progress`, `event_msg:token_count`)
    skipped: dict[str, int] = field(default_factory=dict)
    redacted: int = 0
    # tool outputs stored as their head, tail and error lines (`ingest.max_output_chars`)
    outputs_shortened: int = 0
    embedded: int = 0
    cached_embeddings: int = 0
    files: list[str] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    redacted_by_kind: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    # share of words per script (latin, cjk, other), and a warning when the embedder cannot read them
    scripts: dict[str, float] = field(default_factory=dict)
    embedder: str = ""
    warning: str | None = None
    # outcomes in an --outcomes report for sessions this store has no record of (a report grades every
    # instance of a benchmark; only the runs ingested get a goal and an outcome)
    unknown_sessions: int = 0
    # per file: most of its lines rejected or skipped (and the format it looks like), or spans without content
    file_warnings: list[str] = field(default_factory=list)


def ingest(
    store: "Store",
    paths: list[str],
    *,
    fmt: str = "auto",
    strict: bool = False,
    agent: str | None = None,
    user_field: str | None = None,
    outcomes: list[str] | None = None,
    on_progress: Callable[[int], None] | None = None,
    preread: dict[str, list[Item]] | None = None,
    reader: Callable[[str], Iterable[Item]] | None = None,
    defer_index: bool = False,
) -> IngestResult:
    """Read `paths` as `fmt`, then `outcomes` (evaluation reports that grade those runs), and store it all.
    With `preread` (file -> its items, read and validated elsewhere: a fleet's routing stage), those
    items are stored instead of reading `paths`, through the same redaction, checks and writes. With
    `reader`, each of `paths` (files or folders, not expanded) is read by it instead of `read_items`.
    `user_field`: the dotted path of each event's user, where the log keeps it elsewhere (`meta.customer`).
    `defer_index`: store in DuckDB only (the vectors cached there) and leave the LanceDB append, with its
    full-text index, to the next open that heals: neither lance nor lancedb is loaded (a cron's ingest)."""
    import time

    started = time.perf_counter()
    files = list(preread) if preread is not None else list(paths) if reader else expand_paths(paths) if paths else []
    reports = expand_paths(outcomes) if outcomes else []
    result = IngestResult(files=files + reports)
    redactor = Redactor(enabled=store.config.ingest.redact)
    now = utcnow()
    seen: set[str] = set()
    words: dict[str, Counter[str]] = {}
    batch: list[Item] = []
    batch_chars, max_chars = 0, DEFERRED_BATCH_CHARS if defer_index else BATCH_CHARS

    read: dict[str, Any] = {
        "fmt": fmt,
        "max_line_bytes": store.config.ingest.max_line_bytes,
        "max_document_bytes": store.config.ingest.max_document_bytes,
        "agent": agent,
        "now": now,
    }
    read_file = reader or (lambda name: read_items(name, **read))
    ahead = _read_ahead(store, files, read_file, preread)

    def written(events: int, stored: int, counts: EmbedCounts) -> None:
        result.stored += stored
        result.embedded += counts.embedded
        result.cached_embeddings += counts.cached
        pause_for_tests(store.dir, "ingest-batch")
        if on_progress:
            on_progress(events)

    writer = BatchWriter(store, written, index=not defer_index)

    def flush() -> None:
        nonlocal batch_chars
        if not seen:  # before this ingest's first vectors
            _pick_embedder(store, ahead or words)
        writer.submit(_fresh_rows(store, batch, result, redactor, seen, now), len(batch))
        batch.clear()
        batch_chars = 0

    try:
        for name, file_format in [(f, fmt) for f in files] + [(r, "outcomes") for r in reports]:
            _record_file(store, name, now)
            counts = words.setdefault(name, Counter())
            items: Iterable[Item] = (
                preread[name]
                if preread is not None and file_format != "outcomes"
                else read_file(name)
                if file_format != "outcomes"
                else read_items(name, **{**read, "fmt": file_format})
            )
            if file_format == "outcomes":
                if batch:
                    flush()  # the runs this report grades are in the store before it is read
                writer.drain()
                items = _graded_sessions_only(store, list(items), result)
            tally: Counter[str] = Counter()
            for item in items:
                result.read += 1
                if item.skipped is not None:
                    result.skipped[item.skipped] = result.skipped.get(item.skipped, 0) + 1
                    tally["skipped"] += 1
                    tally[f"skipped:{item.skipped}"] += 1
                    continue
                if item.event is not None and user_field:
                    item = with_user(item, user_field)
                if item.event is None:
                    _reject(store, result, item, redactor, now)
                    tally["rejected"] += 1
                    continue
                tally["events"] += 1
                text = render(item.event)
                count_scripts([text], counts)
                batch.append(item)
                batch_chars += len(text)
                if len(batch) >= BATCH or batch_chars >= max_chars:
                    flush()
            result.file_warnings.extend(file_warnings(name, file_format, tally, read))
        if batch:
            flush()
        writer.drain()
    finally:
        writer.close()
    if result.stored and not defer_index:
        store.index.refresh_text_index(MEMORIES)
    result.redacted_by_kind = dict(redactor.counts)
    total = sum(words.values(), Counter())
    result.scripts, result.embedder = shares(total), store.embeddings.name
    result.warning = embedder_warning(store.embeddings.name, total, words)
    result.seconds = round(time.perf_counter() - started, 3)
    if strict and result.rejected:
        raise RejectedLinesError(
            f"{result.rejected} line(s) rejected (first: {result.rejects[0].file}:{result.rejects[0].line}: "
            f"{result.rejects[0].error})",
            hint="fix them and ingest again; good lines were stored; see `expengine rejects`",
        )
    if strict and result.file_warnings:
        raise RejectedLinesError(result.file_warnings[0], hint="good lines were stored; pass the --format named")
    return result


def _record_file(store: "Store", name: str, now: dt.datetime) -> None:
    """Note the file before reading it, so an ingest killed midway is listed by `repair` too."""
    journal_ingest(store.dir, "<stdin>" if name == "-" else absolute_source(name), now)


def _graded_sessions_only(store: "Store", items: list[Item], result: IngestResult) -> list[Item]:
    """A report's outcomes for the sessions the store holds; the others are counted, not stored."""
    sessions = list({i.event.session for i in items if i.event is not None and i.event.session})
    graded, params = in_ids("session", sessions)
    last = dict(
        store.con.execute(f"SELECT session, max(ts) FROM records WHERE {graded} GROUP BY session", params).fetchall()
    )
    known = set(last)
    kept = [i for i in items if i.event is None or i.event.session in known]
    for item in kept:
        if item.event is not None:  # graded after the run: never before its task in time
            ended = last[item.event.session] + dt.timedelta(milliseconds=1)  # naive UTC, as stored
            ts = item.event.ts
            naive = ts.astimezone(dt.timezone.utc).replace(tzinfo=None) if ts.tzinfo else ts
            item.event.ts = max(naive, ended)
    result.unknown_sessions += len({i.event.session for i in items if i.event is not None} - known)
    return kept


def _read_ahead(
    store: "Store",
    files: list[str],
    read_file: Callable[[str], Iterable[Item]],
    preread: dict[str, list[Item]] | None = None,
) -> dict[str, Counter[str]]:
    """Words per script in the first PRESCAN events of each file, so that a new store on `auto` picks its
    embedder from all the files of its first ingest, whatever their order (stdin cannot be read twice:
    without files, the first batch decides). Nothing for a store that has its model already."""
    by_file: dict[str, Counter[str]] = {}
    if store.config.embedder.model != "auto" or _has_records(store):
        return by_file
    for name in files:
        if name != "-":
            items = islice(preread[name] if preread is not None else read_file(name), PRESCAN)
            by_file[name] = count_scripts(render(item.event) for item in items if item.event is not None)
    return by_file


def _pick_embedder(store: "Store", by_file: dict[str, Counter[str]]) -> None:
    """Before a new store's first vectors, take the model `pick_model` names for its words per file
    (the multilingual or the mixed one); it then stays the store's model."""
    if store.config.embedder.model != "auto" or _has_records(store):
        return
    model = pick_model(sum(by_file.values(), Counter()), by_file)
    if model is not None:
        store.choose_embedder(model)


def _has_records(store: "Store") -> bool:
    return bool(store.con.execute("SELECT count(*) FROM records").fetchall()[0][0])


def _reject(store: "Store", result: IngestResult, item: Item, redactor: Redactor, now: dt.datetime) -> None:
    """Quarantine a bad line; its raw text and the error (which may quote a value) are redacted like any field."""
    error, _ = redactor(item.error or "rejected")
    raw, _ = redactor(item.raw or "")
    result.rejected += 1
    result.rejects.append(Reject(item.file, item.line, error or "rejected"))
    store.con.execute(
        "INSERT INTO rejects VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [item.file, item.line, error, (raw or "")[:10000], now],
    )


def redact_event(ev: Event, redactor: Redactor) -> int:
    """Every field that holds what the agent said or saw, at any depth; ids, agents and sessions stay as given."""
    total = 0
    for attr in (
        "content",
        "tool_error",
        "goal_description",
        "feedback_text",
        "tool_args",
        "tool_result",
        "meta",
        "tags",
    ):
        value, n = redactor.value(getattr(ev, attr))
        setattr(ev, attr, value)
        total += n
    return total


def _fresh_rows(
    store: "Store", items: list[Item], result: IngestResult, redactor: Redactor, seen: set[str], now: dt.datetime
) -> list[dict]:
    """The batch's rows, redacted (unless a runner redacted them already) and assessed, without the ids
    seen in this ingest or stored before."""
    cfg = store.config.ingest
    rows: list[dict] = []
    shortened: set[str] = set()
    for item in items:
        ev = item.event
        assert ev is not None
        redactions = redact_event(ev, redactor) if item.redacted is None else item.redacted
        chash = ev.content_hash()
        rid = ev.id or chash
        if rid in seen:
            result.duplicates += 1
            continue
        seen.add(rid)
        # after the hash, so an event's id is what its whole output gives (as stored before there was a cut)
        if shorten_outputs(ev, cfg.max_output_chars):
            shortened.add(rid)
        a = assess(
            kind=ev.kind,
            role=ev.role,
            content=ev.content or ev.feedback_text or ev.goal_description,
            tool_error=ev.tool_error,
            outcome=ev.outcome,
            goal_long_term=ev.goal_long_term,
            has_goal=bool(ev.goal_id),
            importance=ev.importance,
            category=ev.category,
            confidence=_confidence(ev.meta),
        )
        result.redacted += 1 if redactions else 0
        rows.append(
            {
                "id": rid,
                "content_hash": chash,
                "agent": ev.agent,
                "session": ev.session,
                "user": ev.user,
                "goal_id": ev.goal_id,
                "ts": ev.ts,
                "kind": ev.kind,
                "role": ev.role,
                "content": ev.content,
                "text": render(ev)[: cfg.max_content_chars],
                "tool_name": ev.tool_name,
                "tool_args": as_text(ev.tool_args),
                "tool_result": as_text(ev.tool_result),
                "tool_error": ev.tool_error,
                "tool_call_id": ev.tool_call_id,
                "goal_status": ev.goal_status,
                "goal_description": ev.goal_description,
                "goal_long_term": ev.goal_long_term,
                "outcome": ev.outcome,
                "feedback_signal": ev.feedback_signal,
                "feedback_target": ev.feedback_target,
                "importance": a.importance,
                "category": a.category,
                "tags": json.dumps(ev.tags) if ev.tags else None,
                "meta": json.dumps(ev.meta, ensure_ascii=False, default=str) if ev.meta else None,
                "protected": a.protected,
                "redactions": redactions,
                "source_file": ev.source_file,
                "source_line": ev.source_line,
                "ingested_at": now,
                "feedback_text": ev.feedback_text,
            }
        )
    if not rows:
        return rows
    existing = _existing_ids(store, [r["id"] for r in rows])
    fresh = [r for r in rows if r["id"] not in existing]
    result.duplicates += len(rows) - len(fresh)
    result.outputs_shortened += sum(r["id"] in shortened for r in fresh)
    return fresh


def _confidence(meta: dict) -> float | None:
    value = meta.get("confidence") if isinstance(meta, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _existing_ids(store: "Store", ids: list[str]) -> set[str]:
    where, params = in_ids("id", ids)
    found = store.con.execute(f"SELECT id FROM records WHERE {where}", params).fetchall()
    return {row[0] for row in found}
