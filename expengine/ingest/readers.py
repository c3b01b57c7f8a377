"""Read input paths (files, folders, `.gz`, stdin) into events or per-line rejects."""

from __future__ import annotations

import codecs
import datetime as dt
import gzip
import io
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

from ..config import IngestConfig
from ..errors import InputError
from .events import Event, EventError, event_from_native
from .openai_chat import events_from_run, is_run
from .otel import is_otlp, read_otlp
from .outcomes import events_from_outcome, is_report, outcome_of_line, outcomes_of_report
from .remote import expand_uri, is_uri, open_uri
from .sessions import ClaudeCodeReader, CodexReader, SessionReader, is_claude_code, is_codex
from .trajectories import events_from_trajectory, is_trajectory

FORMATS = ("auto", "native", "openai-chat", "otel", "swe-agent", "claude-code", "codex", "outcomes")
SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson", ".traj")


@dataclass
class Item:
    """One input line's result: an event, or a reject with the reason and raw text."""

    file: str
    line: int
    event: Event | None = None
    error: str | None = None
    raw: str | None = None
    # the event was redacted already, this many times (a fleet's prepare stage, `redact_event`); None: not yet
    redacted: int | None = None


def expand_paths(paths: list[str]) -> list[str]:
    """Folders (and object-storage prefixes) become their log files; a missing path is an error before
    anything is read."""
    out: list[str] = []
    for p in paths:
        if p == "-":
            out.append(p)
            continue
        if is_uri(p):
            out.extend(expand_uri(p, SUFFIXES))
            continue
        path = Path(p)
        if not path.exists():
            raise InputError(f"no such file or folder: {p}", hint="check the path, or use - for stdin")
        if path.is_dir():
            found = sorted(str(f) for f in path.rglob("*") if f.is_file() and f.name.endswith(SUFFIXES))
            if not found:
                raise InputError(f"no log files in folder {p}", hint=f"expected files ending in {', '.join(SUFFIXES)}")
            out.extend(found)
        else:
            out.append(str(path))
    return out


def _open_binary(name: str) -> IO[bytes]:
    if name == "-":
        return sys.stdin.buffer
    try:
        raw = open_uri(name) if is_uri(name) else open(name, "rb")
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror}", hint="check permissions") from exc
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return gzip.open(raw, "rb")  # type: ignore[return-value]
    raw.seek(0)
    return raw


def _shape(obj: Any) -> str:
    """The format one JSON object is written in, by its shape."""
    if is_trajectory(obj):
        return "swe-agent"
    if is_claude_code(obj):
        return "claude-code"
    if is_codex(obj):
        return "codex"
    if is_run(obj):
        return "openai-chat"
    if is_report(obj) or _is_outcome_line(obj):
        return "outcomes"
    return "native"


def _is_outcome_line(obj: Any) -> bool:
    """`{session, outcome}` (or `resolved`): a native line that lacks `kind` must get the native error, not this one."""
    return isinstance(obj, dict) and "kind" not in obj and "session" in obj and ("outcome" in obj or "resolved" in obj)


def _sniff(head: bytes) -> str:
    """Tell the formats apart by the first object's shape."""
    stripped = head.lstrip()
    if is_otlp(stripped):
        return "otel"
    if stripped.startswith(b"["):
        return "openai-chat"
    first = stripped.split(b"\n", 1)[0]
    try:
        return _shape(json.loads(first))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return "native"


def _is_document(head: bytes) -> bool:
    """One JSON object written over many lines (a trajectory, a report), not JSONL."""
    stripped = head.lstrip()
    if not stripped.startswith(b"{"):
        return False
    try:
        json.loads(stripped.split(b"\n", 1)[0])
        return False
    except (json.JSONDecodeError, UnicodeDecodeError):
        return True


