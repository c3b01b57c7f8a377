"""Error → fix rules per coding project: what the agent ran next after an error, generalised.

A coding agent's errors recur per project: django's scripts fail with "settings are not configured"
until they configure settings, sympy's `python -m pytest` says "No module named pytest" until
`bin/test` runs. The cluster miner sees one tool's errors with instance text in them ("exit 2:
===== test session starts ====="); here every failed command of a project's runs is keyed by its
error's kind (`textutil.error_key`: paths, line numbers, addresses, test and module names made
placeholders), failures are grouped by (project, key), and the rule states what the agent ran next,
counted over the runs that were resolved first (what worked), over all runs when none was.

The condition names the project and the key is the unit's `attribute`, so a query "[repo] <error
tail>" finds the rule by that key (query/projects.py), never another project's; the action names
the next program and its generalised command (`sed -i <arg> <file>`), never one run's paths.

A project's rule is kept only where it holds on runs it was not mined from (`holds_elsewhere`): left
out one run at a time, the rule the other runs give must name what the left-out run ran next, in
most of them. A rule that only restates each run's own choice would steer a new run wrong (on
held-out SWE-bench runs, such rules lowered the error-step lift below that of the shared rules).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from ...query.projects import ERROR_ATTRIBUTE, RECOVERY
from ...textutil import error_key
from .environment import Call, generalised
from .templates import Draft, wilson_lower_bound

# their first word names what they do
_SUBCOMMANDS = (
    "git",
    "pip",
    "conda",
    "make",
    "tox",
    "npm",
    "yarn",
    "pnpm",
    "mix",
    "cargo",
    "go",
    "bundle",
    "dotnet",
    "uv",
)
MAX_ALTERNATIVES = 2  # other next programs named beside the main one, each seen in at least 2 runs
# share of left-out runs whose next program the other runs' rule names, for a project's rule to be kept
HOLDS_ELSEWHERE = 0.5


@dataclass
class Failure:
    """A failed command, the command run after it in the same run, whether the failing program later
    ran without error in that run, and whether the run was resolved."""

    failed: Call
    following: Call
    rerun_worked: bool
    resolved: bool


def failures_by_key(calls: list[Call], resolved: set[str]) -> dict[str, list[Failure]]:
    """A project's failed commands that were followed by another, grouped by their error's key."""
    by_run: dict[str, list[Call]] = defaultdict(list)
    for call in calls:
        by_run[call.run].append(call)
    groups: dict[str, list[Failure]] = defaultdict(list)
    for run, run_calls in by_run.items():
        for position, (failed, following) in enumerate(zip(run_calls, run_calls[1:])):
            key = error_key(failed.error) if failed.error else ""
            if key:
                later = run_calls[position + 1 :]
                rerun = any(c.program == failed.program and not c.error for c in later)
                groups[key].append(Failure(failed, following, rerun, run in resolved))
    return groups


def fix_drafts(calls: list[Call], repo: str, *, resolved: set[str], min_runs: int) -> list[Draft]:
    """One rule per error key seen in at least `min_runs` runs of the project that holds on runs it was
    not mined from (`holds_elsewhere`): what was run next."""
    return [
        _rule(key, failures, subject=repo, where=f"In {repo}")
        for key, failures in sorted(failures_by_key(calls, resolved).items())
        if len({f.failed.run for f in failures}) >= min_runs and holds_elsewhere(failures)
    ]


def _ranked_next(basis: list[Failure]) -> list[tuple[str, set[str]]]:
    """The programs run next after the failures of `basis`, each with its runs, most runs first."""
    runs: dict[str, set[str]] = defaultdict(set)
    for f in basis:
        runs[f.following.program].add(f.following.run)
    return sorted(runs.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def holds_elsewhere(failures: list[Failure]) -> bool:
    """Leave one run out: does the rule mined from the other runs name a program the left-out run ran
    next after this error? True when it does for at least `HOLDS_ELSEWHERE` of the runs, and two."""
    by_run: dict[str, list[Failure]] = defaultdict(list)
    for f in failures:
        by_run[f.failed.run].append(f)
    hits = 0
    for run, own in by_run.items():
        others = [f for f in failures if f.failed.run != run]
        ranked = _ranked_next([f for f in others if f.resolved] or others)
        hits += bool(ranked) and ranked[0][0] in {f.following.program for f in own}
    return hits >= 2 and hits >= HOLDS_ELSEWHERE * len(by_run)


def shared_fix_drafts(by_project: dict[str, list[Call]], *, resolved: set[str], min_runs: int) -> list[Draft]:
    """One rule per error key seen in at least `min_runs` runs of two or more projects: what a project
    with too few runs of its own to have the rule is told (query/projects.py asks for its own first)."""
    merged: dict[str, list[Failure]] = defaultdict(list)
    projects: dict[str, list[str]] = defaultdict(list)
    for repo, calls in sorted(by_project.items()):
        for key, failures in failures_by_key(calls, resolved).items():
            merged[key] += failures
            projects[key].append(repo)
    drafts = []
    for key, failures in sorted(merged.items()):
        seen = projects[key]
        if len(seen) < 2 or len({f.failed.run for f in failures}) < min_runs:
            continue
        named = ", ".join(seen[:3]) + (f" and {len(seen) - 3} more" if len(seen) > 3 else "")
        drafts.append(_rule(key, failures, subject=None, where=f"In any project (seen in {named})"))
    return drafts


def command_form(command: str, program: str) -> str:
    """A next command with nothing of one run's in it: `cat <<'EOF' > <file>` (a file rewritten),
    `grep -n <arg> <file>`, `git diff`; flags, placeholders and a subcommand stay, search words go."""
    if re.search(rf"(?:^|[;&|]\s*){re.escape(program)}\b[^;&|\n]*<<", command):
        return (
            f"{program} <<'EOF' > <file>" if ">" in command.split("<<", 1)[1].splitlines()[0] else f"{program} <<'EOF'"
        )
    words = generalised(command, program).split()
    kept = words[:1] + (words[1:2] if program in _SUBCOMMANDS else [])
    for word in words[len(kept) :]:
        token = word if word.startswith(("-", "<")) else "<arg>"
        if not (kept and kept[-1] == token and token.startswith("<")):
            kept.append(token)
    return " ".join(kept)


def _rule(key: str, failures: list[Failure], *, subject: str | None, where: str) -> Draft:
    """The rule for one error key: the program the resolved runs ran next (all runs when none was
    resolved), its generalised command, the others seen in two runs or more, then the failing program
    when most of those runs ran it again without error."""
    runs = {f.failed.run for f in failures}
    basis = [f for f in failures if f.resolved] or failures
    ranked = _ranked_next(basis)
    program, program_runs = ranked[0]
    forms = Counter(command_form(f.following.command, program) for f in basis if f.following.program == program)
    others = [p for p, r in ranked[1:] if len(r) >= 2][:MAX_ALTERNATIVES]
    failing = Counter(f.failed.program for f in failures).most_common(1)[0][0]
    resolved_runs = {f.failed.run for f in failures if f.resolved}
    action = f"next run {forms.most_common(1)[0][0]} ({len(program_runs)} of {len({f.failed.run for f in basis})} runs)"
    if others:
        action += f"; other runs went on with {' or '.join(others)}"
    if program != failing and 2 * sum(f.rerun_worked for f in basis) > len(basis):
        action += f"; then rerun {failing}"
    return Draft(
        kind="rule",
        category=RECOVERY,
        subject=subject,
        attribute=ERROR_ATTRIBUTE + key,
        source_ids=list(dict.fromkeys(i for f in failures for i in (f.failed.call_id, f.failed.result_id) if i)),
        condition=f"{where}, when {failing} fails with '{key}'",
        action=action,
        successes=len(resolved_runs),
        trials=len(runs),
        success_rate=len(resolved_runs) / len(runs),
        confidence=wilson_lower_bound(len(resolved_runs), len(runs)),
        dated=False,
    )
