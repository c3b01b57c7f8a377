"""Logs as the tools really write them: the format is found from whole lines whatever the first line's
type or size, a bad line costs that line only, every line type is stored or skipped by its type, and
failures, cancellations and goals read as each tool means them. The real files in
../shared/data/wild are read by path; small fixtures here cover each case on its own."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from expengine.ingest.readers import read_items

NOW = dt.datetime(2026, 3, 1)
WILD = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "wild"
TS = "2026-01-01T00:00:00Z"
GOOD = [{"ts": TS, "kind": "message", "role": "user", "content": f"good line {n}", "id": f"g{n}"} for n in range(50)]


def items(path, *, fmt: str = "auto", max_line_bytes: int = 1_000_000):
    return list(read_items(str(path), fmt=fmt, max_line_bytes=max_line_bytes, agent=None, now=NOW))


@pytest.fixture
def wild() -> Path:
    if not WILD.exists():
        if os.environ.get("CI"):
            pytest.fail(f"the real logs are missing at {WILD}: the suite reads them by path")
        pytest.skip(f"the real logs in {WILD} are not here")
    return WILD


# --- the format, from whole lines ------------------------------------------------------------------------
def test_jsonl_of_long_chat_runs_is_read_run_by_run(write_jsonl):
    """Runs of 10-36 KB on one line each: more than a read buffer, less than the line limit."""
    runs = [
        {
            "id": f"r{n}",
            "messages": [{"role": "user", "content": "book " + "x" * 20_000}, {"role": "assistant", "content": "ok"}],
        }
        for n in range(6)
    ]
    got = items(write_jsonl("runs.jsonl", runs))
    assert not [i.error for i in got if i.error]
    assert {i.event.session for i in got} == {f"r{n}" for n in range(6)}


def test_a_codex_rollout_with_a_long_first_line_is_a_rollout(write_jsonl):
    meta = {
        "timestamp": TS,
        "type": "session_meta",
        "payload": {"id": "s1", "cwd": "/w/app", "base_instructions": "x" * 25_000},
    }
    prompt = {"timestamp": TS, "type": "event_msg", "payload": {"type": "user_message", "message": "add a flag"}}
    got = items(write_jsonl("rollout.jsonl", [meta, prompt]))
    assert [i.skipped for i in got][0] == "session_meta"
    assert [i.event.kind for i in got if i.event] == ["goal", "message"]


@pytest.mark.parametrize("first", ["file-history-snapshot", "summary", "queue-operation", "progress"])
def test_a_claude_code_session_is_one_whatever_its_first_line(write_jsonl, first):
    head = {"type": first, "messageId": "m", "snapshot": {}, "summary": "t", "leafUuid": "u", "sessionId": "s"}
    user = {
        "type": "user",
        "uuid": "u1",
        "sessionId": "s",
        "timestamp": TS,
        "cwd": "/w/app",
        "message": {"role": "user", "content": "run the tests"},
    }
    got = items(write_jsonl("s.jsonl", [head, user]))
    assert got[0].skipped == first and got[0].error is None
    assert [i.event.kind for i in got[1:]] == ["goal", "message"]


# --- a bad first line costs that line only ----------------------------------------------------------------
@pytest.mark.parametrize(
    "first, error",
    [
        ('{"ts":"2026-01-01T00:00:00Z","kind":"no', "malformed JSON"),
        ('{"ts": "' + "x" * 3000 + '"}', "line longer than 2000 bytes"),
        (
            '{"ts": "2026-01-01T00:00:00Z", "kind": "message", "meta": ' + "[" * 10_000 + "]" * 10_000 + "}",
            "nested deeper",
        ),
        ("[" * 10_000 + "]" * 10_000, "nested deeper"),
    ],
)
def test_a_bad_first_line_is_one_reject_and_the_good_lines_are_read(write_jsonl, first, error):
    limit = 2000 if "longer" in error else 1_000_000
    got = items(write_jsonl("bad.jsonl", [first, *GOOD]), max_line_bytes=limit)
    assert error in (got[0].error or "") and got[0].line == 1
    assert len([i for i in got if i.event]) == 50 and not [i for i in got[1:] if i.error]


def test_json_nested_deep_inside_a_later_line_is_one_reject(write_jsonl):
    deep = (
        '{"ts": "2026-01-01T00:00:00Z", "kind": "message", "content": "x", "meta": {"a": '
        + "[" * 500
        + "]" * 500
        + "}}"
    )
    got = items(write_jsonl("deep.jsonl", [GOOD[0], deep, GOOD[1]]))
    assert [i.line for i in got if i.error] == [2] and len([i for i in got if i.event]) == 2


def test_an_over_long_line_is_rejected_alone_or_in_a_file(write_jsonl, tmp_path):
    """The same line gets the same answer whether it is the whole file or one of its lines."""
    long = json.dumps(dict(GOOD[0], content="y" * 5000))
    alone = items(write_jsonl("alone.jsonl", [long]), max_line_bytes=2000)
    inside = items(write_jsonl("inside.jsonl", [GOOD[0], long]), max_line_bytes=2000)
    assert alone[0].error == inside[1].error == "line longer than 2000 bytes (raise ingest.max_line_bytes)"


def test_a_pretty_printed_document_is_still_one_document(tmp_path):
    path = tmp_path / "run.traj"
    path.write_text(json.dumps({"trajectory": [{"action": "ls", "observation": "a.py"}], "history": []}, indent=2))
    got = items(path)
    assert [i.event.kind for i in got] == ["tool_call", "tool_result"]


# --- every line type has a rule ---------------------------------------------------------------------------
def _claude(kind: str, content, **extra) -> dict:
    line = {"type": kind, "uuid": f"u{len(str(content))}{kind}", "sessionId": "s", "timestamp": TS, "cwd": "/w/app"}
    return {**line, "message": {"role": kind, "content": content}, **extra}


def test_claude_code_bookkeeping_and_thinking_are_skipped_by_type(write_jsonl):
    lines = [
        {"type": "progress", "sessionId": "s", "uuid": "p", "data": {"type": "hook_progress"}},
        {"type": "queue-operation", "operation": "enqueue", "sessionId": "s"},
        {"type": "system", "subtype": "turn_duration", "uuid": "t", "sessionId": "s", "timestamp": TS},
        _claude("assistant", [{"type": "thinking", "thinking": "", "signature": "abc"}]),
        _claude("assistant", [{"type": "text", "text": "\n\n"}]),
        _claude("user", "fix the build"),
    ]
    got = items(write_jsonl("s.jsonl", lines))
    assert Counter(i.skipped for i in got if i.skipped) == {
        "progress": 1,
        "queue-operation": 1,
        "system:turn_duration": 1,
        "thinking": 1,
        "empty message": 1,
    }
    assert not [i for i in got if i.error]


def test_codex_lines_are_stored_once_and_echoes_skipped(write_jsonl):
    def line(kind, payload):
        return {"timestamp": TS, "type": kind, "payload": payload}

    lines = [
        line("session_meta", {"id": "s", "cwd": "/w/app", "git": {"repository_url": "git@github.com:acme/app.git"}}),
        line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}),
        line("event_msg", {"type": "user_message", "message": "go"}),
        line("response_item", {"type": "reasoning", "encrypted_content": "x"}),
        line("event_msg", {"type": "token_count", "info": None}),
        line("event_msg", {"type": "exec_command_end", "exit_code": 0}),
    ]
    got = items(write_jsonl("r.jsonl", lines))
    assert Counter(i.skipped for i in got if i.skipped) == {
        "session_meta": 1,
        "event_msg:user_message": 1,
        "reasoning": 1,
        "event_msg:token_count": 1,
        "event_msg:exec_command_end": 1,
    }
    assert {i.event.meta["repo"] for i in got if i.event} == {"acme/app"}


# --- failures, cancellations and goals --------------------------------------------------------------------
def _codex_session(outputs: list[str]) -> list[dict]:
    lines = [{"timestamp": TS, "type": "session_meta", "payload": {"id": "s", "cwd": "/w/app"}}]
    for n, output in enumerate(outputs):
        call = {
            "type": "function_call",
            "name": "exec_command",
            "call_id": f"c{n}",
            "arguments": json.dumps({"cmd": "mix test"}),
        }
        lines.append({"timestamp": TS, "type": "response_item", "payload": call})
        lines.append(
            {
                "timestamp": TS,
                "type": "response_item",
                "payload": {"type": "function_call_output", "call_id": f"c{n}", "output": output},
            }
        )
    return lines


def test_codex_exit_codes_and_failed_stdin_writes_are_errors(write_jsonl):
    outputs = [
        "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 2\nOutput:\nrg: x: No such file",
        "Chunk ID: 2\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nok",
        "write_stdin failed: stdin is closed for this session; rerun exec_command with tty=true",
    ]
    got = [i.event for i in items(write_jsonl("r.jsonl", _codex_session(outputs))) if i.event]
    results = [e for e in got if e.kind == "tool_result"]
    assert [bool(e.tool_error) for e in results] == [True, False, True]
    call = next(e for e in got if e.kind == "tool_call")
    assert call.tool_name == "mix" and call.tool_args["command"] == "mix test" and call.meta["repo"] == "app"


def test_a_codex_desktop_prompt_only_in_event_msg_is_the_goal(write_jsonl):
    lines = [
        {"timestamp": TS, "type": "session_meta", "payload": {"id": "s", "cwd": "/w/app"}},
        {"timestamp": TS, "type": "event_msg", "payload": {"type": "user_message", "message": "rename the flag"}},
    ]
    got = [i.event for i in items(write_jsonl("r.jsonl", lines)) if i.event]
    assert got[0].kind == "goal" and got[0].goal_description == "rename the flag"


def test_swe_agent_syntax_error_is_an_error_and_a_demonstration_is_not_the_goal(tmp_path):
    run = {
        "history": [
            {"role": "system", "content": "SETTING"},
            {
                "role": "user",
                "content": "Here is a demonstration of how to correctly accomplish this task.",
                "is_demo": True,
            },
            {"role": "user", "content": "Fix the crash in reader.py"},
        ],
        "trajectory": [
            {
                "action": "edit 1:1\nx = (\nend_of_edit",
                "observation": "Your proposed edit has introduced new syntax error(s). Please understand the fixes",
            },
        ],
    }
    path = tmp_path / "run.traj"
    path.write_text(json.dumps(run, indent=2))
    got = [i.event for i in items(path)]
    assert got[0].goal_description == "Fix the crash in reader.py"
    assert got[-1].kind == "tool_result" and got[-1].tool_error


def test_claude_code_sibling_errors_are_cancellations_and_compaction_is_no_goal(write_jsonl):
    call = _claude("assistant", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "mix test"}}])
    result = _claude(
        "user",
        [
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "is_error": True,
                "content": "<tool_use_error>Sibling tool call errored</tool_use_error>",
            }
        ],
    )
    compact = _claude(
        "user",
        "Your task is to create a detailed summary of the conversation so far",
        isSidechain=True,
        agentId="acompact-1",
    )
    got = [
        i.event
        for i in items(write_jsonl("s.jsonl", [_claude("user", "add a test"), call, result, compact]))
        if i.event
    ]
    cancelled = next(e for e in got if e.kind == "tool_result")
    assert cancelled.tool_error is None and cancelled.meta["cancelled"] is True
    assert [e.session for e in got if e.kind == "goal"] == ["s"]
    assert got[2].meta["repo"] == "app" and got[2].tool_args["command"] == "mix test"


def test_openai_chat_tool_call_ids_link_a_result_to_its_call(write_jsonl):
    run = {
        "id": "r",
        "messages": [
            {"role": "user", "content": "find it"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "function": {"name": "find_file", "arguments": "{}"}}],
            },
            {"role": "tool", "content": "Found 1", "tool_call_ids": ["c1"]},
        ],
    }
    got = [i.event for i in items(write_jsonl("r.jsonl", [run]))]
    result = got[-1]
    assert result.tool_name == "find_file" and result.meta["call_record"] == got[-2].id


def test_a_worktree_is_its_repository_and_a_remote_names_owner_and_name():
    from expengine.ingest.sessions import project_of

    assert project_of("/home/u/projects/spotter-worktrees/spotter-gqc") == "spotter"
    assert project_of("/home/u/app/.worktrees/feature-x") == "app"
    assert project_of("/home/u/app", "https://github.com/acme/app.git") == "acme/app"
    assert project_of("/home/u/app") == "app"


# --- the real files ---------------------------------------------------------------------------------------
def _tally(path: Path) -> Counter[str]:
    tally: Counter[str] = Counter()
    for item in items(path):
        tally["skipped" if item.skipped else "rejected" if item.error else "events"] += 1
    return tally


@pytest.mark.parametrize("folder", ["claude-code", "codex", "swe-agent"])
def test_every_real_file_is_read_with_no_reject(wild, folder):
    files = sorted(p for p in (wild / folder).rglob("*") if p.suffix in (".jsonl", ".traj"))
    assert files
    for path in files:
        tally = _tally(path)
        assert tally["rejected"] == 0 and tally["events"] > 0, (path, tally)


def test_a_real_claude_code_session_skips_progress_and_learns_its_project(wild):
    path = wild / "claude-code" / "spotter" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    got = items(path)
    skipped = Counter(i.skipped for i in got if i.skipped)
    assert skipped["progress"] == 1333 and skipped["file-history-snapshot"] == 28
    assert {i.event.meta.get("repo") for i in got if i.event} == {"spotter"}


def test_the_real_codex_rollout_finds_its_failed_commands(wild):
    path = next((wild / "codex").glob("rollout-*.jsonl"))
    got = [i.event for i in items(path) if i.event]
    errors = [e for e in got if e.kind == "tool_result" and e.tool_error]
    assert len(errors) >= 5 and {e.meta.get("repo") for e in got} == {"codemie-ai/codemie-code"}


# --- redaction that knows ids -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        '"timestamp":1765617840191,',
        "1767904611897 6f183b50 build and test",
        "/tmp/sessions/1765617840191/out.log",
        "call_record fc04e609-d145-4539-b8cc-14434915479d/0",
        "api_key: anthropic_api_key()",
        "env.OPENAI_API_KEY = env.ANTHROPIC_API_KEY",
        "apiKey: ['NEWAGENT_API_KEY']",
        "params: { _csrf_token: csrfToken }",
        'TOKEN="${REVIEW_TOKEN:-}"',
        "git@github.com:acme/app.git",
    ],
)
def test_ids_timestamps_paths_and_code_are_not_secrets(text):
    from expengine.ingest.redact import Redactor

    assert Redactor()(text) == (text, 0)


def test_a_millisecond_timestamp_under_a_time_key_stays_a_number():
    from expengine.ingest.redact import Redactor

    value = {"timestamp": 1765617840191, "createdAt": 1765617840191, "card": 4111111111111111}
    assert Redactor().value(value) == ({**value, "card": "[REDACTED:CARD]"}, 1)
