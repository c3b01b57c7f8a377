"""OpenTelemetry GenAI traces in: spans made by the real SDK, written as OTLP JSON, ingested."""

from __future__ import annotations

import json

import pytest
from otel_traces import TraceWriter

from expengine.errors import InputError


def _records(engine, sql: str, params=()):
    return engine.store.con.execute(sql, list(params)).fetchall()


def test_agent_trace_becomes_goal_messages_tool_calls_and_results(make_engine, tmp_path):
    writer = TraceWriter()
    writer.conversation("conv-oslo", "Oslo")
    path = writer.write(tmp_path / "traces.jsonl", per_line=3)  # a trace split over several export batches
    engine = make_engine()
    result = engine.ingest([str(path)])  # --format auto detects OTLP JSON
    assert result.rejected == 0 and result.duplicates == 0
    rows = _records(
        engine,
        "SELECT kind, role, content, tool_name, tool_args, tool_result, tool_error, session, agent, goal_id "
        "FROM records ORDER BY ts, id",
    )
    kinds = [r[0] for r in rows]
    assert kinds == [
        "goal",
        "message",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "message",
        "goal",
        "outcome",
    ]
    assert {r[7] for r in rows} == {"conv-oslo"} and {r[8] for r in rows} == {"weather-bot"}
    assert len({r[9] for r in rows}) == 1  # every record belongs to the invoke_agent span's goal
    assert rows[1][1:3] == ("user", "What's the weather in Oslo tomorrow?")
    assert rows[2][3] == "get_weather" and json.loads(rows[2][4]) == {"city": "Oslo"}
    assert rows[3][6] == "429 Too Many Requests" and rows[3][5] is None  # span status ERROR is the error
    assert json.loads(rows[5][5]) == {"city": "Oslo", "forecast": "rain", "celsius": 7}
    assert rows[6][1:3] == ("assistant", "Tomorrow in Oslo: rain, 7°C.")
    assert "You are a weather assistant." not in {r[2] for r in rows}  # system instructions are not experience
    goal = _records(engine, "SELECT status, description FROM goals")
    assert goal == [("succeeded", "What's the weather in Oslo tomorrow?")]
    linked = _records(
        engine,
        "SELECT c.tool_call_id FROM records r JOIN records c ON c.id = json_extract_string(r.meta, '$.call_record') "
        "WHERE r.kind = 'tool_result' ORDER BY r.ts",
    )
    assert linked == [("conv-oslo-call1",), ("conv-oslo-call2",)]
    # The collector's form (hex ids, enum numbers, one pretty-printed document per file) maps to the same ids.
    again = engine.ingest([str(writer.write_document(tmp_path / "traces.json"))], fmt="otel")
    assert again.stored == 0 and again.duplicates == len(rows)


def test_old_style_message_events_become_messages(make_engine, tmp_path):
    writer = TraceWriter()
    writer.old_style_chat("conv-math", "What is the capital of Norway?", "Oslo is the capital of Norway.")
    engine = make_engine()
    engine.ingest([str(writer.write(tmp_path / "old.jsonl"))], fmt="otel")
    rows = _records(engine, "SELECT role, content, session FROM records ORDER BY ts")
    assert rows == [
        ("user", "What is the capital of Norway?", "conv-math"),
        ("assistant", "Oslo is the capital of Norway.", "conv-math"),
    ]


def test_thousand_sdk_spans_store_every_span_content_once(make_engine, tmp_path):
    writer = TraceWriter()
    conversations = 170
    for n in range(conversations):
        writer.conversation(f"conv-{n}", f"City{n}", fail_first=n % 2 == 0, stamp_all=True)
    spans = writer.spans()
    gen_ai = [s for s in spans if s.attributes.get("gen_ai.operation.name")]
    assert len(gen_ai) >= 1000
    # Two files, as a rotating file exporter leaves them: a conversation's spans may sit in both.
    path_a, path_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    writer.write(path_a, per_line=64)
    lines = path_a.read_text(encoding="utf-8").splitlines()
    path_a.write_text("\n".join(lines[: len(lines) // 2]) + "\n", encoding="utf-8")
    path_b.write_text("\n".join(lines[len(lines) // 2 :]) + "\n", encoding="utf-8")
    engine = make_engine()
    result = engine.ingest([str(path_a), str(path_b)])
    assert result.rejected == 0
    by_kind = dict(_records(engine, "SELECT kind, count(*) FROM records GROUP BY kind"))
    # Per conversation: the goal opened and closed, its outcome, the question and the answer, two calls, two results.
    assert by_kind == {
        "goal": 2 * conversations,
        "outcome": conversations,
        "message": 2 * conversations,
        "tool_call": 2 * conversations,
        "tool_result": 2 * conversations,
    }
    assert result.stored == 9 * conversations
    sessions = _records(engine, "SELECT count(DISTINCT session), count(DISTINCT agent) FROM records")
    assert sessions == [(conversations, 1)]
    # Each chat span repeats the history; still every question, answer and call is stored exactly once.
    repeated = _records(
        engine,
        "SELECT text, count(*) FROM records GROUP BY session, kind, tool_call_id, text HAVING count(*) > 1",
    )
    assert repeated == []
    errors = _records(engine, "SELECT count(*) FROM records WHERE kind = 'tool_result' AND tool_error IS NOT NULL")
    assert errors == [(conversations // 2,)]
    assert engine.ingest([str(path_a), str(path_b)]).stored == 0


def test_bad_otlp_lines_are_rejected_with_their_line_and_good_spans_still_land(make_engine, tmp_path):
    writer = TraceWriter()
    writer.old_style_chat("conv-1", "Is the Bergen ferry running today?", "Yes, every hour.")
    path = writer.write(tmp_path / "mixed.jsonl")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"resourceSpans": [{"scopeSpans": [\n')
        fh.write('{"spans": []}\n')
    engine = make_engine()
    result = engine.ingest([str(path)], fmt="otel")
    assert result.stored == 2
    assert [(r.line, r.error.split(":")[0]) for r in result.rejects] == [
        (2, "malformed JSON"),
        (3, "an OTLP JSON line must be an object with a `resourceSpans` list"),
    ]


def test_unknown_format_names_otel_among_the_choices(make_engine, tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text("{}\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        make_engine().ingest([str(path)], fmt="otlp")
    assert "otel" in (err.value.hint or "")
