"""Agent traces made with the real OpenTelemetry SDK, following the GenAI conventions, written as OTLP JSON.

The spans go through the SDK's in-memory exporter, then its OTLP protobuf encoder, then protobuf's JSON
mapping (base64 ids, enum names), or the collector file exporter's form of it (hex ids, enum numbers).
"""

from __future__ import annotations

import json
from pathlib import Path

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.trace import Status, StatusCode, set_span_in_context

SECOND = 1_000_000_000
START = 1_772_355_600 * SECOND  # 2026-03-01T09:00:00Z


class TraceWriter:
    """One SDK tracer; `conversation` records one agent run, `write` serialises what was exported."""

    def __init__(self, service: str = "weather-bot") -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("test-agent", "1.0")
        self.clock = START
        self.stamp: dict[str, str] = {}

    def _tick(self) -> int:
        self.clock += SECOND
        return self.clock

    def conversation(
        self,
        conv: str,
        city: str,
        *,
        fail_first: bool = True,
        agent: str = "weather-bot",
        stamp_all: bool = False,
        user: str | None = None,
    ) -> None:
        """invoke_agent → chat → execute_tool (429 ERROR) → chat → execute_tool → chat, plus HTTP spans.

        Only the agent span names the conversation, unless `stamp_all` (what an application's span
        processor does, so that spans filed apart from their agent span still know their session)."""
        self.stamp = {gen_ai.GEN_AI_CONVERSATION_ID: conv, gen_ai.GEN_AI_AGENT_NAME: agent} if stamp_all else {}
        question = f"What's the weather in {city} tomorrow?"
        answer = f"Tomorrow in {city}: rain, 7°C."
        root = self.tracer.start_span(
            f"invoke_agent {agent}",
            start_time=self._tick(),
            attributes={
                gen_ai.GEN_AI_OPERATION_NAME: "invoke_agent",
                gen_ai.GEN_AI_AGENT_NAME: agent,
                gen_ai.GEN_AI_CONVERSATION_ID: conv,
                **({"user.id": user} if user else {}),
            },
        )
        ctx = set_span_in_context(root)
        history: list[dict] = [
            {"role": "system", "parts": [{"type": "text", "content": "You are a weather assistant."}]},
            {"role": "user", "parts": [{"type": "text", "content": question}]},
        ]
        calls = [(f"{conv}-call1", "429 Too Many Requests" if fail_first else None), (f"{conv}-call2", None)]
        for call_id, error in calls:
            request = {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": call_id, "name": "get_weather", "arguments": {"city": city}}],
            }
            self._chat(ctx, history, request)
            history.append(request)
            tool = self.tracer.start_span(
                "execute_tool get_weather",
                context=ctx,
                start_time=self._tick(),
                attributes={
                    gen_ai.GEN_AI_OPERATION_NAME: "execute_tool",
                    gen_ai.GEN_AI_TOOL_NAME: "get_weather",
                    gen_ai.GEN_AI_TOOL_CALL_ID: call_id,
                    gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps({"city": city}),
                    **self.stamp,
                },
            )
            http = self.tracer.start_span("GET /forecast", context=set_span_in_context(tool), start_time=self._tick())
            http.end(end_time=self._tick())
            response: object
            if error:
                tool.set_status(Status(StatusCode.ERROR, error))
                response = error
            else:
                response = {"city": city, "forecast": "rain", "celsius": 7}
                tool.set_attribute(gen_ai.GEN_AI_TOOL_CALL_RESULT, json.dumps(response))
            tool.end(end_time=self._tick())
            history.append(
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": response}]}
            )
        self._chat(
            ctx, history, {"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}
        )
        root.set_status(Status(StatusCode.OK))
        root.end(end_time=self._tick())

    def _chat(self, ctx, history: list[dict], output: dict) -> None:
        span = self.tracer.start_span(
            "chat gpt-4o",
            context=ctx,
            start_time=self._tick(),
            attributes={
                gen_ai.GEN_AI_OPERATION_NAME: "chat",
                gen_ai.GEN_AI_INPUT_MESSAGES: json.dumps(history),
                gen_ai.GEN_AI_OUTPUT_MESSAGES: json.dumps([output]),
                **self.stamp,
            },
        )
        span.end(end_time=self._tick())

    def old_style_chat(self, conv: str, question: str, answer: str) -> None:
        """A chat span as instrumentations of conventions v1.36 and older write it: per-message span events."""
        span = self.tracer.start_span(
            "chat gpt-4o",
            start_time=self._tick(),
            attributes={gen_ai.GEN_AI_OPERATION_NAME: "chat", gen_ai.GEN_AI_CONVERSATION_ID: conv},
        )
        span.add_event("gen_ai.system.message", {"gen_ai.event.content": json.dumps({"content": "Be brief."})})
        span.add_event("gen_ai.user.message", {"gen_ai.event.content": json.dumps({"content": question})})
        choice = {"index": 0, "finish_reason": "stop", "message": {"content": answer}}
        span.add_event("gen_ai.choice", {"gen_ai.event.content": json.dumps(choice)})
        span.end(end_time=self._tick())

    def spans(self) -> list:
        return list(self.exporter.get_finished_spans())

    def write(self, path: Path, *, per_line: int = 50, collector: bool = False) -> Path:
        """OTLP JSON, one export request per line of `per_line` spans (as a batch processor sends them)."""
        spans = self.spans()
        with open(path, "w", encoding="utf-8") as fh:
            for start in range(0, len(spans), per_line):
                fh.write(json.dumps(_to_json(spans[start : start + per_line], collector=collector)) + "\n")
        return path

    def write_document(self, path: Path) -> Path:
        """All spans as one pretty-printed OTLP JSON document (one per file), collector-style."""
        path.write_text(json.dumps(_to_json(self.spans(), collector=True), indent=2), encoding="utf-8")
        return path


def _to_json(spans: list, *, collector: bool) -> dict:
    request = encode_spans(spans)
    data = json_format.MessageToDict(request, use_integers_for_enums=collector)
    if collector:  # the collector's file exporter writes trace and span ids as hex, not base64
        for resource in data["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = _b64_to_hex(span[key])
    return data


def _b64_to_hex(value: str) -> str:
    import base64

    return base64.b64decode(value).hex()
