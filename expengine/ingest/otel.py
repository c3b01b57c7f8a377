"""OpenTelemetry GenAI traces (OTLP JSON, as the collector's file exporter writes it) turned into events.

Spans are mapped by `gen_ai.operation.name` (semantic conventions, docs/gen-ai/): `invoke_agent` opens
a goal (closed as succeeded or failed when the span's status says so), `chat` spans give messages from
`gen_ai.input.messages` / `gen_ai.output.messages` or the older `gen_ai.*.message` / `gen_ai.choice`
span events, and `execute_tool` gives a `tool_call` and its `tool_result` (status ERROR is the error).
`gen_ai.conversation.id` is the session (else the trace id), inherited down the span tree.

Every chat call repeats the conversation so far, so a message's id is derived from its session, its
content and how often the same content came before it in the history: the same message seen in ten
chat spans, or in two files, is stored once. Spans without a GenAI operation (HTTP, database) are
skipped. A file is read whole: a trace's spans arrive in several export batches, children first.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from typing import IO, Any, Iterator

from .events import Event, EventError, as_text
from .otlp import Span, digest, documents, spans_of, structured

OPERATIONS = ("invoke_agent", "chat", "text_completion", "generate_content", "execute_tool")
_CHAT = ("chat", "text_completion", "generate_content")
# the skip type of a model call whose messages were not captured (the instrumentations' default)
NO_CONTENT = "gen_ai span without message content"
_OTLP_HEAD = re.compile(rb'\s*\{\s*"resource_?[sS]pans"')
# The older per-message span events and the role each one speaks in.
_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def is_otlp(head: bytes) -> bool:
    """An OTLP JSON traces document starts with its `resourceSpans` key."""
    return bool(_OTLP_HEAD.match(head))


def is_otlp_object(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("resourceSpans", obj.get("resource_spans")), list)


Read = tuple[int, Event | None, str | None, str | None]  # line, event, or error and raw text (or the skip type)


def read_otlp(stream: IO[bytes]) -> Iterator[Read]:
    """Events of one OTLP JSON file (one document per line, or one per file), in time order."""
    data = stream.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        yield 1, None, f"invalid UTF-8 at byte {exc.start}", None
        return
    spans: list[Span] = []
    for line, raw in documents(text):
        try:
            doc = json.loads(raw)
            spans.extend(spans_of(doc, line))
        except json.JSONDecodeError as exc:
            yield line, None, f"malformed JSON: {exc.msg} at column {exc.colno}", raw[:2000]
        except EventError as exc:
            yield line, None, str(exc), raw[:2000]
    yield from _Mapper(spans).events()


class _Mapper:
    """Walks one file's span trees and emits each message, call and result once."""

    def __init__(self, spans: list[Span]) -> None:
        self.spans = sorted(spans, key=lambda s: (s.start, s.end))
        by_id = {(s.trace, s.id): s for s in self.spans}
        self.parent = {id(s): by_id.get((s.trace, s.parent)) for s in self.spans}
        for s in self.spans:
            up = self.parent[id(s)]
            if up is not None:
                up.children.append(s)
        # A tool call that has its own execute_tool span is recorded from it, not from the chat messages.
        self.tool_spans = {
            str(s.attrs["gen_ai.tool.call.id"])
            for s in self.spans
            if s.operation == "execute_tool" and s.attrs.get("gen_ai.tool.call.id")
        }
        self.emitted: set[str] = set()
        self.call_names: dict[str, str] = {}  # call id → tool name, for results that name none

    def _inherited(self, span: Span, key: str) -> Any:
        node: Span | None = span
        while node is not None:
            if node.attrs.get(key) not in (None, ""):
                return node.attrs[key]
            node = self.parent[id(node)]
        return None

    def _agent_span(self, span: Span) -> Span | None:
        node = self.parent[id(span)] if span.operation == "invoke_agent" else span
        while node is not None and node.operation != "invoke_agent":
            node = self.parent[id(node)]
        return span if span.operation == "invoke_agent" else node

    def events(self) -> Iterator[Read]:
        out: list[tuple[dt.datetime, int, Read]] = []
        for order, span in enumerate(self.spans):
            if span.operation not in OPERATIONS:
                continue
            events = list(self._from_span(span))
            if span.operation in _CHAT and not any(ev.kind == "message" for ev in events):
                out.append((span.start, order, (span.line, None, None, NO_CONTENT)))
            for ev in events:
                if ev.id in self.emitted:
                    continue
                self.emitted.add(str(ev.id))
                ev.meta.setdefault("otel", {"trace": span.trace, "span": span.id})
                out.append((ev.ts, order, (span.line, ev, None, None)))
        for _, _, read in sorted(out, key=lambda item: (item[0], item[1])):
            yield read

    def _base(self, span: Span, kind: str, ts: dt.datetime, rid: str, **fields: Any) -> Event:
        agent_span = self._agent_span(span)
        ev = Event(
            ts=ts,
            kind=kind,
            id=rid,
            agent=str(self._inherited(span, "gen_ai.agent.name") or "default"),
            session=self._session(span),
            goal_id=self._goal_id(agent_span) if agent_span else None,
        )
        for key, value in fields.items():
            setattr(ev, key, value)
        return ev

    def _goal_id(self, span: Span) -> str:
        return f"{self._session(span)}/agent/{span.id}"

    def _session(self, span: Span) -> str:
        return str(self._inherited(span, "gen_ai.conversation.id") or span.trace)

    def _from_span(self, span: Span) -> Iterator[Event]:
        if span.operation == "invoke_agent":
            yield from self._agent(span)
        elif span.operation == "execute_tool":
            yield from self._tool(span)
        else:
            yield from self._chat(span)

    def _agent(self, span: Span) -> Iterator[Event]:
        goal = self._goal_id(span)
        name = span.attrs.get("gen_ai.agent.name")
        description = self._first_user_text(span) or span.attrs.get("gen_ai.agent.description") or span.name
        yield self._base(
            span, "goal", span.start, f"{goal}/start", goal_status="open", goal_description=str(description)
        )
        yield from self._chat(span)  # an agent span may carry the conversation itself
        if span.error is not None or span.status_ok:
            status, outcome = ("failed", "failure") if span.error is not None else ("succeeded", "success")
            ended = f"agent {name or span.name} {'failed: ' + span.error if span.error else 'succeeded'}"
            yield self._base(span, "goal", span.end, f"{goal}/end", goal_status=status, content=ended)
            yield self._base(span, "outcome", span.end, f"{goal}/outcome", outcome=outcome, content=ended)

    def _first_user_text(self, span: Span) -> str | None:
        pending = [span]
        while pending:
            node = pending.pop(0)
            for message in self._inputs(node):
                if message.get("role") == "user":
                    text = _text(message)
                    if text:
                        return text
            pending.extend(sorted(node.children, key=lambda s: s.start))
        return None

    def _tool(self, span: Span) -> Iterator[Event]:
        name = str(span.attrs.get("gen_ai.tool.name") or span.name.removeprefix("execute_tool ").strip() or "tool")
        call_id = span.attrs.get("gen_ai.tool.call.id")
        key = f"{self._session(span)}/tool/{call_id or span.id}"
        args = structured(span.attrs.get("gen_ai.tool.call.arguments"))
        call = self._base(
            span, "tool_call", span.start, f"{key}/call", role="assistant", tool_name=name, tool_args=args
        )
        call.tool_call_id = str(call_id) if call_id else None
        yield call
        result = structured(span.attrs.get("gen_ai.tool.call.result"))
        yield self._base(
            span,
            "tool_result",
            span.end,
            f"{key}/result",
            role="tool",
            tool_name=name,
            tool_call_id=call.tool_call_id,
            tool_result=None if span.error is not None else result,
            tool_error=span.error,
            meta={"call_record": call.id},
        )

    def _inputs(self, span: Span) -> list[dict[str, Any]]:
        messages = structured(span.attrs.get("gen_ai.input.messages"))
        if isinstance(messages, list):
            return [m for m in messages if isinstance(m, dict)]
        return [m for name, attrs in span.events if name in _EVENT_ROLES for m in [_event_message(name, attrs)]]

    def _outputs(self, span: Span) -> list[dict[str, Any]]:
        messages = structured(span.attrs.get("gen_ai.output.messages"))
        if isinstance(messages, list):
            return [m for m in messages if isinstance(m, dict)]
        return [_choice_message(attrs) for name, attrs in span.events if name == "gen_ai.choice"]

    def _chat(self, span: Span) -> Iterator[Event]:
        """Inputs at the span's start, outputs at its end; ids count repeats along the history. A call that
        failed (status ERROR: a rate limit, a refused request) keeps its error."""
        session = self._session(span)
        if span.error is not None and span.operation in _CHAT:
            model = span.attrs.get("gen_ai.request.model") or span.name
            yield self._base(
                span,
                "observation",
                span.end,
                f"{session}/error/{span.id}",
                content=f"{span.operation} {model} failed: {span.error}",
                tool_error=span.error,
            )
        seen: Counter[str] = Counter()
        for messages, ts in ((self._inputs(span), span.start), (self._outputs(span), span.end)):
            for message in messages:
                role = str(message.get("role") or "assistant")
                if role == "system":
                    continue  # instructions repeat in every call: not experience
                text = _text(message)
                if text:
                    key = digest(role, text)
                    rid = f"{session}/msg/{digest(key, seen[key])}"
                    seen[key] += 1
                    yield self._base(
                        span, "message", ts, rid, role=role if role in ("user", "assistant") else "tool", content=text
                    )
                yield from self._parts(span, message, ts, session)

    def _parts(self, span: Span, message: dict[str, Any], ts: dt.datetime, session: str) -> Iterator[Event]:
        for part in message.get("parts") or []:
            if not isinstance(part, dict):
                continue
            call_id = str(part.get("id") or "").strip() or None
            if call_id in self.tool_spans:
                continue
            kind = part.get("type")
            if kind == "tool_call":
                key = f"{session}/tool/{call_id or digest(part.get('name'), part.get('arguments'))}"
                ev = self._base(
                    span,
                    "tool_call",
                    ts,
                    f"{key}/call",
                    role="assistant",
                    tool_name=str(part.get("name") or "tool"),
                    tool_args=structured(part.get("arguments")),
                )
                ev.tool_call_id = call_id
                if call_id:
                    self.call_names[call_id] = str(ev.tool_name)
                yield ev
            elif kind == "tool_call_response":
                response = part.get("response", part.get("result"))
                key = f"{session}/tool/{call_id or digest(response)}"
                yield self._base(
                    span,
                    "tool_result",
                    ts,
                    f"{key}/result",
                    role="tool",
                    tool_call_id=call_id,
                    tool_name=self.call_names.get(call_id or "", "tool"),
                    tool_result=structured(response),
                    meta={"call_record": f"{key}/call"},
                )


