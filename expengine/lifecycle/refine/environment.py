"""What a coding agent learns about a project's environment, mined per project over its runs.

A tool schema cannot say that sympy has no pytest, that django's tests run with
`./tests/runtests.py <module>`, or that spotter's run with `mix test <file>`: only the runs in that
project show it. Rules per project:
- the test command that worked there, and the build command, generalised over paths, module names
  and test patterns;
- a program that is not installed there (its error recurs in several runs), with what the agent
  ran instead that worked.
The condition names the project, so a query from a task in that project finds them. Commands are
generalised (`bin/test <file>`, `npm test -- <pattern>`), never quoted with one run's paths. Every
agent whose tool is a shell is read alike: a record's program is what its command line runs
(`mix`, `pytest`), whatever the tool was called (Bash, exec_command, a bash block), and its
project is `meta.repo`, else the folder the session started in (`query.projects.project_of`).

Once a run has ended (with an outcome, or silent for `SESSION_SILENT`) and its project was mined, what it read is worth little: its thoughts and the
long outputs of its commands that worked (listings, files, test logs) go dormant (`settled_ids`),
reachable through `trace` and as evidence; its task, commands, errors and outcome stay.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from ...query.projects import project_of
from ...store.db import json_meta
from ...store.units import signature_of
from .inputs import ClusterInput
from .templates import Draft, wilson_lower_bound

_TEST_PROGRAM = re.compile(r"test|^(jest|vitest|rspec|phpunit|tox|nox|mocha|ava|karma)$", re.IGNORECASE)
_BUILD_PROGRAM = re.compile(r"^(make|cmake|ninja|tsc|webpack|gradle|gradlew|mvn|bazel)$")
_TEST_VERB = re.compile(r"^(test|test:[\w:-]+|pytest|jest|vitest|rspec)$")
_BUILD_VERB = re.compile(r"^(build|compile|assemble|build:[\w:-]+|package)$")
# a name starts where a run of name characters does: tried from every character of a long run (a
# test log's), the pattern took seconds a command output
_MISSING = re.compile(
    r"No module named '?(?P<module>[\w.]+)'?"
    r"|(?<![\w./-])(?:(?P<command>[\w./-]+): command not found|(?P<found>[\w./-]+): not found)"
)
# a file: a path with an extension, or a bare name with a source file's extension (`app.tests` is a module)
_FILE = re.compile(
    r"^(?:[\w.@-]*/[\w.@/-]*\w\.[A-Za-z]{1,5}|[\w.@-]*\w\.(?:py|exs?|js|jsx|ts|tsx|rb|go|rs|java|kt|c|h|cc|cpp"
    r"|php|swift|scala|sh|json|ya?ml|toml|cfg|ini|md|rst|txt))(:\d+)*(::[\w\[\]-]+)*$"
)
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.\w+)+$")
_CD_PREFIX = re.compile(r"^\s*cd\s+\S+\s*(&&|;)\s*")
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
# flags whose value is a test name or pattern: `-k expr`, `-t "name"`, `--grep x`, `-run TestX`
_PATTERN_FLAGS = frozenset({"-k", "-t", "-m", "-g", "--grep", "-run", "--filter", "--only", "--testNamePattern"})
_STOP = frozenset({"&&", "||", "|", ";", ">", "2>&1", ">>"})
# a project rule holds when two sessions agree (min_support, when lower): one user's project may only
# ever have a few sessions, and one session proves nothing about the next
PROJECT_MIN_RUNS = 2
# a session silent this long has ended (Claude Code and Codex sessions report no outcome)
SESSION_SILENT = dt.timedelta(days=1)
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
    """Each (agent, project)'s commands in run order, with their results (by `meta.call_record`). A
    record without `meta.repo` takes its session's project from the shortest `meta.cwd` the session
    ran in (where it started: later commands may run in a subfolder)."""
    results = {}
    calls = []
    roots: dict[str, str] = {}
    for r in records:
        meta = json_meta(r.get("meta"))
        cwd = meta.get("cwd")
        if isinstance(cwd, str) and r.get("session") and len(cwd) < len(roots.get(r["session"], cwd + " ")):
            roots[r["session"]] = cwd
        if r["kind"] == "tool_result" and meta.get("call_record"):
            results[meta["call_record"]] = r
        elif r["kind"] == "tool_call":
            calls.append((r, meta))
    by_project: dict[tuple[str, str], list[Call]] = defaultdict(list)
    for call, meta in calls:
        repo = project_of({"repo": meta.get("repo"), "cwd": roots.get(call.get("session") or "", meta.get("cwd"))})
        if not repo:
            continue
        args = json_meta(call.get("tool_args"))
        result = results.get(call["id"])
        by_project[(call["agent"], repo)].append(
            Call(
                run=call.get("session") or call["id"],
                program=call["tool_name"],
                command=str(args.get("command") or "") if not isinstance(args.get("command"), list) else "",
                call_id=call["id"],
                result_id=result["id"] if result else None,
                error=result.get("tool_error") if result else None,
            )
        )
    return by_project


def _words(command: str, program: str) -> tuple[str, ...]:
    """The words of the first line's command that runs `program`, from the program on, up to a pipe,
    a redirection or the next command; () when the line does not run it."""
    stripped = command.strip()
    return _line_words(stripped.splitlines()[0] if stripped else "", program)


@functools.lru_cache(maxsize=4096)
def _line_words(line: str, program: str) -> tuple[str, ...]:
    """Kept: each command is asked whether it tests, whether it builds and how it generalises, and
    shlex is slow (most of a session start's precedent, without)."""
    line = _CD_PREFIX.sub("", line)
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    start = next(
        (
            i
            for i, w in enumerate(words)
            if (w.lstrip("./").endswith(program) or w == program) and not _ASSIGNMENT.match(w)
        ),
        None,
    )
    if start is None:
        return ()
    out = []
    for word in words[start:]:
        if word in _STOP or word.startswith(("|", ">", "2>")):
            break
        out.append(word)
    return tuple(out)


def _verbs(call: Call) -> list[str]:
    """The subcommand after the program, and the one a runner runs (`mix test` → [test]; `npm run build`
    → [run, build]); `find tests -name x` has none: its first word is an argument, not a subcommand."""
    words = [w for w in _words(call.command, call.program)[1:] if not w.startswith("-")]
    return words[:2] if words[:1] in (["run"], ["exec"], ["x"]) else words[:1]


def is_test_command(call: Call) -> bool:
    """`pytest`, `./tests/runtests.py`, `bin/test`, or a subcommand that runs tests (`mix test`,
    `npm test`, `npm run test:unit`, `cargo test`, `go test`, `bundle exec rspec`)."""
    return bool(_TEST_PROGRAM.search(call.program)) or any(_TEST_VERB.match(w) for w in _verbs(call))


def is_build_command(call: Call) -> bool:
    """`make`, `tsc`, or a subcommand that builds (`mix compile`, `npm run build`, `cargo build`)."""
    if is_test_command(call):
        return False
    return bool(_BUILD_PROGRAM.match(call.program)) or any(_BUILD_VERB.match(w) for w in _verbs(call))


def generalised(command: str, program: str) -> str:
    """`cd /testbed && ./tests/runtests.py auth_tests.test_validators -v 2` → `./tests/runtests.py <module> -v 2`;
    `MIX_ENV=test mix test test/foo_test.exs:12 2>&1` → `mix test <file>`; `npm test -- -t "adds"` →
    `npm test -- <pattern>`."""
    words = _words(command, program)
    if not words:
        return program
    out = [words[0]] if words[0] != "-m" else []
    pattern_value = False
    for word in words[1:]:
        if pattern_value:
            pattern_value = False
            continue
        if word in _PATTERN_FLAGS or word.split("=", 1)[0] in _PATTERN_FLAGS:
            pattern_value = "=" not in word
            token = "<pattern>"
        else:
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
                else "<pattern>"
                if " " in word
                else "<arg>"
            )
        if not (out and out[-1] == token and token.startswith("<")):
            out.append(token)
    return " ".join(out)


