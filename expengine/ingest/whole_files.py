"""Files that are not JSONL, told apart before reading: a Markdown chat log (Aider's history, a Gemini
CLI `/chat share` export) is read whole by its text format; a JSON array is a document of the format
that recognises its first element (a Cline task's messages, an OpenHands trajectory, Gemini CLI's
prompt log), or a chat-run array. A file that is none of these is an error naming the formats.
"""

from __future__ import annotations

import json
from typing import IO, Any, Iterable, Iterator

from ..errors import InputError
from .formats import NAMES, Context, Format, by_name, recognise_text
from .items import Item, located
from .otel import Read


def text_format(fmt: str, start: bytes, label: str) -> Format | None:
    """The text format a file is in (a Markdown chat log), None for JSON lines (a bad first line among
    them included); a file that is neither is an error."""
    if fmt != "auto":
        chosen = by_name(fmt)
        return chosen if chosen.read_text is not None else None
    stripped = start.lstrip()
    if not stripped or stripped[:1] in (b"{", b"["):
        return None
    found = recognise_text(start.decode("utf-8", "replace"))
    if found is None and any(line.lstrip()[:1] in (b"{", b"[") for line in start.splitlines()):
        return None  # JSON lines after a bad first one: that line is rejected, the others are read
    if found is None:
        raise InputError(
            f"{label} is in no log format expengine reads",
            hint=f"the formats are {', '.join(NAMES[1:])}; name one with --format",
        )
    return found


def read_text(fmt: Format, stream: IO[bytes], ctx: Context) -> Iterator[Item]:
    assert fmt.read_text is not None
    yield from items_of(fmt.read_text(stream, ctx), ctx.label)


def items_of(reads: Iterable[Read], label: str, agent: str | None = None) -> Iterator[Item]:
    """A reader's (line, event, error, raw or skip type) as items of the file `label` (`agent`: for events
    that name none)."""
    for number, event, error, raw in reads:
        if event is not None:
            yield located(event, label, number, agent_override=agent)
        elif error is not None:
            yield Item(label, number, error=error, raw=raw)
        else:
            yield Item(label, number, skipped=raw)


def first_element(stream: IO[bytes], limit: int) -> tuple[bytes, Any]:
    """The first element of a JSON array (None when it is not one, or longer than `limit`), and the bytes
    read to find it (to be read again): a list of one tool's records is a document of that tool's format."""
    decoder, held, element = json.JSONDecoder(), b"", None
    while len(held) <= limit:
        chunk = stream.read(1 << 16)
        held += chunk
        text = held.decode("utf-8", "ignore").lstrip()
        body = text[1:].lstrip()
        try:
            element = decoder.raw_decode(body)[0] if body else None
            break
        except RecursionError:
            break  # nested too deep: the readers that follow reject it
        except json.JSONDecodeError:
            if not chunk:
                break
    return held, element
