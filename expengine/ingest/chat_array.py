"""An openai-chat file that is one JSON array of runs, decoded one run at a time: a run is held only up
to the line limit (as for a run on one JSONL line), so a huge array, or one of whitespace, stays in
bounded memory."""

from __future__ import annotations

import codecs
import datetime as dt
import json
import re
from typing import IO, Any, Iterator

from .events import EventError
from .items import TOO_DEEP, Item, located
from .openai_chat import events_from_run, is_run


def read_chat_array(
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
            yield located(ev, label, index + 1, agent_override=None)


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
    except RecursionError:
        yield error(f"run {count}: {TOO_DEEP}")
    except json.JSONDecodeError as exc:
        yield error(f"malformed JSON in run {count}: {exc.msg}")
