"""What a coding agent learns about a project's environment, mined per repository over its runs.

A tool schema cannot say that sympy has no pytest, or that django's tests run with
`./tests/runtests.py <module>`: only the runs in that repository show it. Two rules per project:
- the test command that worked there, generalised over paths and module names;
- a program that is not installed there (its error recurs in several runs), with what the agent
  ran instead that worked.
The condition names the repository, so a query from a task in that project finds them. Commands are
generalised (`bin/test <file>`), never quoted with one run's paths.

Once a run has ended and its project was mined, what it read is worth little: its thoughts and the
long outputs of its commands that worked (listings, files, test logs) go dormant (`settled_ids`),
reachable through `trace` and as evidence; its task, commands, errors and outcome stay.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from ...store.db import json_meta
from .templates import Draft, wilson_lower_bound

_TEST_PROGRAM = re.compile(r"test", re.IGNORECASE)
_MISSING = re.compile(
    r"No module named '?(?P<module>[\w.]+)'?|(?P<command>[\w./-]+): command not found|(?P<found>[\w./-]+): not found"
)
_FILE = re.compile(r"^[\w./-]+\.py(::[\w\[\]-]+)*$")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.\w+)+$")
_CD_PREFIX = re.compile(r"^\s*cd\s+\S+\s*(&&|;)\s*")
# a command's output longer than this is reading material, not a lesson, once the run has ended
LONG_OUTPUT_CHARS = 400


@dataclass
class Call:
    """One command of one run and how it ended."""

    run: str
    program: str
    command: str
    call_id: str
    result_id: str | None
    error: str | None


def project_calls(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[Call]]:
    """Each (agent, repository)'s commands in run order, with their results (by `meta.call_record`)."""
    results = {}
    calls = []
    for r in records:
        meta = json_meta(r.get("meta"))
        if r["kind"] == "tool_result" and meta.get("call_record"):
            results[meta["call_record"]] = r
        elif r["kind"] == "tool_call" and meta.get("repo"):
            calls.append((r, meta["repo"]))
    by_project: dict[tuple[str, str], list[Call]] = defaultdict(list)
    for call, repo in calls:
        args = json_meta(call.get("tool_args"))
        result = results.get(call["id"])
        by_project[(call["agent"], repo)].append(
            Call(
                run=call.get("session") or call["id"],
                program=call["tool_name"],
                command=str(args.get("command") or ""),
                call_id=call["id"],
                result_id=result["id"] if result else None,
                error=result.get("tool_error") if result else None,
            )
        )
    return by_project


def generalised(command: str, program: str) -> str:
    """`cd /testbed && ./tests/runtests.py auth_tests.test_validators -v 2` → `./tests/runtests.py <module> -v 2`."""
    command = _CD_PREFIX.sub("", command.strip().splitlines()[0] if command.strip() else "")
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    start = next((i for i, w in enumerate(words) if w.lstrip("./").endswith(program) or w == program), None)
    if start is None:
        return program
    out = [words[start]] if words[start] != "-m" else []
    for word in words[start + 1 :]:
        if word in ("&&", "||", "|", ";", ">", "2>&1") or word.startswith(("|", ">")):
            break
        token = (
            word
            if word.startswith("-") or word.isdigit()
            else "<file>"
            if _FILE.match(word)
            else "<module>"
            if _MODULE.match(word)
            else "<path>"
            if "/" in word
            else word
            if word.isidentifier() and len(word) <= 12
            else "<arg>"
        )
        if not (out and out[-1] == token and token.startswith("<")):
            out.append(token)
    return " ".join(out)


def _missing_name(error: str | None) -> str | None:
    """The module or command an error says is not there, if it says so."""
    match = _MISSING.search(error or "")
    if not match:
        return None
    return match.group("module") or match.group("command") or match.group("found")


def _missing_phrase(error: str | None) -> str:
    match = _MISSING.search(error or "")
    return match.group(0) if match else ""