def read_items(
    name: str,
    *,
    fmt: str,
    max_line_bytes: int,
    agent: str | None,
    now: dt.datetime,
    max_document_bytes: int = IngestConfig.max_document_bytes,
    opened: IO[bytes] | None = None,
    first_line: int = 1,
) -> Iterator[Item]:
    """`opened`: a stream to read instead of opening `name` (a range of it, for an incremental read), whose
    first line is line `first_line` of the file."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    label = "<stdin>" if name == "-" else name
    stream = opened if opened is not None else _open_binary(name)
    try:
        buffered: Any = io.BufferedReader(stream) if not hasattr(stream, "peek") else stream  # type: ignore[type-var]
        head = buffered.peek(65536)[:65536]  # type: ignore[union-attr]
        if head.startswith(codecs.BOM_UTF8):  # read as utf-8-sig: the mark is not part of the first line
            buffered.read(len(codecs.BOM_UTF8))
            head = head[len(codecs.BOM_UTF8) :]
        chosen = _sniff(head) if fmt == "auto" else fmt
        if chosen == "otel":
            for number, event, error, raw in read_otlp(buffered):
                yield (
                    _located(event, label, number, agent_override=agent)
                    if event
                    else Item(label, number, error=error, raw=raw)
                )
        elif chosen == "openai-chat" and head.lstrip().startswith(b"["):
            yield from _read_chat_array(buffered, label, max_run_bytes=max_line_bytes, agent=agent, now=now)
        elif _is_document(head):
            yield from _read_document(buffered, label, fmt, limit=max_document_bytes, agent=agent, now=now)
        else:
            yield from _read_lines(
                buffered, label, chosen, max_line_bytes=max_line_bytes, agent=agent, now=now, first=first_line
            )
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"cannot read {label}: {exc}", hint="is the file complete and not corrupt?") from exc
    finally:
        if name != "-":
            stream.close()


def _read_lines(
    stream: IO[bytes],
    label: str,
    fmt: str,
    *,
    max_line_bytes: int,
    agent: str | None,
    now: dt.datetime,
    first: int = 1,
) -> Iterator[Item]:
    # session logs name a call's result by id on a later line: one reader per file remembers the calls
    sessions = {
        "claude-code": ClaudeCodeReader(agent=agent or "default"),
        "codex": CodexReader(agent=agent or "default"),
    }
    for number, raw in enumerate(_bounded_lines(stream, max_line_bytes), start=first):
        if raw is None:
            yield Item(label, number, error=f"line longer than {max_line_bytes} bytes (raise ingest.max_line_bytes)")
            continue
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield Item(label, number, error=f"invalid UTF-8 at byte {exc.start}", raw=raw.decode("utf-8", "replace"))
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            yield Item(label, number, error=f"malformed JSON: {exc.msg} at column {exc.colno}", raw=text)
            continue
        try:
            yield from _items_of(obj, fmt, label, number, agent=agent, now=now, sessions=sessions)
        except EventError as exc:
            yield Item(label, number, error=str(exc), raw=text)


def _items_of(
    obj: Any,
    fmt: str,
    label: str,
    number: int,
    *,
    agent: str | None,
    now: dt.datetime,
    sessions: dict[str, SessionReader] | None = None,
) -> Iterator[Item]:
    """The events one JSON object holds, read as `fmt` (`auto`: by its shape). All or none: an
    object that fails half-way yields nothing and raises, so it is quarantined whole."""
    fmt = _shape(obj) if fmt == "auto" else fmt
    if fmt in ("claude-code", "codex"):
        if not (is_claude_code(obj) if fmt == "claude-code" else is_codex(obj)) or sessions is None:
            raise EventError(f"not a {fmt} session line (read those logs one line per object, as the tool writes them)")
        events = sessions[fmt].events(obj)
    elif fmt == "native":
        yield _located(event_from_native(obj), label, number, agent_override=agent)
        return
    elif fmt == "openai-chat":
        events = list(events_from_run(obj, number, agent=agent or "default", base_ts=now))
    elif fmt == "swe-agent":
        if not is_trajectory(obj):
            raise EventError(
                "not a mini-swe-agent or SWE-agent trajectory (no `messages` with `trajectory_format`, no `trajectory`)"
            )
        run_name = Path(label).name.split(".")[0]
        events = list(events_from_trajectory(obj, run_name, agent=agent or "default", base_ts=now))
    else:
        pairs = outcomes_of_report(obj) if is_report(obj) else [outcome_of_line(obj)]
        events = [ev for s, o in pairs for ev in events_from_outcome(s, o, agent=agent or "default", ts=now)]
    for ev in events:
        yield _located(ev, label, number, agent_override=None)


def _read_document(
    stream: IO[bytes], label: str, fmt: str, *, limit: int, agent: str | None, now: dt.datetime
) -> Iterator[Item]:
    """A file that is one JSON object over many lines, read whole up to `limit` bytes."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        yield Item(label, 1, error=f"a JSON document longer than {limit} bytes (raise ingest.max_document_bytes)")
        return
    try:
        obj = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        yield Item(label, 1, error=f"invalid UTF-8 at byte {exc.start}")
        return
    except json.JSONDecodeError as exc:
        yield Item(label, exc.lineno, error=f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
        return
    try:
        yield from _items_of(obj, fmt, label, 1, agent=agent, now=now)
    except EventError as exc:
        yield Item(label, 1, error=str(exc), raw=data[:2000].decode("utf-8", "replace"))


def _read_chat_array(
    stream: IO[bytes], label: str, *, max_run_bytes: int, agent: str | None, now: dt.datetime
) -> Iterator[Item]:
    """A JSON array of runs, read one run at a time: a run is held only up to `max_run_bytes` (the line
    limit, as for a run on one JSONL line), so a huge array, or one of whitespace, stays in bounded memory."""
    for index, run in enumerate(_array_items(stream, max_run_bytes, label)):
        if isinstance(run, Item):
            yield run
            return
        try:
            if not is_run(run):
                raise EventError(f"run {index} has no `traj` or `messages` list")
            events = list(
                events_from_run(run, index, agent=agent or "default", base_ts=now + dt.timedelta(seconds=index))
            )
        except EventError as exc:
            yield Item(label, index + 1, error=str(exc), raw=json.dumps(run)[:2000])
            continue
        for ev in events:
            yield _located(ev, label, index + 1, agent_override=None)


CHUNK_BYTES = 1 << 20
_SPACE = re.compile(r"[ \t\n\r]*")


def _array_items(stream: IO[bytes], limit: int, label: str) -> Iterator[Any]:
    """The elements of a top-level JSON array, decoded one at a time from `stream`. An element, and the
    whitespace before it, may each take at most `limit` bytes; past that, or on malformed JSON, the last
    thing yielded is an Item with the error (a whitespace bomb is refused after `limit` bytes, not read whole)."""
    decoder, utf8 = json.JSONDecoder(), codecs.getincrementaldecoder("utf-8")()
    buffer, pos, eof = "", 0, False

    def read_more(size: int) -> None:
        nonlocal buffer, pos, eof
        chunk = stream.read(size)
        eof = not chunk
        buffer, pos = buffer[pos:] + utf8.decode(chunk, final=eof), 0

    def skip_space() -> bool:
        """Move past whitespace, reading on; False after more than `limit` of it."""
        nonlocal pos
        skipped = 0
        while True:
            end = _SPACE.match(buffer, pos).end()  # type: ignore[union-attr]
            skipped, pos = skipped + end - pos, end
            if skipped > limit:
                return False
            if pos < len(buffer) or eof:
                return True
            read_more(CHUNK_BYTES)

    def error(message: str) -> Item:
        return Item(label, count + 1, error=message)

    too_long = f"longer than {limit} bytes (raise ingest.max_line_bytes)"
    count = 0
    try:
        if not skip_space() or buffer[pos : pos + 1] != "[":
            yield error("an openai-chat file must be a JSON array of runs or JSONL of runs")
            return
        pos += 1
        while True:
            if not skip_space():
                yield error(f"whitespace in the array is {too_long}")
                return
            if pos >= len(buffer):
                yield error("malformed JSON: the array is not closed with ]")
                return
            if buffer[pos] == "]":
                return
            if count:
                if buffer[pos] != ",":
                    yield error(f"malformed JSON: expected , or ] after run {count - 1}")
                    return
                pos += 1
                if not skip_space():
                    yield error(f"whitespace in the array is {too_long}")
                    return
            while True:
                try:
                    element, end = decoder.raw_decode(buffer, pos)
                    break
                except json.JSONDecodeError:
                    if len(buffer) - pos > limit:
                        yield error(f"run {count} is {too_long}")
                        return
                    if eof:
                        raise
                    read_more(max(CHUNK_BYTES, len(buffer) - pos))  # doubling: a long run is parsed a few times
            if end - pos > limit:
                yield error(f"run {count} is {too_long}")
                return
            pos, count = end, count + 1
            yield element
    except UnicodeDecodeError as exc:
        yield error(f"invalid UTF-8 in run {count} ({exc.reason})")
    except json.JSONDecodeError as exc:
        yield error(f"malformed JSON in run {count}: {exc.msg}")


def _located(ev: Event, label: str, number: int, *, agent_override: str | None) -> Item:
    ev.source_file, ev.source_line = label, number
    if agent_override and ev.agent == "default":
        ev.agent = agent_override
    return Item(label, number, event=ev)


def _bounded_lines(stream: IO[bytes], limit: int) -> Iterator[bytes | None]:
    """Lines as bytes; a line over `limit` yields None and is skipped without holding it in memory."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while True:
                rest = stream.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            yield None
            continue
        yield line
