"""Deterministic mining of one cluster: what a rule or fact may claim, counted from the records.

Everything a unit says comes from here (tools, argument names and recurring values, errors and what
followed them, outcome counts, user corrections, facts with subject / attribute / as_of); the model
only words it, and grounding checks the wording against these records. Per record, facts.py finds
the patterned statements; recovery.py names an error's variable parts and follows what the agent
did after it; this module counts them over the cluster.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from .facts import FactStatement, extract_facts, speaker_and_text
from .recovery import (
    SCRATCHPAD_TOOLS,
    ErrorPattern,
    RecoveryPath,
    error_shape,
    followup,
    generalise,
    recovery_path,
    tool_arguments,
)
from .wording import CLEAR_SHARE, ENGLISH, Wording, wording_for

TOOL_KINDS = ("tool_call", "tool_result")
LESSON_CATEGORIES = ("error", "outcome", "feedback", "preference", "safety", "fact", "correction", "goal", "health")
CORRECTION = re.compile(r"(?i)\b(always|never|don'?t|do not|stop|instead|actually|please use|must)\b")


@dataclass
class Mined:
    """The facts of one cluster, counted."""

    kind: str | None
    records: list[dict[str, Any]]
    agent: str
    tools: Counter = field(default_factory=Counter)
    primary_tool: str | None = None
    arg_names: Counter = field(default_factory=Counter)
    recurring_values: dict[str, str] = field(default_factory=dict)
    result_keys: Counter = field(default_factory=Counter)
    calls: int = 0
    ok_results: int = 0
    error_results: int = 0
    errors: list[ErrorPattern] = field(default_factory=list)
    preceded_by: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    success_basis: str = ""
    corrections: list[tuple[str, str]] = field(default_factory=list)
    facts: list[FactStatement] = field(default_factory=list)
    first_ts: dt.datetime | None = None
    last_ts: dt.datetime | None = None
    wording: Wording = ENGLISH  # the language the units are worded in (see `mine_cluster`)

    @property
    def successes(self) -> int:
        return self.outcomes.get("success", 0)

    @property
    def trials(self) -> int:
        return sum(self.outcomes.values())

    def summary_lines(self) -> list[str]:
        """The mined facts as short lines, for the model prompt and for `trace`."""
        lines = [f"tools: {', '.join(f'{t} ({n}x)' for t, n in self.tools.most_common(5))}"] if self.tools else []
        if self.primary_tool:
            args = ", ".join(
                f"{a}={self.recurring_values[a]}" if a in self.recurring_values else a
                for a, _ in self.arg_names.most_common(6)
            )
            lines.append(f"main tool: {self.primary_tool}({args})")
        if self.preceded_by:
            lines.append("called before it: " + ", ".join(t for t, _ in self.preceded_by.most_common(3)))
        for e in self.errors[:3]:
            after = "; ".join(f for f, _ in e.followups.most_common(2))
            lines.append(
                f"error from {e.tool} ({e.count}x): {e.example!r}" + (f"; what followed: {after}" if after else "")
            )
        if self.trials:
            lines.append(f"outcomes ({self.success_basis}): {self.successes}/{self.trials} succeeded")
        for _, text in self.corrections[:3]:
            lines.append(f"user correction: {text!r}")
        for f in self.facts[:6]:
            lines.append(f"fact ({f.ts:%Y-%m-%d}): {f.statement}")
        return lines


def classify(records: list[dict[str, Any]]) -> str | None:
    """Rule when the cluster is about doing (tools, outcomes, corrections), fact when about someone."""
    rule = sum(
        1 for r in records if r["kind"] in TOOL_KINDS + ("outcome", "feedback") or r.get("category") == "correction"
    )
    fact = sum(1 for r in records if extract_facts(r) and r.get("category") != "correction")
    if rule and rule >= fact:
        return "rule"
    if fact:
        return "fact"
    return None


def mine_cluster(
    records: list[dict[str, Any]],
    *,
    context: list[dict[str, Any]] | None = None,
    goal_status: dict[str, str] | None = None,
    agent_wording: Wording = ENGLISH,
) -> Mined:
    """Count what a cluster's records say. `context`: the records of the same sessions (ordered), so an
    error's follow-up and the tools called before the main tool can be seen; `goal_status`: goal → status;
    `agent_wording`: the language the agent's messages are in, for clusters with too few words of their
    own (tool calls, results)."""
    records = sorted(records, key=lambda r: (r["ts"], r["id"]))
    agents = Counter(r["agent"] for r in records)
    mined = Mined(kind=classify(records), records=records, agent=agents.most_common(1)[0][0] if agents else "default")
    # what people and the agent wrote, not tool output: an English error in a Chinese agent's log is
    # still explained in Chinese
    notes = [c for c in context or [] if c["kind"] == "observation"]
    said = [r.get("content") or "" for r in records + notes if r["kind"] not in TOOL_KINDS]
    mined.wording = wording_for(said, fallback=agent_wording, decisive=CLEAR_SHARE)
    if records:
        mined.first_ts, mined.last_ts = records[0]["ts"], records[-1]["ts"]
    for r in records:
        if r["kind"] in TOOL_KINDS and r.get("tool_name"):
            mined.tools[r["tool_name"]] += 1
    # the agent's scratchpad is no tool a rule is about ("To think (think): call think(thought=…)")
    mined.primary_tool = next((t for t, _ in mined.tools.most_common() if t not in SCRATCHPAD_TOOLS), None)
    _mine_tool_use(mined, records, context or [])
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in sorted(context or records, key=lambda r: (r["ts"], r["id"])):
        by_session[r.get("session") or ""].append(r)
    _mine_errors(mined, records, by_session)
    _mine_preceding(mined, records, by_session)
    _mine_outcomes(mined, records, goal_status or {})
    for r in records:
        if r["kind"] == "feedback" and r.get("feedback_signal") == "negative" and (r.get("content") or r.get("text")):
            text = (r.get("text") or "").split(":", 1)[-1].strip()
            if CORRECTION.search(text):
                mined.corrections.append((r["id"], text))
        elif (
            r["kind"] == "message"
            and r.get("role") == "user"
            and (
                r.get("category") in ("correction", "safety")
                or (r.get("category") == "preference" and CORRECTION.search(r.get("content") or ""))
            )
        ):
            mined.corrections.append((r["id"], speaker_and_text(r)[1]))
    if mined.kind == "fact":
        for r in records:
            mined.facts.extend(extract_facts(r))
    return mined


def _mine_tool_use(mined: Mined, records: list[dict[str, Any]], context: list[dict[str, Any]]) -> None:
    tool = mined.primary_tool
    if tool is None:
        return
    values: dict[str, Counter] = defaultdict(Counter)

    def count_args(call: dict[str, Any]) -> None:
        for name, value in tool_arguments(call).items():
            mined.arg_names[name] += 1
            if isinstance(value, (str, int, float, bool)) and len(str(value)) <= 40:
                values[name][str(value)] += 1

    for r in records:
        if r.get("tool_name") != tool:
            continue
        if r["kind"] == "tool_call":
            mined.calls += 1
            count_args(r)
        elif r["kind"] == "tool_result":
            if r.get("tool_error"):
                mined.error_results += 1
                continue
            mined.ok_results += 1
            try:
                result = json.loads(r.get("tool_result") or "null")
            except (json.JSONDecodeError, TypeError):
                result = None
            if isinstance(result, dict):
                mined.result_keys.update(result.keys())
    if not mined.calls:  # k-means often puts results and calls apart: take the arguments from the sessions' calls
        for r in context:
            if r["kind"] == "tool_call" and r.get("tool_name") == tool:
                count_args(r)
    for name, counter in values.items():
        value, count = counter.most_common(1)[0]
        if count >= 2 and count >= 0.6 * mined.arg_names[name] and mined.arg_names[name] >= 2:
            mined.recurring_values[name] = value


def _mine_errors(mined: Mined, records: list[dict[str, Any]], by_session: dict[str, list[dict[str, Any]]]) -> None:
    patterns: dict[tuple[str, str], ErrorPattern] = {}
    for r in records:
        if not r.get("tool_error"):
            continue
        tool = r.get("tool_name") or "tool"
        key = (tool, error_shape(r["tool_error"]))
        shape, values = generalise(r["tool_error"])
        pattern = patterns.setdefault(key, ErrorPattern(tool=tool, example=shape[:160]))
        pattern.count += 1
        session = by_session.get(r.get("session") or "", [])
        position = next((i for i, s in enumerate(session) if s["id"] == r["id"]), None)
        if position is not None:
            text, recovered = followup(session[position + 1 :], tool)
            if text:
                pattern.followups[text] += 1
            pattern.recovered += int(recovered)
            steps, args, notes, renamed, rerun_ok = recovery_path(session[position + 1 :], tool, values)
            if rerun_ok is None:
                continue
            path = pattern.paths.setdefault(steps, RecoveryPath(steps))
            path.count += 1
            path.recovered += int(rerun_ok)
            for slot, rendered in args.items():
                path.args.setdefault(slot, Counter())[rendered] += 1
            path.renamed.update(renamed)
            path.notes.update(notes[:1])
    mined.errors = sorted(patterns.values(), key=lambda p: (-p.count, p.example))


def _mine_preceding(mined: Mined, records: list[dict[str, Any]], by_session: dict[str, list[dict[str, Any]]]) -> None:
    """Tools regularly called earlier in the same session, before the first call of the main tool."""
    tool = mined.primary_tool
    sessions = {r.get("session") for r in records if r.get("tool_name") == tool and r["kind"] == "tool_call"}
    # in the sessions' order, not a set's: tools called as often keep the order of the first session,
    # whatever the process's string hashing (tau's procedures listed their steps either way, run to run)
    for session in sorted(sessions, key=lambda s: s or ""):
        before: list[str] = []
        for r in by_session.get(session or "", []):
            if r["kind"] != "tool_call":
                continue
            if r.get("tool_name") == tool:
                break
            if r.get("tool_name") and r["tool_name"] not in before and r["tool_name"] not in SCRATCHPAD_TOOLS:
                before.append(r["tool_name"])
        mined.preceded_by.update(before)
    threshold = max(2, len(sessions) // 2)
    mined.preceded_by = Counter({t: n for t, n in mined.preceded_by.items() if n >= threshold})


def _mine_outcomes(mined: Mined, records: list[dict[str, Any]], goal_status: dict[str, str]) -> None:
    """Success counts from outcome records, else from the main tool's results, else from the sources' goals."""
    outcomes = Counter(r["outcome"] for r in records if r["kind"] == "outcome" and r.get("outcome"))
    if outcomes:
        mined.outcomes, mined.success_basis = outcomes, "outcome records"
        return
    if mined.ok_results or mined.error_results:
        mined.outcomes = Counter({"success": mined.ok_results, "failure": mined.error_results})
        mined.success_basis = "tool results"
        return
    goals = {r["goal_id"] for r in records if r.get("goal_id")}
    statuses = Counter(goal_status[g] for g in goals if goal_status.get(g) in ("succeeded", "failed"))
    if statuses:
        mined.outcomes = Counter({"success": statuses.get("succeeded", 0), "failure": statuses.get("failed", 0)})
        mined.success_basis = "goals"
