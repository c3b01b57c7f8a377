"""Coding-agent logs: mini-swe-agent trajectories become tool calls and results, graded by a report."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from expengine.ingest.readers import read_items
from expengine.ingest.trajectories import program_of, repo_of

SWE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "swe_bench_verified_mini"
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
# sympy-13091: pytest is not installed there (a failed call); astropy-12907: resolved; sympy-12489: unresolved
RUNS = ("sympy__sympy-13091", "astropy__astropy-12907", "sympy__sympy-12489")


def _items(path: Path | str, fmt: str = "auto", max_document_bytes: int = 64_000_000):
    return list(
        read_items(
            str(path), fmt=fmt, max_line_bytes=1_000_000, max_document_bytes=max_document_bytes, agent=None, now=NOW
        )
    )


@pytest.fixture
def swe_runs(tmp_path: Path) -> Path:
    """A folder of three real runs, as mini-swe-agent lays them out, beside a report grading them."""
    if not SWE.exists():
        pytest.fail(f"the shared SWE-bench runs are missing at {SWE}: the suite reads them by path")
    runs = tmp_path / "trajs"
    for run in RUNS:
        (runs / run).mkdir(parents=True)
        shutil.copy(SWE / "trajs" / run / f"{run}.traj.json", runs / run)
    report = json.loads((SWE / "sb-cli-report.json").read_text())
    graded = {
        "resolved_ids": [r for r in report["resolved_ids"] if r in RUNS],
        "unresolved_ids": [r for r in report["unresolved_ids"] if r in RUNS],
    }
    (tmp_path / "report.json").write_text(json.dumps(graded, indent=1))
    return runs


@pytest.mark.parametrize(
    ("command", "program"),
    [
        ("cd /testbed && python -m pytest tests/test_x.py -q", "pytest"),
        ("cd /testbed; ./tests/runtests.py auth_tests", "tests/runtests.py"),
        ("timeout 120 bin/test sympy/core/tests/test_basic.py", "bin/test"),
        ("DJANGO_SETTINGS_MODULE=x python3 reproduce.py", "python"),
        ("cat <<'EOF' > fix.py\nprint('a')\nEOF", "cat"),
        ("grep -rn 'def separability' astropy | head -5", "grep"),
        ("/usr/bin/python3.9 -m pip list", "pip"),
        ("cd /testbed&&sed -i 's/a/b/' x.py", "sed"),
        ("cd /testbed", "shell"),
    ],
)
def test_a_command_is_named_by_the_program_it_runs(command: str, program: str) -> None:
    assert program_of(command) == program


def test_the_repository_comes_from_the_swe_bench_instance_id() -> None:
    assert repo_of("django__django-11099") == "django/django"
    assert repo_of("scikit-learn__scikit-learn-10297") == "scikit-learn/scikit-learn"
    assert repo_of("not-an-instance") is None


def test_a_trajectory_becomes_a_goal_thoughts_tool_calls_and_results(swe_runs: Path) -> None:
    items = _items(swe_runs / "sympy__sympy-13091" / "sympy__sympy-13091.traj.json")
    events = [i.event for i in items]
    assert all(e is not None for e in events), [i.error for i in items if i.error]
    goal = events[0]
    assert goal.kind == "goal" and goal.goal_status == "open"
    assert goal.goal_description and "<pr_description>" not in goal.goal_description
    assert "<instructions>" not in goal.goal_description
    assert {e.session for e in events} == {"sympy__sympy-13091"}
    assert {e.meta["repo"] for e in events} == {"sympy/sympy"}
    calls = [e for e in events if e.kind == "tool_call"]
    results = {e.meta["call_record"]: e for e in events if e.kind == "tool_result"}
    assert calls and all(c.tool_args["command"] for c in calls)
    # every result answers the call before it, under the same tool name
    assert all(results[c.id].tool_name == c.tool_name for c in calls if c.id in results)
    pytest_calls = [c for c in calls if c.tool_name == "pytest"]
    assert pytest_calls, "this run tries pytest where it is not installed"
    failed = [results[c.id] for c in pytest_calls if c.id in results and results[c.id].tool_error]
    assert failed and "No module named pytest" in failed[0].tool_error
    assert failed[0].tool_error.startswith("exit 1")
    thoughts = [e for e in events if e.kind == "message" and e.role == "assistant"]
    # the command block is the tool call, not part of the thought (other fenced code stays)
    assert thoughts and not any(t.content.startswith("THOUGHT") or "```bash" in t.content for t in thoughts)


def test_a_reply_without_exactly_one_command_is_no_tool_call(tmp_path: Path) -> None:
    run = {
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "pkg__pkg-1",
        "messages": [
            {"role": "user", "content": "<pr_description>Fix the parser</pr_description>"},
            {"role": "assistant", "content": "THOUGHT: two at once\n```bash\nls\n```\n```bash\npwd\n```"},
            {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks."},
            {"role": "assistant", "content": "THOUGHT: one\n```bash\nls src\n```"},
            {"role": "user", "content": "<returncode>2</returncode>\n<output>ls: cannot access 'src'</output>"},
        ],
    }
    path = tmp_path / "pkg__pkg-1.traj.json"
    path.write_text(json.dumps(run, indent=2))
    events = [i.event for i in _items(path)]
    kinds = [e.kind for e in events]
    assert kinds == ["goal", "message", "observation", "message", "tool_call", "tool_result"]
    assert events[0].goal_description == "Fix the parser"
    assert events[-1].tool_error == "exit 2: ls: cannot access 'src'"


def test_a_document_too_large_is_rejected_with_the_setting_to_raise(swe_runs: Path) -> None:
    items = _items(swe_runs / "astropy__astropy-12907" / "astropy__astropy-12907.traj.json", max_document_bytes=1000)
    assert len(items) == 1 and items[0].event is None
    assert "ingest.max_document_bytes" in (items[0].error or "")


def test_forcing_swe_agent_on_another_format_rejects_the_line(write_jsonl) -> None:
    path = write_jsonl("note.jsonl", [{"ts": "2026-01-01T00:00:00Z", "kind": "note", "content": "not a trajectory"}])
    items = _items(path, fmt="swe-agent")
    assert len(items) == 1 and items[0].event is None and "trajectory" in (items[0].error or "")


def test_outcome_lines_name_file_and_line_when_wrong(tmp_path: Path) -> None:
    path = tmp_path / "outcomes.jsonl"
    path.write_text('{"session": "a", "outcome": "success"}\n{"session": "b", "outcome": "maybe"}\n')
    items = _items(path)
    assert [i.event.kind for i in items if i.event] == ["goal", "outcome"]
    bad = [i for i in items if i.event is None]
    assert len(bad) == 1 and bad[0].line == 2 and "success, failure, partial" in (bad[0].error or "")


def test_a_native_line_missing_kind_gets_the_native_error_not_the_outcome_one(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"session": "s1", "content": "booked a hotel"}\n')
    items = _items(path)
    assert len(items) == 1 and items[0].event is None
    assert "outcome" not in (items[0].error or "") and "`ts`" in (items[0].error or "")


@pytest.mark.slow
def test_runs_and_their_report_ingest_into_graded_sessions(make_engine, swe_runs: Path) -> None:
    engine = make_engine()
    first = engine.ingest([str(swe_runs)], outcomes=[str(swe_runs.parent / "report.json")])
    assert first.rejected == 0 and first.stored > 100
    again = engine.ingest([str(swe_runs)], outcomes=[str(swe_runs.parent / "report.json")])
    assert again.stored == 0 and again.duplicates == again.read
    with engine.session() as store:
        goals = dict(
            store.con.execute(
                "SELECT goal_id, status FROM goals WHERE goal_id IN (SELECT unnest(?))", [list(RUNS)]
            ).fetchall()
        )
        failures = store.con.execute(
            "SELECT count(*) FROM records WHERE kind = 'tool_result' AND tool_name = 'pytest' AND tool_error IS NOT NULL"
        ).fetchone()[0]
    assert goals == {
        "sympy__sympy-13091": "succeeded",
        "astropy__astropy-12907": "succeeded",
        "sympy__sympy-12489": "failed",
    }
    assert failures >= 1


def test_cli_ingest_takes_a_report_alone(tmp_path: Path, swe_runs: Path) -> None:
    from expengine.cli import app

    runner = CliRunner()
    store = tmp_path / "store"
    bare = runner.invoke(app, ["--store", str(store), "ingest"])
    assert bare.exit_code == 2 and "Missing argument" in bare.output  # no paths and no --outcomes
    report = ["--outcomes", str(swe_runs.parent / "report.json"), "--json"]
    early = runner.invoke(app, ["--store", str(store), "ingest", *report])
    assert early.exit_code == 0, early.output
    assert json.loads(early.stdout)["stored"] == 0 and json.loads(early.stdout)["unknown_sessions"] == len(RUNS)
    runs = runner.invoke(app, ["--store", str(store), "ingest", str(swe_runs / RUNS[0]), *report])
    assert runs.exit_code == 0, runs.output
    graded = json.loads(runs.stdout)
    assert graded["unknown_sessions"] == len(RUNS) - 1  # only the run now in the store is graded
    assert graded["stored"] == graded["read"] and graded["rejected"] == 0


def test_an_swe_agent_trajectory_reads_its_steps(tmp_path: Path) -> None:
    """SWE-agent writes `trajectory` steps (thought, action, observation) and logs no return code."""
    run = {
        "history": [
            {"role": "system", "content": "You are an autonomous programmer."},
            {"role": "user", "content": "<pr_description>Empty lists crash the encoder</pr_description>"},
        ],
        "trajectory": [
            {"thought": "Find the encoder.", "action": "find_file encoder.py", "observation": "Found 1 match"},
            {
                "thought": "Run its tests.",
                "action": "pytest tests/test_encoder.py",
                "observation": "bash: pytest: command not found",
            },
        ],
        "info": {"exit_status": "submitted"},
    }
    path = tmp_path / "lib__lib-7.traj"
    path.write_text(json.dumps(run, indent=2))
    events = [i.event for i in _items(path)]
    assert [e.kind for e in events] == [
        "goal",
        "message",
        "tool_call",
        "tool_result",
        "message",
        "tool_call",
        "tool_result",
    ]
    assert {e.session for e in events} == {"lib__lib-7"} and events[0].meta["repo"] == "lib/lib"
    assert events[3].tool_result == "Found 1 match" and events[3].tool_error is None
    assert events[6].tool_name == "pytest" and "command not found" in events[6].tool_error


CLAUDE_SESSION = "3a7770b4-aba3-46dd-b677-8fc2d71d4e06"


def _claude_line(uuid: str, kind: str, **fields) -> dict:
    """A Claude Code line as the client writes it (the envelope every line carries)."""
    return {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/claude-parser",
        "sessionId": CLAUDE_SESSION,
        "version": "1.0.89",
        "gitBranch": "main",
        "type": kind,
        "uuid": uuid,
        "timestamp": "2025-08-24T04:16:32.053Z",
        **fields,
    }


def _assistant(blocks: list) -> dict:
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-opus-4-1", "content": blocks}


def test_a_claude_code_session_becomes_tool_calls_results_and_subagent_sessions(write_jsonl) -> None:
    bash = {"command": "cd /home/dev/claude-parser && pytest -q", "description": "Run the tests"}
    lines = [
        {"type": "summary", "summary": "Move claude-parser", "leafUuid": "u9"},
        _claude_line("u1", "user", message={"role": "user", "content": "run the tests and fix what fails"}),
        _claude_line("u2", "assistant", message=_assistant([{"type": "thinking", "thinking": "…", "signature": "x"}])),
        _claude_line("u3", "assistant", message=_assistant([{"type": "text", "text": "I'll run the suite."}])),
        _claude_line(
            "u4",
            "assistant",
            message=_assistant([{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": bash}]),
        ),
        _claude_line(
            "u5", "system", content="Running \u001b[1mPostToolUse:Bash\u001b[22m...", isMeta=False, level="info"
        ),
        _claude_line(
            "u6",
            "user",
            message={
                "role": "user",
                "content": [
                    {
                        "tool_use_id": "toolu_1",
                        "type": "tool_result",
                        "content": "bash: pytest: command not found",
                        "is_error": True,
                    }
                ],
            },
            toolUseResult="Error: bash: pytest: command not found",
        ),
        _claude_line(
            "u7",
            "system",
            content="\u001b[1mPreToolUse:Bash\u001b[22m hook failed with non-blocking status code 1",
            isMeta=False,
            level="warning",
        ),
        _claude_line("u8", "user", message={"role": "user", "content": "Caveat: local commands below"}, isMeta=True),
        _claude_line(
            "u9",
            "assistant",
            message=_assistant(
                [{"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "/x.py"}}]
            ),
        ),
        _claude_line(
            "u10",
            "user",
            message={
                "role": "user",
                "content": [
                    {"tool_use_id": "toolu_2", "type": "tool_result", "content": [{"type": "text", "text": "print(1)"}]}
                ],
            },
        ),
        _claude_line(
            "u11", "user", message={"role": "user", "content": "find the flaky test"}, isSidechain=True, agentId="a1"
        ),
    ]
    items = _items(write_jsonl("session.jsonl", lines))
    assert not [i.error for i in items if i.error]
    events = [i.event for i in items if not i.skipped]
    kinds = [(e.kind, e.tool_name) for e in events]
    assert kinds == [
        ("goal", None),
        ("message", None),
        ("message", None),
        ("tool_call", "pytest"),
        ("tool_result", "pytest"),
        ("observation", None),
        ("tool_call", "Read"),
        ("tool_result", "Read"),
        ("goal", None),
        ("message", None),
    ]
    call, failed = events[3], events[4]
    assert call.meta == {
        "cwd": "/home/dev/claude-parser",
        "git_branch": "main",
        "repo": "claude-parser",
        "tool": "Bash",
    }
    assert failed.tool_error == "bash: pytest: command not found" and failed.meta["call_record"] == call.id
    assert events[5].content == "PreToolUse:Bash hook failed with non-blocking status code 1"  # no ANSI codes
    assert events[7].tool_result == "print(1)" and events[7].tool_error is None
    assert {e.session for e in events[:8]} == {CLAUDE_SESSION}
    subagent = events[9]
    assert subagent.session == f"{CLAUDE_SESSION}/agent-a1" and subagent.meta["parent_session"] == CLAUDE_SESSION


def test_a_codex_rollout_becomes_tool_calls_with_exit_codes(write_jsonl) -> None:
    ts = "2025-12-28T12:21:44.491Z"
    sid = "019b64e5-57fa-7463-b644-fba7e456f905"

    def item(payload: dict, kind: str = "response_item") -> dict:
        return {"timestamp": ts, "type": kind, "payload": payload}

    def user(text: str) -> dict:
        return item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})

    shell = {"command": ["bash", "-lc", "cd /repo && python -m pytest tests"], "workdir": "/repo"}
    lines = [
        item(
            {"id": sid, "cwd": "/Users/dev/homelab", "originator": "codex_cli_rs", "git": {"branch": "main"}},
            "session_meta",
        ),
        user("# AGENTS.md instructions for /Users/dev/homelab\n\n<INSTRUCTIONS>…</INSTRUCTIONS>"),
        user("<environment_context>\n  <cwd>/Users/dev/homelab</cwd>\n</environment_context>"),
        user("run the tests"),
        item({"type": "user_message", "message": "run the tests", "images": []}, "event_msg"),
        item({"cwd": "/Users/dev/homelab", "approval_policy": "on-request", "model": "gpt-5.2-codex"}, "turn_context"),
        item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "Run pytest"}]}),
        item({"type": "function_call", "name": "shell", "arguments": json.dumps(shell), "call_id": "call_1"}),
        item(
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": json.dumps({"output": "No module named pytest", "metadata": {"exit_code": 1}}),
            }
        ),
        item({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "call_2"}),
        item({"type": "custom_tool_call_output", "call_id": "call_2", "output": "Exit code: 0\nOutput:\nDone!"}),
        item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]}),
        item({"type": "token_count", "info": None}, "event_msg"),
    ]
    items = _items(write_jsonl("rollout.jsonl", lines))
    assert not [i.error for i in items if i.error]
    events = [i.event for i in items if not i.skipped]
    assert [(e.kind, e.tool_name) for e in events] == [
        ("goal", None),
        ("message", None),
        ("tool_call", "pytest"),
        ("tool_result", "pytest"),
        ("tool_call", "apply_patch"),
        ("tool_result", "apply_patch"),
        ("message", None),
    ]
    assert {e.session for e in events} == {sid} and events[0].goal_description == "run the tests"
    assert events[2].meta == {"cwd": "/Users/dev/homelab", "git_branch": "main", "repo": "homelab", "tool": "shell"}
    assert events[2].tool_args["command"] == "cd /repo && python -m pytest tests"
    skipped = Counter(i.skipped for i in items if i.skipped)
    assert skipped == {
        "session_meta": 1,
        "instructions": 2,
        "event_msg:user_message": 1,
        "turn_context": 1,
        "reasoning": 1,
        "event_msg:token_count": 1,
    }
    assert events[3].tool_error == "No module named pytest"
    assert events[5].tool_error is None and "Done!" in events[5].tool_result


def test_a_codex_rollout_without_its_session_meta_is_named_by_its_file(write_jsonl) -> None:
    """A lost first line costs that line only: the items after it are one session, named by the file."""
    line = {
        "timestamp": "2025-12-28T12:21:44Z",
        "type": "response_item",
        "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
    }
    items = _items(write_jsonl("rollout-x.jsonl", [line]))
    assert [i.event.kind for i in items] == ["goal", "message"] and items[0].event.session == "rollout-x"


def _call(run: str, n: int, program: str, command: str, error: str | None = None):
    from expengine.lifecycle.refine.environment import Call

    return Call(run=run, program=program, command=command, call_id=f"{run}/c{n}", result_id=f"{run}/r{n}", error=error)


def test_commands_are_generalised_over_paths_and_module_names() -> None:
    from expengine.lifecycle.refine.environment import generalised

    assert generalised("cd /testbed && ./tests/runtests.py auth_tests.test_validators -v 2", "tests/runtests.py") == (
        "./tests/runtests.py <module> -v 2"
    )
    assert generalised("bin/test sympy/core/tests/test_basic.py sympy/core/tests/test_expr.py", "bin/test") == (
        "bin/test <file>"
    )
    assert generalised("python -m pytest tests/test_x.py::test_y -q 2>&1 | tail -5", "pytest") == "pytest <file> -q"


def test_a_missing_program_rule_names_the_project_and_what_worked_instead() -> None:
    from expengine.lifecycle.refine.environment import environment_drafts

    calls = []
    for run in ("a", "b", "c"):
        calls += [
            _call(
                run, 0, "pytest", "python -m pytest sympy/core/tests/test_basic.py", "exit 1: No module named pytest"
            ),
            _call(run, 1, "ls", "ls bin"),
            _call(run, 2, "bin/test", f"bin/test sympy/{run}/tests/test_{run}.py"),
        ]
    calls.append(_call("d", 0, "bin/test", "bin/test sympy/d/tests/test_d.py", "exit 1: 1 failed"))
    drafts = {d.condition: d for d in environment_drafts(calls, "sympy/sympy", min_runs=3)}
    assert set(drafts) == {
        "To run the tests in sympy/sympy",
        "In sympy/sympy, pytest is not installed ('No module named pytest')",
    }
    tests = drafts["To run the tests in sympy/sympy"]
    assert tests.action == "bin/test <file>" and (tests.successes, tests.trials) == (3, 4)  # failing tests still ran
    missing = drafts["In sympy/sympy, pytest is not installed ('No module named pytest')"]
    assert missing.action == "run bin/test <file> instead" and missing.subject == "sympy/sympy"
    assert "a/c0" in missing.source_ids and "a/r2" in missing.source_ids
    # fewer runs than the support floor: no rule
    assert environment_drafts(calls[:3], "sympy/sympy", min_runs=3) == []


@pytest.mark.slow
def test_the_pytest_is_not_installed_rule_is_mined_from_sympy_runs_and_found_by_a_new_sympy_task(
    make_engine, tmp_path: Path
) -> None:
    runs = tmp_path / "sympy"
    for run in ("sympy__sympy-13091", "sympy__sympy-12419", "sympy__sympy-12489", "sympy__sympy-13480"):
        (runs / run).mkdir(parents=True)
        shutil.copy(SWE / "trajs" / run / f"{run}.traj.json", runs / run)
    engine = make_engine()
    engine.ingest([str(runs)])
    engine.compact()
    rules = [u for u in engine.units(status="active") if u["category"] == "environment"]
    assert any("pytest is not installed" in u["text"] and "bin/test <file>" in u["text"] for u in rules), rules
    # a task none of those runs did, asked as an agent starts it
    new_task = "[sympy/sympy] collect_factor_and_dimension does not detect equivalent dimensions in addition"
    answer = engine.query(new_task, k=10, budget=500, touch=False)
    assert "pytest is not installed" in answer.prompt and "bin/test <file>" in answer.prompt
    found = [h for h in answer.hits if h.category == "environment"]
    assert found and all(h.parts.similarity == 1.0 for h in found)  # found by the project's name
    # another project's task is not given sympy's environment by name
    other = engine.query("[django/django] UsernameValidator allows trailing newline", k=10, budget=500, touch=False)
    assert not [h for h in other.hits if h.category == "environment" and h.parts.similarity == 1.0]


def test_an_ended_runs_thoughts_and_long_outputs_settle_while_its_commands_and_errors_stay() -> None:
    from expengine.lifecycle.refine.environment import LONG_OUTPUT_CHARS, settled_ids

    def rec(id: str, kind: str, session: str = "done", **fields):
        return {"id": id, "kind": kind, "session": session, "state": "active", "text": "short", **fields}

    long = "x" * (LONG_OUTPUT_CHARS + 1)
    records = [
        rec("thought", "message", role="assistant"),
        rec("task", "message", role="user"),
        rec("listing", "tool_result", text=long),
        rec("traceback", "tool_result", text=long, tool_error=long),
        rec("short", "tool_result"),
        rec("command", "tool_call", text=long),
        rec("pinned", "tool_result", text=long, pinned=True),
        rec("live", "message", session="running", role="assistant"),
    ]
    assert settled_ids(records, {"done"}) == ["thought", "listing"]