def _text(message: dict[str, Any]) -> str:
    """The text parts of a message (reasoning, blobs and files are not what the agent said)."""
    texts = [
        str(p.get("content"))
        for p in message.get("parts") or []
        if isinstance(p, dict) and p.get("type") == "text" and p.get("content")
    ]
    return "\n".join(texts).strip()


def _event_body(attrs: dict[str, Any]) -> dict[str, Any]:
    """An old-style event's body: `gen_ai.event.content` JSON, or the attributes themselves."""
    body = structured(attrs.get("gen_ai.event.content"))
    if isinstance(body, dict):
        return body
    return {k: structured(v) if k in ("message", "tool_calls") else v for k, v in attrs.items()}


def _old_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    content = body.get("content")
    if content:
        parts.append({"type": "text", "content": content if isinstance(content, str) else as_text(content)})
    for call in body.get("tool_calls") or []:
        function = (call or {}).get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    return parts


def _event_message(name: str, attrs: dict[str, Any]) -> dict[str, Any]:
    body = _event_body(attrs)
    role = _EVENT_ROLES[name]
    if role == "tool":
        return {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": body.get("id"), "response": body.get("content")}],
        }
    return {"role": role, "parts": _old_parts(body)}


def _choice_message(attrs: dict[str, Any]) -> dict[str, Any]:
    message = _event_body(attrs).get("message")
    return {"role": "assistant", "parts": _old_parts(message if isinstance(message, dict) else {})}
