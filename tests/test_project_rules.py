"""Project rules for every coding agent: found by the project's name as a user says it, keeping the
command line a shell tool ran, kept only where they hold on other runs, and no unit that restates a tool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_coding_agents import _assistant, _claude_line

from expengine.lifecycle.refine.environment import (
    Call,
    environment_drafts,
    generalised,
    is_build_command,
    is_test_command,
)
from expengine.lifecycle.refine.fixes import fix_drafts
from expengine.query.projects import named_projects, project_of

PROJECTS = {"django/django", "sympy/sympy", "spotter", "acme/tools", "other/tools"}


@pytest.mark.parametrize(
    ("text", "explicit", "found"),
    [
        ("[django/django] Fix the validator", None, {"django/django"}),
        ("[django] Fix the validator", None, {"django/django"}),
        ("[Django] Fix the validator", None, {"django/django"}),
        ("how do I run the tests in django?", None, {"django/django"}),
        ("tests fail in /home/u/src/django after the upgrade", None, {"django/django"}),
        ("how do I run the tests", "django", {"django/django"}),
        ("how do I run the tests", "/home/u/src/sympy", {"sympy/sympy"}),
        ("how do I run the tests", "/home/u/spotter-worktrees/spotter-gqc", {"spotter"}),
        ("[spotter] mix test fails", None, {"spotter"}),
        # a short name two projects share names neither; the full name still does
        ("[tools] build it", None, set()),
        ("[acme/tools] build it", None, {"acme/tools"}),
        # a name inside a word or a path's middle word is no project
        ("django_extensions is missing", None, set()),
        ("how do I run the tests in this repo", None, set()),
    ],
)
def test_a_query_names_a_project_as_a_user_would(text: str, explicit: str | None, found: set[str]) -> None:
    assert named_projects(text, PROJECTS, explicit) == found


def test_a_project_comes_from_the_repository_else_the_folder_the_session_ran_in() -> None:
    assert project_of({"repo": "django/django", "cwd": "/testbed"}) == "django/django"
    assert project_of({"cwd": "/home/u/src/spotter"}) == "spotter"
    assert project_of({"cwd": "/home/USER/projects/spotter-worktrees/spotter-fum/assets"}) == "spotter"
    assert project_of({"cwd": "/home/u/src/app/.worktrees/feature-x"}) == "app"
    assert project_of({}) is None and project_of({"cwd": "/"}) is None


@pytest.mark.parametrize(
    ("command", "program", "form"),
    [
        ("mix test test/spotter_web/live/session_live_test.exs 2>&1", "mix", "mix test <file>"),
        ("mix test test/foo_test.exs:12", "mix", "mix test <file>"),
        ("cd /home/u/app && MIX_ENV=test mix test", "mix", "mix test"),
        ('npm test -- -t "adds two numbers"', "npm", "npm test -- <pattern>"),
        ("npm run build 2>&1 | tail -20", "npm", "npm run build"),
        ("python -m pytest tests/test_x.py -k 'slow and not db' -q", "pytest", "pytest <file> <pattern> -q"),
        ("cargo test --lib parser::tests", "cargo", "cargo test --lib <arg>"),
    ],
)
def test_a_shell_command_keeps_its_normalised_command_line(command: str, program: str, form: str) -> None:
    assert generalised(command, program) == form


def _call(run: str, n: int, program: str, command: str, error: str | None = None) -> Call:
    return Call(run=run, program=program, command=command, call_id=f"{run}/c{n}", result_id=f"{run}/r{n}", error=error)


def test_a_shells_test_and_build_commands_make_the_projects_rules() -> None:
    calls = []
    for run in ("s1", "s2"):
        calls += [
            _call(run, 0, "mix", f"mix test test/{run}_test.exs 2>&1", "Exit code 2\n1 test, 1 failure"),
            _call(run, 1, "mix", "mix compile --warnings-as-errors"),
            _call(run, 2, "git", "git status"),
        ]
    drafts = {d.condition: d.action for d in environment_drafts(calls, "spotter", min_runs=2)}
    assert drafts == {
        "To run the tests in spotter": "mix test <file>",
        "To build spotter": "mix compile --warnings-as-errors",
    }
    assert not is_build_command(_call("x", 0, "make", "make test"))
    # a program whose first argument is a tests folder runs no tests
    assert not is_test_command(_call("x", 0, "find", "find tests -name '*.py'"))
    assert is_test_command(_call("x", 0, "bundle", "bundle exec rspec spec/models"))
    assert is_test_command(_call("x", 0, "npm", "npm run test:unit"))


def test_a_program_not_installed_is_found_after_a_long_output_in_linear_time() -> None:
    """The error comes last, after a test log's long runs of name characters (which the pattern once
    tried from each character of: 20,000 took 47 s)."""
    listing = "tests/" + "a" * 200_000 + "\n"
    calls = [
        c
        for run in ("s1", "s2")
        for c in (
            _call(run, 0, "pytest", "pytest -q", listing + "bash: pytest: command not found"),
            _call(run, 1, "python", "python -m pytest -q", "3 passed"),
        )
    ]
    drafts = {d.condition: d.action for d in environment_drafts(calls, "demo", min_runs=2)}
    assert drafts["In demo, pytest is not installed ('pytest: command not found')"].startswith("run python ")


SETTINGS = "django.core.exceptions.ImproperlyConfigured: Requested setting S_{n}, but settings are not configured."


def test_a_projects_fix_rule_is_kept_only_where_it_holds_on_the_runs_it_was_not_mined_from() -> None:
    def runs(nexts: list[str]) -> list[Call]:
        calls = []
        for n, following in enumerate(nexts):
            run = f"r{n}"
            calls += [
                _call(run, 0, "python", f"python repro_{n}.py", SETTINGS.format(n=n)),
                _call(run, 1, following, f"{following} x"),
            ]
        return calls

    # each run went on its own way: left out one at a time, the others never name what it did
    assert fix_drafts(runs(["cat", "grep", "sed", "ls"]), "django/django", resolved=set(), min_runs=2) == []
    # two sessions that agree are enough
    [kept] = fix_drafts(runs(["cat", "cat"]), "django/django", resolved=set(), min_runs=2)
    assert kept.action.startswith("next run cat")
    # one session proves nothing about the next
    assert fix_drafts(runs(["cat"]), "django/django", resolved=set(), min_runs=1) == []


def _line(session: str, uuid: str, kind: str, cwd: str, **fields) -> dict:
    return _claude_line(uuid, kind, cwd=cwd, sessionId=session, **fields)


def _claude_session(session: str, cwd: str, test_file: str, runner: str = "mix test") -> list[dict]:
    """A Claude Code session that reads a file, runs `mix test` (or `runner`) through Bash and narrates the
    result."""

    def use(uuid: str, call_id: str, name: str, args: dict) -> dict:
        block = {"type": "tool_use", "id": call_id, "name": name, "input": args}
        return _line(session, uuid, "assistant", cwd, message=_assistant([block]))

    def result(uuid: str, call_id: str, text: str, error: bool = False) -> dict:
        block = {"tool_use_id": call_id, "type": "tool_result", "content": text, "is_error": error}
        return _line(session, uuid, "user", cwd, message={"role": "user", "content": [block]})

    def say(uuid: str, text: str) -> dict:
        return _line(session, uuid, "assistant", cwd, message=_assistant([{"type": "text", "text": text}]))

    bash = {"command": f"{runner} {test_file} 2>&1", "description": "Run the tests"}
    return [
        _line(session, f"{session}-u", "user", cwd, message={"role": "user", "content": "fix the live view"}),
        use(f"{session}-1", f"{session}-t1", "Read", {"file_path": f"{cwd}/lib/spotter_web/live.ex"}),
        result(f"{session}-2", f"{session}-t1", "defmodule SpotterWeb.Live do\n  use Phoenix.LiveView\nend"),
        use(f"{session}-3", f"{session}-t2", "Bash", bash),
        result(f"{session}-4", f"{session}-t2", "Exit code 2\n12 tests, 1 failure", error=True),
        say(f"{session}-5", "One test fails: the assign is missing. Let me fix it."),
        use(f"{session}-6", f"{session}-t3", "Bash", bash),
        result(f"{session}-7", f"{session}-t3", "Finished in 0.4 seconds\n12 tests, 0 failures"),
        say(f"{session}-8", "All 84 tests pass. Let me also run the formatter to make sure nothing else changed."),
    ]


@pytest.mark.slow
def test_claude_code_sessions_learn_their_projects_test_command_and_answer_how_to_run_the_tests(
    make_engine, write_jsonl
) -> None:
    files = [
        write_jsonl(f"{sid}.jsonl", _claude_session(sid, f"/home/u/projects/spotter-worktrees/spotter-{sid}", test))
        for sid, test in (("aa1", "test/spotter_web/live/a_test.exs"), ("bb2", "test/spotter/b_test.exs:12"))
    ]
    engine = make_engine()
    engine.ingest(files, fmt="claude-code")
    engine.compact()
    units = engine.units(status="active")
    environment = [u["text"] for u in units if u["category"] == "environment"]
    assert any(t.startswith("To run the tests in spotter: mix test <file>.") for t in environment), environment
    # no unit restates a tool ("To Read (Read): call Read(file_path=…)", "To mix (mix): call mix(command=…)")
    assert not [u["text"] for u in units if u["text"].startswith(("To Read (Read)", "To mix (mix)"))]
    for text, project in (
        ("how do I run the tests in this repo", None),
        ("how do I run the tests in spotter", None),
        ("how do I run the tests", "/home/u/projects/spotter-worktrees/spotter-aa1"),
    ):
        answer = engine.query(text, k=5, budget=500, touch=False, project=project)
        assert answer.hits and answer.hits[0].category == "environment", [h.text for h in answer.hits]
        assert "mix test <file>" in answer.prompt


@pytest.mark.slow
def test_a_short_name_finds_the_projects_rules_like_the_full_name(make_engine, tmp_path: Path) -> None:
    runs = tmp_path / "trajs"
    for n in range(3):
        instance = f"django__django-{1000 + n}"
        messages = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": f"<pr_description>\nTask {n}: the validator\n</pr_description>"},
            {"role": "assistant", "content": f"THOUGHT: test.\n\n```bash\n./tests/runtests.py app_{n}.tests\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nOK\n</output>"},
        ]
        (runs / instance).mkdir(parents=True)
        doc = {"trajectory_format": "mini-swe-agent-1", "instance_id": instance, "messages": messages}
        (runs / instance / f"{instance}.traj.json").write_text(json.dumps(doc))
    engine = make_engine()
    engine.ingest([str(runs)], fmt="swe-agent")
    engine.compact()
    for text in ("[django/django] Fix the URL validator", "[django] Fix the URL validator", "[Django] Fix it"):
        answer = engine.query(text, k=10, budget=500, touch=False)
        assert "runtests.py <module>" in answer.prompt, text
    explicit = engine.query("Fix the URL validator", k=10, budget=500, touch=False, project="django")
    assert [h.parts.similarity for h in explicit.hits if h.category == "environment"] == [1.0]


@pytest.mark.slow
def test_a_query_naming_one_project_quotes_no_memory_of_another(make_engine, write_jsonl) -> None:
    """One store of two projects: "how do I run the tests in spotter" never shows gopher's `go test` calls
    nor its rules."""
    sessions = [("aa1", "spotter", "test/a_test.exs", "mix test"), ("bb2", "spotter", "test/b_test.exs", "mix test")]
    sessions += [("cc3", "gopher", "./...", "go test"), ("dd4", "gopher", "./cmd/...", "go test")]
    files = [
        write_jsonl(f"{sid}.jsonl", _claude_session(sid, f"/home/u/projects/{project}", test, runner))
        for sid, project, test, runner in sessions
    ]
    engine = make_engine()
    engine.ingest(files, fmt="claude-code")
    engine.compact()
    project_of_record = {
        rid: json.loads(meta)["cwd"].rsplit("/", 1)[-1]
        for rid, meta in engine.store.con.execute("SELECT id, meta FROM records WHERE meta LIKE '%cwd%'").fetchall()
    }
    for project, runner, other in (("spotter", "mix test", "gopher"), ("gopher", "go test", "spotter")):
        answer = engine.query(f"how do I run the tests in {project}", k=10, touch=False)
        assert answer.hits[0].category == "environment" and runner in answer.hits[0].text
        assert not [h.text for h in answer.hits if h.type == "memory" and project_of_record.get(h.id) == other]
        assert not [h.text for h in answer.hits if h.text.startswith(f"To run the tests in {other}")]
    unnamed = engine.query("go test", k=20, touch=False)  # a query that names no project keeps both
    assert {project_of_record.get(h.id) for h in unnamed.hits if h.type == "memory"} >= {"gopher"}
