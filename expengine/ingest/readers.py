"""Read input paths (files, folders, `.gz`, stdin) into events, per-line rejects and skipped lines.

A file's format is decided from whole lines: its first lines are read in full (each up to
`max_line_bytes`) and the format that recognises most of them wins (`formats.FORMATS`). What was read to
decide is read again by the format's reader, so stdin and gzip work as files do. A bad line (cut,
over-long, nested too deep) is one reject, whatever its position: the lines after it are still read.
"""

from __future__ import annotations

import codecs
import datetime as dt
import gzip
import io
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from ..config import IngestConfig
from ..errors import InputError
from .chat_array import read_chat_array
from .discovery import read_with_another
from .events import EventError, Skipped
from .formats import NAMES, Context, Format, ObjectReader, by_name, recognise
from .items import TOO_DEEP, Item, located, nests_too_deep, parse
from .otel import is_otlp
from .remote import expand_uri, is_uri, open_uri
from .whole_files import first_element, items_of, read_text, text_format

FORMATS = NAMES
SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson", ".traj", ".aider.chat.history.md")
# lines read to decide a file's format, and the bytes they may take together
SNIFF_LINES = 20
SNIFF_BYTES = 8 << 20


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
            found = sorted(
                str(f)
                for f in path.rglob("*")
                if f.is_file() and f.name.endswith(SUFFIXES) and not read_with_another(f)
            )
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


class _Prefixed(io.RawIOBase):
    """The bytes read to sniff a file, then the rest of it: the format's reader starts at the beginning."""

    def __init__(self, prefix: bytes, rest: IO[bytes]) -> None:
        self.prefix, self.rest = memoryview(prefix), rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.prefix:
            n = min(len(buffer), len(self.prefix))
            buffer[:n], self.prefix = self.prefix[:n], self.prefix[n:]
            return n
        data = self.rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


@dataclass
class _Head:
    """A file's first lines, read in full to decide its format, and the bytes to read again."""

    lines: list[bytes]
    held: bytes
    first_too_long: bool  # the first line was over the limit: skipped, a reject, its bytes not held


def _read_head(stream: IO[bytes], limit: int) -> _Head:
    lines: list[bytes] = []
    held: list[bytes] = []
    first_too_long, total = False, 0
    while len(lines) < SNIFF_LINES and total < SNIFF_BYTES:
        line = stream.readline(limit + 1)
        if not line:
            break
        if len(line) > limit and not line.endswith(b"\n"):
            if lines or held:  # read again in full by the reader, which rejects it
                held.append(line)
                break
            first_too_long = True
            _skip_rest_of_line(stream)
            continue
        held.append(line)
        total += len(line)
        if line.strip():
            lines.append(line)
    return _Head(lines, b"".join(held), first_too_long)


def sniff(lines: list[bytes]) -> str:
    """The format that recognises most of these lines (ties: the earlier in FORMATS); native when none does."""
    votes: Counter[str] = Counter()
    order = {name: i for i, name in enumerate(NAMES)}
    for line in lines:
        try:
            name = recognise(parse(line))
        except (EventError, UnicodeDecodeError):
            continue
        if name:
            votes[name] += 1
    if not votes:
        return "native"
    return min(votes, key=lambda n: (-votes[n], order[n]))


def _is_document(head: _Head) -> bool:
    """One JSON value written over many lines (a trajectory, a report): its first line is no JSON of its own,
    and no other line is a JSON object written from the line's start (a JSONL line after a cut first one)."""
    if head.first_too_long or not head.lines or not head.lines[0].lstrip().startswith(b"{"):
        return False
    try:
        parse(head.lines[0])
        return False
    except EventError as exc:
        if str(exc) == TOO_DEEP:
            return False
    except UnicodeDecodeError:
        return False
    for line in head.lines[1:]:
        if line.startswith(b"{"):
            try:
                if isinstance(parse(line), dict):
                    return False
            except (EventError, UnicodeDecodeError):
                continue
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
    ctx = Context(label=label, agent=agent or "default", now=now)
    try:
        buffered: Any = io.BufferedReader(stream) if not hasattr(stream, "peek") else stream  # type: ignore[type-var]
        start = buffered.peek(1)[:4096]  # type: ignore[union-attr]
        if start.startswith(codecs.BOM_UTF8):  # read as utf-8-sig: the mark is not part of the first line
            buffered.read(len(codecs.BOM_UTF8))
            start = start[len(codecs.BOM_UTF8) :]
        in_text = text_format(fmt, start, label)
        if in_text is not None:
            yield from read_text(in_text, buffered, ctx)
            return
        if start.lstrip().startswith(b"[") and fmt != "openai-chat":
            held, first = first_element(buffered, max_line_bytes)
            buffered = io.BufferedReader(_Prefixed(held, buffered))
            if fmt != "auto" or recognise([first]) not in (None, "openai-chat"):
                document = by_name(fmt) if fmt != "auto" else None
                yield from _read_document(buffered, label, document, ctx, limit=max_document_bytes)
                return
        if fmt in ("auto", "otel") and (fmt == "otel" or is_otlp(start)):
            yield from _read_whole(by_name("otel"), buffered, label, agent)
            return
        if fmt in ("auto", "openai-chat") and start.lstrip().startswith(b"["):
            buffered, is_array = _array_or_lines(buffered, max_line_bytes)
            if is_array:
                yield from read_chat_array(buffered, label, max_run_bytes=max_line_bytes, agent=agent, now=now)
                return
        head = _read_head(buffered, max_line_bytes)
        rest = io.BufferedReader(_Prefixed(head.held, buffered))
        chosen = by_name(sniff(head.lines) if fmt == "auto" else fmt)
        if chosen.read_file is not None:
            yield from _read_whole(chosen, rest, label, agent)
        elif _is_document(head):
            yield from _read_document(rest, label, chosen if fmt != "auto" else None, ctx, limit=max_document_bytes)
        else:
            if head.first_too_long:
                yield Item(label, 1, error=_too_long(max_line_bytes))
            first = first_line + 1 if head.first_too_long else first_line
            yield from _read_lines(rest, chosen, ctx, max_line_bytes=max_line_bytes, first=first)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"cannot read {label}: {exc}", hint="is the file complete and not corrupt?") from exc
    finally:
        if name != "-":
            stream.close()


