"""Fast unit tests of validation, redaction and importance rules (no models, no store)."""

from __future__ import annotations

import datetime as dt

import pytest
from helpers import assess_event

from expengine.ingest.events import EventError, event_from_native, parse_ts, render
from expengine.ingest.redact import Redactor


def test_parse_ts_accepts_iso_with_and_without_zone_and_epoch():
    assert parse_ts("2026-03-01T09:15:00Z") == dt.datetime(2026, 3, 1, 9, 15)
    assert parse_ts("2026-03-01T09:15:00") == dt.datetime(2026, 3, 1, 9, 15)
    assert parse_ts("2026-03-01T10:15:00+01:00") == dt.datetime(2026, 3, 1, 9, 15)
    assert parse_ts(0) == dt.datetime(1970, 1, 1)


@pytest.mark.parametrize(
    "obj, fragment",
    [
        ([1, 2], "must be a JSON object"),
        ({"kind": "message", "content": "x"}, "missing required field `ts`"),
        ({"ts": "2026-01-01", "content": "x"}, "missing required field `kind`"),
        ({"ts": "2026-01-01", "kind": "dance", "content": "x"}, "unknown kind 'dance'"),
        ({"ts": "yesterday", "kind": "message", "content": "x"}, "not ISO-8601"),
        ({"ts": True, "kind": "message", "content": "x"}, "got a boolean"),
        ({"ts": "2026-01-01", "kind": "message", "content": 5}, "`content` must be a string"),
        ({"ts": "2026-01-01", "kind": "message", "role": "robot", "content": "x"}, "`role` must be one of"),
        ({"ts": "2026-01-01", "kind": "message", "content": "x", "importance": 2}, "`importance` must be a number"),
        ({"ts": "2026-01-01", "kind": "message", "content": "x", "tags": "a"}, "`tags` must be a list"),
        ({"ts": "2026-01-01", "kind": "tool_call", "tool": "get"}, "`tool` must be an object"),
        ({"ts": "2026-01-01", "kind": "goal", "goal": {"status": "open"}}, "`goal` needs an `id`"),
        ({"ts": "2026-01-01", "kind": "goal", "goal": {"id": "g", "status": "won"}}, "`goal.status` must be one of"),
        ({"ts": "2026-01-01", "kind": "feedback", "feedback": {"target": "x"}}, "`feedback.signal` is required"),
        ({"ts": "2026-01-01", "kind": "note"}, "nothing to remember"),
    ],
)
def test_invalid_events_are_rejected_with_a_reason_naming_the_field(obj, fragment):
    with pytest.raises(EventError) as info:
        event_from_native(obj)
    assert fragment in str(info.value)


def test_valid_event_of_each_kind_renders_its_substance():
    call = event_from_native({"ts": 1, "kind": "tool_call", "tool": {"name": "get_weather", "args": {"city": "Oslo"}}})
    assert render(call) == 'call get_weather({"city": "Oslo"})'
    err = event_from_native(
        {"ts": 1, "kind": "tool_result", "tool": {"name": "get_weather", "error": "429 Too Many Requests"}}
    )
    assert render(err) == "get_weather error: 429 Too Many Requests"
    goal = event_from_native(
        {"ts": 1, "kind": "goal", "goal": {"id": "g1", "status": "succeeded", "description": "Book"}}
    )
    assert (goal.goal_id, render(goal)) == ("g1", "goal succeeded: Book")
    fb = event_from_native(
        {"ts": 1, "kind": "feedback", "feedback": {"signal": "negative", "target": "r1", "text": "wrong"}}
    )
    assert render(fb) == "feedback negative on r1: wrong"
    assert render(event_from_native({"ts": 1, "kind": "outcome", "outcome": "success"})) == "outcome success"


@pytest.mark.parametrize(
    "text, label, secret",
    [
        ("my key is sk-proj-abcdefghijklmnopqrstuvwx", "API_KEY", "sk-proj-abcdefghijklmnopqrstuvwx"),
        ("mail me at jane.doe@example.com please", "EMAIL", "jane.doe@example.com"),
        ("call +1 415-555-0134 tomorrow", "PHONE", "415-555-0134"),
        ("card 4111 1111 1111 1111 expires soon", "CARD", "4111 1111 1111 1111"),
        ("login with password=hunter2 now", "SECRET", "hunter2"),
        ("Authorization: Bearer abcdefghijklmnopqrstu123", "TOKEN", "abcdefghijklmnopqrstu123"),
    ],
)
def test_redactor_removes_secrets_and_counts_them(text, label, secret):
    redactor = Redactor()
    out, n = redactor(text)
    assert secret not in out and f"[REDACTED:{label}]" in out and n >= 1
    assert redactor.counts[label] >= 1


def test_redactor_leaves_ids_dates_and_non_luhn_numbers_alone():
    text = "flight HAT136 on 2024-05-20, certificate_7504069, order #1234567890123 for user mia_li_3668"
    out, n = Redactor()(text)
    assert (out, n) == (text, 0)


def test_redactor_can_be_disabled():
    assert Redactor(enabled=False)("a@b.com") == ("a@b.com", 0)


def test_rules_rank_errors_feedback_and_protected_phrases_above_chatter():
    assert assess_event(kind="tool_result", tool_error="boom").category == "error"
    assert assess_event(kind="feedback").importance == 0.8
    pref = assess_event(content="I hate cilantro, never add it")
    assert pref.protected and pref.category == "preference" and pref.importance >= 0.9
    chatter = assess_event(content="thanks!")
    assert chatter.category == "chatter" and chatter.importance < 0.2 and not chatter.protected
    assert assess_event(kind="tool_call", has_goal=True).category == "process"


def test_callers_importance_and_category_win_and_long_term_goals_are_protected():
    a = assess_event(content="thanks!", importance=0.95, category="custom")
    assert (a.importance, a.category) == (0.95, "custom")
    assert assess_event(kind="goal", goal_long_term=True).protected


def test_low_source_confidence_lowers_importance():
    assert assess_event(kind="note", confidence=0.0).importance < assess_event(kind="note", confidence=1.0).importance


def test_a_long_tool_output_keeps_its_head_tail_and_error_lines_within_the_limit():
    from expengine.ingest.outputs import kept_output

    lines = [f"step {i} compiled fine" for i in range(4000)]
    lines[1700] = "FAILED tests/test_cache.py::test_expiry - AssertionError: 3 != 4"
    lines[2600] = "error[E0308]: mismatched types in src/cache.rs"
    output = "\n".join(lines) + "\n== 1 failed, 212 passed in 4.1s =="
    kept = kept_output(output, 8_000)
    assert len(kept) <= 8_000
    assert kept.startswith("step 0 compiled fine\n") and kept.endswith("== 1 failed, 212 passed in 4.1s ==")
    assert lines[1700] in kept and lines[2600] in kept and "step 2000 compiled fine" not in kept
    assert "error lines among them kept below: 2" in kept
    assert kept_output("short output", 8_000) == "short output"