def _missing(error: str | None) -> re.Match[str] | None:
    """The pattern's match, looked for only where its fixed words are (a plain search is many times
    faster than the pattern's over a long output)."""
    if not error or ("not found" not in error and "No module named" not in error):
        return None
    return _MISSING.search(error)


def _missing_name(error: str | None) -> str | None:
    """The module or command an error says is not there, if it says so."""
    match = _missing(error)
    if not match:
        return None
    return match.group("module") or match.group("command") or match.group("found")


def _missing_phrase(error: str | None) -> str:
    match = _missing(error)
    return match.group(0) if match else ""


def _command_rule(calls: list[Call], repo: str, condition: str, *, min_runs: int) -> Draft | None:
    """The generalised form of `calls` used in the most runs, when that is at least `min_runs`. A
    command "works" when it ran: failing tests are a test run's job; a missing program is no run."""
    by_form: dict[str, list[Call]] = defaultdict(list)
    for call in calls:
        if call.result_id and _missing_name(call.error) is None:
            by_form[generalised(call.command, call.program)].append(call)
    if not by_form:
        return None
    form, used = max(by_form.items(), key=lambda kv: (len({c.run for c in kv[1]}), kv[0]))
    runs = {c.run for c in used}
    if len(runs) < min_runs:
        return None
    passed = {c.run for c in used if not c.error}
    return _draft(repo, condition, form, used, successes=len(passed), trials=len(runs))


def test_condition(repo: str) -> str:
    return f"To run the tests in {repo}"


def environment_drafts(calls: list[Call], repo: str, *, min_runs: int) -> list[Draft]:
    """The project's test-command and build-command rules and its missing-program rules, each seen in
    at least `min_runs` runs."""
    drafts = [
        draft
        for draft in (
            _command_rule([c for c in calls if is_test_command(c)], repo, test_condition(repo), min_runs=min_runs),
            _command_rule([c for c in calls if is_build_command(c)], repo, f"To build {repo}", min_runs=min_runs),
        )
        if draft is not None
    ]
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
    tester = any(is_test_command(c) for c in failures)
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
            if after_failure and call.program != program and (not tester or is_test_command(call)):
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


def calls_cluster(key: str, agent: str, calls: list["Call"], resolved: set[str]) -> ClusterInput:
    """A project's commands as one cluster, whose signature changes when a command, its result or its
    run's outcome does (so the rules are rewritten only then)."""
    signature = signature_of([f"{c.call_id}:{c.error is None}:{c.run in resolved}" for c in calls])
    return ClusterInput(key, agent, signature, [c.call_id for c in calls])
