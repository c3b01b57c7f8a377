"""Error → fix rules per coding project (refine's fixes.py): errors keyed by their kind, grouped per
project, the next program stated, and found by a later task's error query in that project only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import DJANGO_SETTINGS_ERROR as SETTINGS
from helpers import swe_script_fixes

from expengine.textutil import ERROR_TAIL_CHARS, error_key


@pytest.mark.parametrize(
    ("error", "key"),
    [
        (
            'Traceback (most recent call last):\n  File "/testbed/t.py", line 3, in <module>\n'
            "ModuleNotFoundError: No module named 'reproduce_app'",
            "ModuleNotFoundError: No module named <name>",
        ),
        (
            "exit 1: /opt/miniconda3/envs/testbed/bin/python3: No module named pytest",
            "python -m: No module named <module>",
        ),
        ("exit 127: bash: line 1: pytest: command not found", "<command>: command not found"),
        (
            '  File "/testbed/django/core/management/base.py", line 73\n    def add(self):\n'
            "IndentationError: expected an indented block after 'else' statement on line 71",
            "IndentationError: expected an indented block after <name> statement on line N",
        ),
        ("=========== 1 failed, 7 warnings in 0.42s ===========", "tests failed"),
        ("exit 1", "exit 1 with no output"),
        ("exit 2: ls: cannot access 'django/tests/migrations': No such file or directory", "No such file or directory"),
        ("RuntimeError: object at 0x730aa9c6eda0 is gone", "RuntimeError: object at <address> is gone"),
        ("", ""),
    ],
)
def test_an_error_is_keyed_by_its_kind_with_its_variable_parts_named(error: str, key: str) -> None:
    assert error_key(error) == key


def test_the_key_is_read_from_the_tail_a_query_carries() -> None:
    long = SETTINGS.format(n=1, line=12, setting="INSTALLED_APPS")
    other = SETTINGS.format(n=22, line=3, setting="DATABASES")
    assert len(long) > ERROR_TAIL_CHARS
    # two runs' errors, and the query's tail of one, have one key: no path, line, or setting in it
    assert error_key(long) == error_key(other) == error_key(long[-ERROR_TAIL_CHARS:])
    assert not any(word in error_key(long) for word in ("reproduce", "INSTALLED_APPS", "12"))


def _call(run: str, n: int, program: str, command: str, error: str | None = None):
    from expengine.lifecycle.refine.environment import Call

    return Call(run=run, program=program, command=command, call_id=f"{run}/c{n}", result_id=f"{run}/r{n}", error=error)


def test_a_fix_rule_names_the_project_the_error_kind_and_the_program_run_next() -> None:
    from expengine.lifecycle.refine.fixes import fix_drafts

    calls = []
    for n, run in enumerate(("a", "b", "c", "d")):
        calls += [
            _call(run, 0, "python", f"python reproduce_{run}.py", SETTINGS.format(n=n, line=n + 3, setting=f"S_{n}")),
            # runs a-c (resolved) rewrote the script; d (unresolved) reran it unchanged
            _call(run, 1, "cat", f"cat <<'EOF' > reproduce_{run}.py") if run != "d" else _call(run, 1, "python", "x"),
            _call(run, 2, "python", f"python reproduce_{run}.py"),
        ]
    [draft] = fix_drafts(calls, "django/django", resolved={"a", "b", "c"}, min_runs=3)
    assert draft.category == "recovery" and draft.subject == "django/django"
    assert draft.attribute == "error: " + error_key(calls[0].error)
    assert draft.condition.startswith("In django/django, when python fails with '")
    # what the resolved runs did next, generalised; then the failing program again
    assert draft.action == "next run cat <<'EOF' > <file> (3 of 3 runs); then rerun python"
    assert (draft.successes, draft.trials) == (3, 4)
    assert "reproduce_a" not in draft.action + draft.condition and "a/c0" in draft.source_ids
    # fewer runs than the support floor: no rule
    assert fix_drafts(calls[:6], "django/django", resolved={"a", "b"}, min_runs=3) == []


@pytest.mark.parametrize(
    ("command", "program", "form"),
    [
        ("cd /testbed && cat <<'EOF' > reproduce_bug.py\nimport django\nEOF", "cat", "cat <<'EOF' > <file>"),
        ("grep -rn 'def separability' astropy/modeling | head -5", "grep", "grep -rn <pattern> <path>"),
        ("grep dmp_one_p sympy/polys/densebasic.py", "grep", "grep <arg> <file>"),
        ("git diff sympy/core/basic.py", "git", "git diff <file>"),
        ("mkdir -p app && cat <<'EOF' > app/models.py\nEOF", "mkdir", "mkdir -p <arg>"),
        ("sed -i 's/old/new/' django/db/models/query.py", "sed", "sed -i <path> <file>"),
    ],
)
def test_a_next_command_keeps_its_program_flags_and_placeholders_only(command: str, program: str, form: str) -> None:
    from expengine.lifecycle.refine.fixes import command_form

    assert command_form(command, program) == form


@pytest.mark.slow
def test_a_projects_fix_rule_is_mined_and_found_by_its_next_error_query_only(make_engine, tmp_path: Path) -> None:
    runs, report = swe_script_fixes(
        tmp_path / "trajs",
        tmp_path / "report.json",
        first=1000,
        count=4,
        task="Task {n}: the validator rejects names with trailing spaces",
        test_step=True,
        resolved=lambda n: True,
    )
    engine = make_engine()
    engine.ingest([runs], fmt="swe-agent", outcomes=[report])
    engine.compact()
    rules = {u["subject"]: u for u in engine.units(status="active") if u["category"] == "recovery"}
    assert set(rules) == {"django/django", "sympy/sympy", None}, rules
    assert [u["subject"] for u in engine.units(status="active") if u["category"] == "environment"]
    assert rules[None]["text"].startswith("In any project (seen in django/django, sympy/sympy), when python fails")
    assert "next run cat" in rules["django/django"]["text"] and "next run grep" in rules["sympy/sympy"]["text"]
    # a new django task's script fails the same way, with its own path, line and setting
    error = SETTINGS.format(n=77, line=9, setting="AUTH_USER_MODEL")[-ERROR_TAIL_CHARS:]
    answer = engine.query(f"[django/django] {error}", k=10, budget=500, touch=False)

    def keyed(result):
        return [h.id for h in result.hits if h.category == "recovery" and h.parts.similarity == 1.0]

    assert keyed(answer) == [rules["django/django"]["id"]] and "next run cat" in answer.prompt
    # the error's rule comes first; the project's test command counts as first in one list beside it
    whole = engine.query(f"[django/django] {error}", k=50, budget=None, touch=False)
    order = [h.category for h in whole.hits]
    assert "environment" in order and order.index("recovery") < order.index("environment")
    assert {h.parts.similarity for h in whole.hits if h.category == "environment" and "django/" in h.text} == {0.5}
    task = engine.query("[django/django] Fix the validator", k=10, budget=500, touch=False)
    assert [h.parts.similarity for h in task.hits if h.category == "environment"] == [1.0]
    # another project with the same error gets its own rule; one with no rule of its own the shared one
    sympy = engine.query(f"[sympy/sympy] {error}", k=10, budget=500, touch=False)
    assert keyed(sympy) == [rules["sympy/sympy"]["id"]]
    other = engine.query(f"[astropy/astropy] {error}", k=10, budget=500, touch=False)
    assert keyed(other) == [rules[None]["id"]]
    # another error in django finds no rule by key
    unrelated = engine.query("[django/django] exit 2: grep: Unmatched ( or \\(", k=10, budget=500, touch=False)
    assert keyed(unrelated) == []


def test_a_coding_projects_shell_errors_make_no_rule_quoting_one_run() -> None:
    """The cluster miner would write "When python fails with 'exit 1: Original pw: …'"; fixes.py keys
    those errors per project instead. Outside coding projects the cluster's error rule stays."""
    import datetime as dt

    from expengine.lifecycle.refine.mine import mine_cluster
    from expengine.lifecycle.refine.templates import rule_draft

    def records(meta: dict) -> list[dict]:
        out = []
        for n in range(3):
            ts = dt.datetime(2026, 1, 1, 0, n)
            common = {"agent": "default", "session": f"run{n}", "ts": ts, "category": "error", "meta": json.dumps(meta)}
            out.append({**common, "id": f"c{n}", "kind": "tool_call", "tool_name": "python",
                        "tool_args": json.dumps({"command": f"python reproduce_{n}.py"})})  # fmt: skip
            out.append({**common, "id": f"r{n}", "kind": "tool_result", "tool_name": "python",
                        "tool_error": f"exit 1: Original pw: Piecewise((x, x < {n}))"})  # fmt: skip
        return out

    assert rule_draft(mine_cluster(records({"repo": "sympy/sympy"}))) is None
    kept = rule_draft(mine_cluster(records({})))
    assert kept is not None and "fails with" in (kept.condition or "")
