"""Read input paths (files, folders, `.gz`, stdin) into events or per-line rejects."""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

from ..errors import InputError
from .events import Event, EventError, event_from_native
from .openai_chat import events_from_run, is_run
from .otel import is_otlp, read_otlp

FORMATS = ("auto", "native", "openai-chat", "otel")
SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson")


@dataclass
class Item:
    """One input line's result: an event, or a reject with the reason and raw text."""

    file: str
    line: int
    event: Event | None = None
    error: str | None = None
    raw: str | None = None


def expand_paths(paths: list[str]) -> list[str]:
    """Folders become their log files; a missing path is an error before anything is read."""
    out: list[str] = []
    for p in paths:
        if p == "-":
            out.append(p)
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
        raw = open(name, "rb")
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror}", hint="check permissions") from exc
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return gzip.open(raw, "rb")  # type: ignore[return-value]
    raw.seek(0)
    return raw


def _sniff(head: bytes) -> str:
    """Tell native JSONL from OpenAI-chat runs by the first object's shape."""
    stripped = head.lstrip()
    if is_otlp(stripped):
        return "otel"
    if stripped.startswith(b"["):
        return "openai-chat"
    first = stripped.split(b"\n", 1)[0]
    try:
        return "openai-chat" if is_run(json.loads(first)) else "native"
    except (json.JSONDecodeError, UnicodeDecodeError):
        return "native"


def read_items(name: str, *, fmt: str, max_line_bytes: int, agent: str | None, now: dt.datetime) -> Iterator[Item]:
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    label = "<stdin>" if name == "-" else name
    stream = _open_binary(name)
    try:
        buffered: Any = io.BufferedReader(stream) if not hasattr(stream, "peek") else stream  # type: ignore[type-var]
        head = buffered.peek(65536)[:65536]  # type: ignore[union-attr]
        chosen = _sniff(head) if fmt == "auto" else fmt
        if chosen == "otel":
            for number, event, error, raw in read_otlp(buffered):
                yield (
                    _located(event, label, number, agent_override=agent)
                    if event
                    else Item(label, number, error=error, raw=raw)
                )
        elif chosen == "openai-chat" and head.lstrip().startswith(b"["):
            yield from _read_chat_array(buffered, label, agent=agent, now=now)
        else:
            yield from _read_lines(buffered, label, chosen, max_line_bytes=max_line_bytes, agent=agent, now=now)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"cannot read {label}: {exc}", hint="is the file complete and not corrupt?") from exc
    finally:
        if name != "-":
            stream.close()


def _read_lines(
    stream: IO[bytes], label: str, fmt: str, *, max_line_bytes: int, agent: str | None, now: dt.datetime
) -> Iterator[Item]:
    for number, raw in enumerate(_bounded_lines(stream, max_line_bytes), start=1):
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
            if fmt == "openai-chat":
                for ev in events_from_run(obj, number, agent=agent or "default", base_ts=now):
                    yield _located(ev, label, number, agent_override=None)
            else:
                yield _located(event_from_native(obj), label, number, agent_override=agent)
        except EventError as exc:
            yield Item(label, number, error=str(exc), raw=text)


def _read_chat_array(stream: IO[bytes], label: str, *, agent: str | None, now: dt.datetime) -> Iterator[Item]:
    data = stream.read()
    try:
        runs = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        yield Item(label, 1, error=f"invalid UTF-8 at byte {exc.start}")
        return
    except json.JSONDecodeError as exc:
        yield Item(label, exc.lineno, error=f"malformed JSON: {exc.msg} at column {exc.colno}")
        return
    if not isinstance(runs, list):
        yield Item(label, 1, error="an openai-chat file must be a JSON array of runs or JSONL of runs")
        return
    for index, run in enumerate(runs):
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
