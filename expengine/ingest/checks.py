"""Warnings about one file's lines once it is read: most of them rejected, nothing stored from it, or
GenAI spans that carry no message content. `ingest --strict` fails on any of them."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .otel import NO_CONTENT
from .readers import likely_format


def file_warnings(name: str, fmt: str, tally: Counter[str], read: dict[str, Any]) -> list[str]:
    """`tally`: the file's events, rejected lines, skipped lines (and `skipped:<type>` per type)."""
    label = "<stdin>" if name == "-" else name
    out = []
    spans = tally[f"skipped:{NO_CONTENT}"]
    if spans:
        out.append(
            f"{label}: {spans} GenAI span(s) carry no messages: the instrumentation does not capture content by "
            "default; set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true where the agent runs"
        )
    lines = tally["events"] + tally["rejected"] + tally["skipped"]
    rejected, stored_nothing = tally["rejected"], lines > 0 and not tally["events"]
    if not (rejected * 2 > lines or stored_nothing) or spans:
        return out
    likely = likely_format(name, read["max_line_bytes"]) if name != "-" else None
    if fmt not in ("auto", likely) and likely:
        out.append(
            f"{label}: {rejected} of {lines} line(s) rejected, {tally['skipped']} skipped: it reads as {likely}; try --format {likely}"
        )
    elif rejected * 2 > lines:
        out.append(
            f"{label}: {rejected} of {lines} line(s) rejected: not a format expengine reads? (see `expengine rejects`; --format names them)"
        )
    elif stored_nothing and rejected:
        out.append(f"{label}: nothing stored ({rejected} rejected, {tally['skipped']} skipped)")
    return out