def environment_drafts(calls: list[Call], repo: str, *, min_runs: int) -> list[Draft]:
    """The project's test-command rule and its missing-program rules, each seen in at least `min_runs` runs."""
    drafts = []
    tests = [c for c in calls if _TEST_PROGRAM.search(c.program) and c.result_id]
    # a test command "works" when it ran: failing tests are its job; a missing program is not
    ran = [c for c in tests if _missing_name(c.error) is None]
    by_form: dict[str, list[Call]] = defaultdict(list)
    for call in ran:
        by_form[generalised(call.command, call.program)].append(call)
    if by_form:
        form, used = max(by_form.items(), key=lambda kv: (len({c.run for c in kv[1]}), kv[0]))
        runs = {c.run for c in used}
        passed = {c.run for c in used if not c.error}
        if len(runs) >= min_runs:
            drafts.append(
                _draft(
                    repo,
                    f"To run the tests in {repo}",
                    form,
                    used,
                    successes=len(passed),
                    trials=len(runs),
                )
            )
    missing: dict[str, list[Call]] = defaultdict(list)
    for call in calls:
        name = _missing_name(call.error)
        if name and call.program != "python":
            missing[call.program].append(call)
    for program, failures in sorted(missing.items()):
        runs = {c.run for c in failures}
        if len(runs) < min_runs:
            continue
        phrase = Counter(_missing_phrase(c.error) for c in failures).most_common(1)[0][0]
        instead = _what_worked_instead(calls, failures, program)
        if instead is None:
            continue
        form, after = instead
        worked = {c.run for c in after if not c.error}
        drafts.append(
            _draft(
                repo,
                f"In {repo}, {program} is not installed ('{phrase}')",
                f"run {form} instead",
                failures + after,
                successes=len(worked),
                trials=len({c.run for c in after}),
                pitfall=f"do not call {program} there",
            )
        )
    return drafts


def _what_worked_instead(calls: list[Call], failures: list[Call], program: str) -> tuple[str, list[Call]] | None:
    """The command each failing run ran next in the failed one's place (a test runner for a test runner)."""
    failed_ids = {c.call_id for c in failures}
    tester = bool(_TEST_PROGRAM.search(program))
    by_run: dict[str, list[Call]] = defaultdict(list)
    for call in calls:
        by_run[call.run].append(call)
    forms: dict[str, list[Call]] = defaultdict(list)
    for run_calls in by_run.values():
        after_failure = False
        for call in run_calls:
            if call.call_id in failed_ids:
                after_failure = True
                continue
            if after_failure and call.program != program and (not tester or _TEST_PROGRAM.search(call.program)):
                if _missing_name(call.error) is None:
                    forms[generalised(call.command, call.program)].append(call)
                    break
    if not forms:
        return None
    return max(forms.items(), key=lambda kv: (len({c.run for c in kv[1]}), kv[0]))


def _draft(
    repo: str,
    condition: str,
    action: str,
    evidence: list[Call],
    *,
    successes: int,
    trials: int,
    pitfall: str | None = None,
) -> Draft:
    source_ids = list(dict.fromkeys(i for c in evidence for i in (c.call_id, c.result_id) if i))
    return Draft(
        kind="rule",
        category="environment",
        subject=repo,  # the query names the project: query/projects.py finds its rules by it
        source_ids=source_ids,
        condition=condition,
        action=action,
        pitfall=pitfall,
        successes=successes,
        trials=trials,
        success_rate=successes / trials if trials else None,
        confidence=wilson_lower_bound(successes, trials),
        dated=False,
    )


def settled_ids(records: Iterable[dict[str, Any]], ended: set[str]) -> list[str]:
    """Active records of ended runs that go dormant: the agent's thoughts and long outputs that were
    no error. Pinned, protected and high-importance records stay."""
    return [
        r["id"]
        for r in records
        if r.get("session") in ended
        and r.get("state") == "active"
        and not r.get("pinned")
        and not r.get("protected")
        and (
            (r["kind"] == "message" and r.get("role") == "assistant")
            or (r["kind"] == "tool_result" and not r.get("tool_error") and len(r.get("text") or "") > LONG_OUTPUT_CHARS)
        )
    ]
