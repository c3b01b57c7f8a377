"""Property-based tests (hypothesis): readers, validation, redaction and rendering hold for any input."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from secrets_table import SECRETS

from expengine.ingest.events import EventError, event_from_native
from expengine.ingest.readers import read_items
from expengine.ingest.redact import Redactor

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
NOW = dt.datetime(2026, 3, 1)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "ts",
    "kind",
    "id",
    "agent",
    "session",
    "role",
    "content",
    "tool",
    "goal",
    "outcome",
    "feedback",
    "importance",
    "tags",
    "meta",
    "goal_id",
    "category",
]
near_events = st.fixed_dictionaries(
    {
        "ts": st.sampled_from(["2026-03-01T09:00:00Z", 1767225600, "yesterday", None, True]),
        "kind": st.sampled_from(["message", "tool_call", "tool_result", "goal", "outcome", "feedback", "bogus", 3]),
    },
    optional={name: json_values for name in FIELDS[2:]},
)
lines = st.one_of(
    st.binary(max_size=80),
    near_events.map(lambda e: json.dumps(e).encode()),
    st.text(max_size=40).map(lambda t: json.dumps({"ts": 0, "kind": "note", "content": t}).encode()),
)


def _log(raw_lines: list[bytes]) -> bytes:
    """One line per item; a known first line, so the file never starts like gzip (a whole-file error, tested
    elsewhere) or a JSON array (the openai-chat format)."""
    first = b'{"ts": 0, "kind": "note", "content": "start"}'
    return b"\n".join([first, *(line.replace(b"\n", b" ") for line in raw_lines)]) + b"\n"


# --- readers ----------------------------------------------------------------------------------------------
@FAST
@given(st.lists(lines, min_size=1, max_size=8))
def test_any_bytes_become_events_or_rejects_with_file_and_line(tmp_path, raw_lines):
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(_log(raw_lines))
    items = list(read_items(str(path), fmt="native", max_line_bytes=1000, agent=None, now=NOW))
    expected = [n for n, line in enumerate(path.read_bytes().split(b"\n")[:-1], start=1) if line.strip()]
    assert [item.line for item in items] == expected
    for item in items:
        assert item.file == str(path) and (item.event is None) != (item.error is None)


@pytest.fixture(scope="module")
def fuzz_engine(tmp_path_factory, embedder):
    from expengine import Engine

    with Engine(store=tmp_path_factory.mktemp("fuzz") / "store", embedder=embedder) as engine:
        yield engine


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(lines, min_size=1, max_size=6))
def test_ingest_of_any_bytes_stores_or_rejects_every_line(fuzz_engine, tmp_path, raw_lines):
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(_log(raw_lines))
    result = fuzz_engine.ingest([str(path)])
    assert result.read == result.stored + result.duplicates + result.rejected
    assert all(r.file == str(path) and r.line >= 1 and r.error for r in result.rejects)


# --- validation -------------------------------------------------------------------------------------------
@FAST
@given(st.one_of(json_values, near_events))
def test_validation_returns_an_event_or_names_the_problem(obj: Any):
    try:
        event = event_from_native(obj)
    except EventError as exc:
        assert str(exc)
    else:
        assert event.kind in ("message", "tool_call", "tool_result", "goal", "outcome", "feedback")
        assert isinstance(event.ts, dt.datetime) and event.ts.tzinfo is None


# --- redaction --------------------------------------------------------------------------------------------
@FAST
@given(st.text(max_size=200))
def test_redaction_is_idempotent(text: str):
    once, _ = Redactor()(text)
    assert Redactor()(once) == (once, 0)


words = st.text(st.sampled_from(" abcdefghijk,.!?()'\"\n中文"), max_size=60)


@FAST
@given(words, st.sampled_from(SECRETS), words)
def test_a_planted_secret_never_survives_surrounding_text(before: str, planted: tuple[str, str, str], after: str):
    _, text, secret = planted
    out, n = Redactor()(f"{before} {text} {after}")
    assert secret not in out and n >= 1


plain = st.text(st.characters(blacklist_categories=("Nd", "Cs"), blacklist_characters="@:=/："), max_size=200)


@FAST
@given(plain)
def test_text_without_digits_or_secrets_is_never_touched(text: str):
    assert Redactor()(text) == (text, 0)


@FAST
@given(json_values)
def test_redacting_a_json_value_keeps_its_shape(value: Any):
    out, _ = Redactor().value(value)
    assert type(out) is type(value) or isinstance(out, str)
    if isinstance(value, dict):
        assert list(out) == list(value)
    if isinstance(value, list):
        assert len(out) == len(value)


# --- rendering --------------------------------------------------------------------------------------------
printable = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Co", "Cn", "Zl", "Zp")), min_size=1, max_size=80)


@FAST
@given(printable)
def test_any_text_prints_verbatim_through_the_cli_consoles(text: str):
    from rich.table import Table

    from expengine.cli.common import stdout

    with stdout.capture() as line:
        stdout.print(text)
    assert line.get() == text + "\n"
    table = Table("cell")
    table.add_row(text)
    with stdout.capture() as cells:
        stdout.print(table, width=400)
    assert text.strip() in cells.get()


def test_the_consoles_have_markup_and_emoji_codes_off():
    from expengine.cli.common import stderr, stdout

    for console in (stdout, stderr):
        with console.capture() as out:
            console.print("[bold]x[/bold] [/x] :smile:")
        assert out.get() == "[bold]x[/bold] [/x] :smile:\n"