def _array_or_lines(stream: IO[bytes], limit: int) -> tuple[IO[bytes], bool]:
    """A file starting with `[`: one JSON array of runs, unless its second line is a JSON value of its own
    (JSONL whose first line is an array: a bad line, rejected alone). The stream, from its start again."""
    first = stream.readline(limit + 1)
    second = b"" if len(first) > limit else stream.readline(limit + 1)
    again = io.BufferedReader(_Prefixed(first + second, stream))
    if not second.startswith((b"{", b"[")):
        return again, True
    try:
        parse(second)
    except (EventError, UnicodeDecodeError):
        return again, True
    return again, False


def likely_format(name: str, max_line_bytes: int) -> str:
    """The format `--format auto` would read a file as (for a warning naming the one to pass)."""
    stream = _open_binary(name)
    try:
        buffered: Any = io.BufferedReader(stream) if not hasattr(stream, "peek") else stream  # type: ignore[type-var]
        start = buffered.peek(1)[:4096].removeprefix(codecs.BOM_UTF8)
        if is_otlp(start):
            return "otel"
        if start.lstrip().startswith(b"["):
            return "openai-chat"
        head = _read_head(buffered, max_line_bytes)
        if _is_document(head):
            return "a JSON document: swe-agent, outcomes or openai-chat"
        return sniff(head.lines)
    finally:
        stream.close()


def _too_long(limit: int) -> str:
    return f"line longer than {limit} bytes (raise ingest.max_line_bytes)"


def _read_whole(fmt: Format, stream: IO[bytes], label: str, agent: str | None) -> Iterator[Item]:
    assert fmt.read_file is not None
    yield from items_of(fmt.read_file(stream), label, agent)


def _read_lines(stream: IO[bytes], fmt: Format, ctx: Context, *, max_line_bytes: int, first: int) -> Iterator[Item]:
    """JSONL: one object per line, each read by the file's one reader (session logs name a call's result by
    id on a later line, so the reader remembers the calls)."""
    read = fmt.reader(ctx)
    for number, raw in enumerate(_bounded_lines(stream, max_line_bytes), start=first):
        if raw is None:
            yield Item(ctx.label, number, error=_too_long(max_line_bytes))
            continue
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield Item(
                ctx.label, number, error=f"invalid UTF-8 at byte {exc.start}", raw=raw.decode("utf-8", "replace")
            )
            continue
        try:
            obj = parse(text)
        except EventError as exc:
            yield Item(ctx.label, number, error=str(exc), raw=text[:10000])
            continue
        yield from _object_items(read, fmt, obj, ctx, number, raw=lambda: text)


def _object_items(
    read: ObjectReader, fmt: Format, obj: Any, ctx: Context, number: int, *, raw: Callable[[], str]
) -> Iterator[Item]:
    """The events one object holds, all or none: an object that fails half-way is one reject."""
    try:
        if fmt.name != "native" and not fmt.recognises(obj):
            raise EventError(f"not {fmt.what} (try --format {recognise(obj) or 'native'})")
        events = read(obj, number)
    except Skipped as skip:
        yield Item(ctx.label, number, skipped=skip.kind)
        return
    except RecursionError:
        yield Item(ctx.label, number, error=TOO_DEEP, raw=raw()[:2000])
        return
    except EventError as exc:
        yield Item(ctx.label, number, error=str(exc), raw=raw())
        return
    if not events:
        yield Item(ctx.label, number, skipped=f"{fmt.name} line without content")
    for ev in events:
        yield located(ev, ctx.label, number, agent_override=ctx.agent if fmt.name == "native" else None)


def _read_document(stream: IO[bytes], label: str, fmt: Format | None, ctx: Context, *, limit: int) -> Iterator[Item]:
    """A file that is one JSON value over many lines, read whole up to `limit` bytes (`fmt` None: by its shape)."""
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
    except RecursionError:
        obj = None
    if obj is None or nests_too_deep(obj, data):
        yield Item(label, 1, error=TOO_DEEP)
        return
    chosen = fmt or by_name(recognise(obj) or "native")
    yield from _object_items(
        chosen.reader(ctx), chosen, obj, ctx, 1, raw=lambda: data[:2000].decode("utf-8", "replace")
    )


def _bounded_lines(stream: IO[bytes], limit: int) -> Iterator[bytes | None]:
    """Lines as bytes; a line over `limit` yields None and is skipped without holding it in memory."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            _skip_rest_of_line(stream)
            yield None
            continue
        yield line


def _skip_rest_of_line(stream: IO[bytes]) -> None:
    while True:
        rest = stream.readline(1 << 20)
        if not rest or rest.endswith(b"\n"):
            return
