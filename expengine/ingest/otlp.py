"""OTLP JSON decoding: the documents of a file (one per line, or one per file), their spans, and the
attribute values and ids in both of the forms exporters write (base64 or hex ids, typed AnyValues).
otel.py maps the decoded spans to events."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from .events import EventError


@dataclass
class Span:
    line: int
    trace: str
    id: str
    parent: str
    name: str
    start: dt.datetime
    end: dt.datetime
    attrs: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    error: str | None  # the status message (or error.type) when the status is ERROR
    status_ok: bool
    children: list["Span"] = field(default_factory=list)

    @property
    def operation(self) -> str:
        op = self.attrs.get("gen_ai.operation.name")
        return str(op) if op else self.name.split(" ", 1)[0]


def documents(text: str) -> Iterator[tuple[int, str]]:
    """One pretty-printed document per file, or one compact document per line."""
    stripped = text.strip()
    if "\n" in stripped:
        try:
            json.loads(stripped)
        except json.JSONDecodeError:
            pass
        else:
            yield 1, stripped
            return
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield number, line


def spans_of(doc: Any, line: int) -> Iterator[Span]:
    resources = doc.get("resourceSpans", doc.get("resource_spans")) if isinstance(doc, dict) else None
    if not isinstance(resources, list):
        raise EventError("an OTLP JSON line must be an object with a `resourceSpans` list")
    for resource in resources:
        for scope in (resource or {}).get("scopeSpans", (resource or {}).get("scope_spans")) or []:
            for span in (scope or {}).get("spans") or []:
                if not isinstance(span, dict):
                    raise EventError("every span must be an object")
                yield span_of(span, line)


def span_of(span: dict[str, Any], line: int) -> Span:
    name = str(span.get("name") or "")
    status = span.get("status") or {}
    code = status.get("code")
    attrs = attributes_of(span.get("attributes"))
    events = [(str(e.get("name") or ""), attributes_of(e.get("attributes"))) for e in span.get("events") or []]
    error = None
    if code in (2, "STATUS_CODE_ERROR"):
        thrown = next((a.get("exception.message") for n, a in events if n == "exception"), None)
        error = str(status.get("message") or thrown or attrs.get("error.type") or "error")
    try:
        start = nanos(span.get("startTimeUnixNano", span.get("start_time_unix_nano")))
        end = nanos(span.get("endTimeUnixNano", span.get("end_time_unix_nano")), default=start)
    except (TypeError, ValueError, OverflowError) as exc:
        raise EventError(f"span {name!r}: `startTimeUnixNano` must be nanoseconds since 1970") from exc
    return Span(
        line=line,
        trace=hex_id(span.get("traceId", span.get("trace_id"))),
        id=hex_id(span.get("spanId", span.get("span_id"))),
        parent=hex_id(span.get("parentSpanId", span.get("parent_span_id"))),
        name=name,
        start=start,
        end=end,
        attrs=attrs,
        events=events,
        error=error,
        status_ok=code in (1, "STATUS_CODE_OK"),
    )


def nanos(value: Any, default: dt.datetime | None = None) -> dt.datetime:
    if value in (None, "", 0, "0") and default is not None:
        return default
    stamp = dt.datetime.fromtimestamp(int(value) / 1e9, tz=dt.timezone.utc)
    return stamp.replace(tzinfo=None)


def hex_id(value: Any) -> str:
    """The collector writes ids as hex, protobuf's JSON mapping as base64: both become hex."""
    text = str(value or "")
    if not text or re.fullmatch(r"[0-9a-fA-F]{16}|[0-9a-fA-F]{32}", text):
        return text.lower()
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        return text


def attributes_of(items: Any) -> dict[str, Any]:
    if not isinstance(items, list):
        return {}
    return {str(kv.get("key")): any_value(kv.get("value")) for kv in items if isinstance(kv, dict)}


def any_value(value: Any) -> Any:
    """OTLP AnyValue → Python; JSON-encoded strings (how SDKs record structured values) stay strings."""
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "string_value", "boolValue", "bool_value", "doubleValue", "double_value"):
        if key in value:
            return value[key]
    for key in ("intValue", "int_value"):
        if key in value:
            return int(value[key])
    for key in ("arrayValue", "array_value"):
        if key in value:
            return [any_value(v) for v in (value[key] or {}).get("values") or []]
    for key in ("kvlistValue", "kvlist_value"):
        if key in value:
            return attributes_of((value[key] or {}).get("values"))
    return None


def structured(value: Any) -> Any:
    """A structured attribute, recorded as a JSON string or as an OTLP array/kvlist."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def digest(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
