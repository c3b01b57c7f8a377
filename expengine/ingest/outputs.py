"""What is kept of a long tool output: its head, its tail, and the error lines between them.

A coding agent's tool results are most of its log's bytes (a test run, a build, a file dump), and the
store held each in full next to its text: a 176 MB agent home made DuckDB rewrite ~200 MB of strings at
each checkpoint, and a cron ingest peaked at 520 MB (`bench/sources.py`). An output longer than
`ingest.max_output_chars` keeps its first and last lines (where a command's start and its summary are)
and, from the middle, every line that reads as an error, up to that length; one marker line says what
was left out. The raw line stays in the source file the record names (`source_file`, `source_line`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .events import as_text

if TYPE_CHECKING:
    from .events import Event

# the kinds whose fields hold a tool's output
OUTPUT_KINDS = ("tool_result", "observation")
# lines kept from a long output's middle: a traceback's head and its exception, a failed test, a compiler's
# or a shell's error, a panic (the shapes the readers' failure checks look for)
ERROR_LINE = re.compile(
    r"Traceback \(most recent call last\)|^\s*(FAILED|ERROR|FAIL)\b|\b\d+ (failed|errors?)\b|"
    r"(?-i:[A-Za-z](Error|Exception)\b)|\berror(\[\w+\])?:|\bcommand not found\b|\bpanic(ked)?\b|\bfatal\b",
    re.IGNORECASE,
)
HEAD_SHARE = 0.4  # of the limit, for the head; as much for the tail; the rest for the middle's error lines
MAX_KEPT_LINE = 400  # characters of one error line from the middle


def kept_output(text: str, limit: int) -> str:
    """`text` when it fits in `limit` characters; else its head and tail (whole lines where there are
    lines) with the error lines between them, and a marker line saying how much was left out."""
    if len(text) <= limit:
        return text
    edge = int(limit * HEAD_SHARE)
    head = _whole_lines(text[:edge], keep_start=True)
    tail = _whole_lines(text[len(text) - edge :], keep_start=False)
    middle = text[len(head) : len(text) - len(tail)]
    budget = limit - len(head) - len(tail) - 120
    errors: list[str] = []
    for line in middle.splitlines():
        if ERROR_LINE.search(line):
            line = line.strip()[:MAX_KEPT_LINE]
            if budget - len(line) - 1 < 0:
                break
            errors.append(line)
            budget -= len(line) + 1
    left = middle.count("\n") + 1 - len(errors)
    said = f"error lines among them kept below: {len(errors)}" if errors else "no error lines among them"
    marker = f"[… {left:,} lines, {len(middle) - sum(map(len, errors)):,} characters left out; {said} …]"
    return "\n".join([head.rstrip("\n"), marker, *errors, tail.lstrip("\n")])


def _whole_lines(piece: str, *, keep_start: bool) -> str:
    """A head (`keep_start`) or tail cut back to whole lines, when the piece holds a line break at all."""
    if keep_start:
        cut = piece.rfind("\n")
        return piece[: cut + 1] if cut > 0 else piece
    cut = piece.find("\n")
    return piece[cut:] if 0 <= cut < len(piece) - 1 else piece


def shorten_outputs(ev: "Event", limit: int) -> bool:
    """Keep `kept_output` of a tool output event's result, error and content (in place). Whether any was cut."""
    if ev.kind not in OUTPUT_KINDS:
        return False
    cut = False
    for attr in ("tool_result", "tool_error", "content"):
        value = getattr(ev, attr)
        text = as_text(value) if value is not None else None
        if text is not None and len(text) > limit:
            setattr(ev, attr, kept_output(text, limit))
            cut = True
    return cut
