"""Deterministic mining of one cluster: what a rule or fact may claim, counted from the records.

Everything a unit says comes from here (tools, argument names and recurring values, errors and what
followed them, outcome counts, user corrections, facts with subject / attribute / as_of); the model
only words it, and grounding checks the wording against these records.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from ...textutil import CJK
from .wording import CLEAR_SHARE, ENGLISH, Wording, wording_for

TOOL_KINDS = ("tool_call", "tool_result")
SCRATCHPAD_TOOLS = ("think",)  # the agent thinking aloud through a tool: never a step of a procedure
LESSON_CATEGORIES = ("error", "outcome", "feedback", "preference", "safety", "fact", "correction", "goal", "health")
CORRECTION = re.compile(r"(?i)\b(always|never|don'?t|do not|stop|instead|actually|please use|must)\b")
SPEAKER_PREFIX = re.compile(r"^([A-Z][\w.'-]*(?: [A-Z][\w.'-]*)?): (.+)$", re.S)
_END = r"(?=[,.;!?]|\s+(?:and|but|so|now|by|since|because|for|with|last|next)\b|$)"
# single-valued attributes: a newer value supersedes the older one
SINGLE_VALUED = (
    (
        "home",
        re.compile(
            rf"(?i)\bI(?:'ve| have)? (?:just |now |recently )?(?:live|am living|'m living|moved|am moving|'m moving|relocated) (?:in|to) (.+?){_END}"
        ),
    ),
    ("name", re.compile(rf"(?i)\bmy name is (.+?){_END}")),
    ("job", re.compile(rf"(?i)\bI (?:work|am working|'m working) (?:as|at|for) (.+?){_END}")),
)
# multi-valued attributes: the value is part of the attribute, so they never supersede each other
MULTI_VALUED = (
    ("is allergic to", re.compile(rf"(?i)\bI(?:'m| am) allergic to (.+?){_END}")),
    (
        "dislikes",
        re.compile(rf"(?i)\bI (?:really |just )?(?:hate|can'?t stand|don'?t like|do not like|dislike) (.+?){_END}"),
    ),
    ("prefers", re.compile(rf"(?i)\bI (?:really |much )?(?:prefer|love|like|enjoy) (.+?){_END}")),
    (
        "has",
        re.compile(
            r"(?i)\bmy ((?:sister|brother|partner|wife|husband|son|daughter|mom|dad|dog|cat|corgi|friend) (?-i:[A-Z])\w+)"
        ),
    ),
)
# Chinese statements, worded in Chinese: (attribute, pattern, statement template, single-valued)
_ZH_END = r"(?=[，。！？；,.!?;]|$)"
ZH_FACTS = (
    ("home", re.compile(rf"我(?:现在|目前)?(?:住在|搬到了|搬到)(.+?){_ZH_END}"), "{s}住在{v}", True),
    ("name", re.compile(rf"我(?:叫|的名字是)(.+?){_ZH_END}"), "{s}叫{v}", True),
    ("job", re.compile(rf"我(?:现在)?在(.+?)(?:工作|上班){_ZH_END}"), "{s}在{v}工作", True),
    ("is allergic to", re.compile(rf"我对(.+?)过敏{_ZH_END}"), "{s}对{v}过敏", False),
    ("dislikes", re.compile(rf"我(?:很|非常|真的)?(?:不喜欢|讨厌|受不了)(.+?){_ZH_END}"), "{s}不喜欢{v}", False),
    ("prefers", re.compile(rf"我(?:很|非常|特别|真的|最)?(?:喜欢|爱|偏爱)(.+?){_ZH_END}"), "{s}喜欢{v}", False),
)
_NOT_A_VALUE = re.compile(r"(?i)^(it|that|this|them|those|these|him|her|so|when|how|what|you|to|the)$")
# A liked or disliked thing is a short noun phrase: "live music", "writing". Clauses ("how it shows the
# togetherness", "seeing them soak", "every day") and phrases about the speaker ("talking about my
# sneakers") made LoCoMo facts that read as nonsense, so they are no value.
_CLAUSE_START = re.compile(
    r"(?i)^(how|that|what|when|where|why|which|who|the way|every|each|all|seeing|being|having|if)\b"
)
_PERSON = re.compile(r"(?i)\b(i|me|my|mine|you|your|yours|we|us|our|ours|them|they|their|he|him|his|she|her|it|its)\b")
MAX_THING_WORDS = 5
_FILLER = re.compile(r"(?i)(\s+(lol|haha|though|too|so much|anymore|really|at all))+$")
_CODE_OR_NUMBER = re.compile(r"\b[A-Z]{2,}\d+\b|\b[a-z]+_\d+\b|\d+(?:[.:\-/]\d+)*")


@dataclass
class Path:
    """What an agent did between an error and the next result of the failing tool: the calls that
    worked (and notes), in order; how often it was taken and how often the tool then worked."""

    steps: tuple[str, ...]
    count: int = 0
    recovered: int = 0
    args: dict[tuple[int, str], Counter] = field(default_factory=dict)  # (step, argument) → rendered values
    renamed: Counter = field(default_factory=Counter)  # 'dateutil → python-dateutil': the value respelled
    notes: Counter = field(default_factory=Counter)  # what the agent noted first

    def describe(self, words: Wording) -> str:
        """ "call pip_install(package=<module>)", with each argument's most common rendering, and the note
        most runs of the path took first; or, when most runs noted something first however worded, the
        note worded alike in at least two of them ("waiting 60 s before retrying"), never a one-off."""
        parts = []
        note, seen = self.notes.most_common(1)[0] if self.notes else ("", 0)
        if note and (2 * seen >= self.count or (seen >= 2 and 2 * sum(self.notes.values()) >= self.count)):
            parts.append(words.note.format(note=note))
        for i, step in enumerate(self.steps):
            args = ", ".join(
                f"{name}={values.most_common(1)[0][0]}" for (j, name), values in self.args.items() if j == i
            )
            parts.append(words.call.format(call=f"{step}({args})"))
        return words.joined(parts)

    def respelled(self, words: Wording) -> str:
        """' (respelled where needed, e.g. jwt → PyJWT)', or nothing."""
        if not self.renamed:
            return ""
        return words.respelled.format(examples=", ".join(v for v, _ in self.renamed.most_common(2)))


@dataclass
class ErrorPattern:
    tool: str
    example: str  # the first error's first line, its variable parts named: "No module named <module>"
    count: int = 0
    followups: Counter = field(default_factory=Counter)
    recovered: int = 0
    paths: dict[tuple[str, ...], Path] = field(default_factory=dict)

    def best_path(self) -> Path | None:
        """The path that recovered most often (ties: the more reliable); None when nothing recovered."""
        working = [p for p in self.paths.values() if p.recovered]
        return max(working, key=lambda p: (p.recovered, p.recovered / p.count, -len(p.steps)), default=None)

    def failed_paths(self) -> list[Path]:
        """Paths after which the tool never worked: pitfalls, never actions."""
        return sorted((p for p in self.paths.values() if not p.recovered), key=lambda p: -p.count)


@dataclass
class FactStatement:
    subject: str
    attribute: str
    value: str
    statement: str
    ts: dt.datetime
    source_id: str
    single_valued: bool


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


def speaker_and_text(record: dict[str, Any]) -> tuple[str, str]:
    """Who said it and what: 'Speaker: text' content names the speaker; a native user is 'the user'."""
    content = (record.get("content") or "").strip()
    match = SPEAKER_PREFIX.match(content)
    if match:
        return match.group(1), match.group(2).strip()
    return ("the user" if record.get("role") in (None, "user") else record.get("role") or "the agent"), content


def clean_value(value: str) -> str | None:
    """'cilantro lol' → 'cilantro'; pronouns ('I hate it') are no value."""
    value = _FILLER.sub("", value.strip(" '\"")).strip()
    return None if not value or _NOT_A_VALUE.match(value) else value


def is_thing(value: str) -> bool:
    return len(value.split()) <= MAX_THING_WORDS and not _CLAUSE_START.match(value) and not _PERSON.search(value)


def extract_facts(record: dict[str, Any]) -> list[FactStatement]:
    """Facts a user message states: patterned ones (home, allergy, likes…), else the statement itself
    (kept verbatim and later quoted: rewriting someone's words deterministically goes wrong too often)."""
    if record.get("kind") not in ("message", "note") or record.get("role") not in (None, "user", "system"):
        return []
    subject, text = speaker_and_text(record)
    if CJK.search(text):
        return _chinese_facts(record, "用户" if subject == "the user" else subject, text)
    if not text or len(text.split()) < 3 or record.get("category") == "chatter":
        return []
    ts, rid = record["ts"], record["id"]
    found: list[FactStatement] = []
    for attribute, pattern in SINGLE_VALUED:
        for m in pattern.finditer(text):
            value = clean_value(m.group(1))
            if value is None:
                continue
            verb = {"home": "lives in", "name": "is named", "job": "works as/at"}[attribute]
            found.append(FactStatement(subject, attribute, value, f"{subject} {verb} {value}", ts, rid, True))
    for attribute, pattern in MULTI_VALUED:
        for m in pattern.finditer(text):
            value = clean_value(m.group(1))
            if value is None or not is_thing(value):
                continue
            found.append(
                FactStatement(
                    subject, f"{attribute} {value.lower()}", value, f"{subject} {attribute} {value}", ts, rid, False
                )
            )
    if found:
        return found
    if record.get("kind") == "note" or record.get("goal_id") or text.rstrip().endswith("?") or len(text.split()) < 4:
        return []  # notes, task requests and questions are not statements about someone
    return [FactStatement(subject, f"said on {ts:%Y-%m-%d}", text, text, ts, rid, False)]


def _chinese_facts(record: dict[str, Any], subject: str, text: str) -> list[FactStatement]:
    """Chinese has no spaces: length is counted in characters, and statements stay in Chinese."""
    if len(CJK.findall(text)) < 4 or record.get("category") == "chatter":
        return []
    ts, rid = record["ts"], record["id"]
    found = []
    for attribute, pattern, template, single in ZH_FACTS:
        for m in pattern.finditer(text):
            value = m.group(1).strip()
            if not value or len(value) > 30:
                continue
            key = attribute if single else f"{attribute} {value}"
            found.append(FactStatement(subject, key, value, template.format(s=subject, v=value), ts, rid, single))
    if found or record.get("kind") == "note" or record.get("goal_id") or text.rstrip().endswith(("?", "？")):
        return found
    return [FactStatement(subject, f"said on {ts:%Y-%m-%d}", text, text, ts, rid, False)]


def tool_arguments(record: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(record.get("tool_args") or "null")
    except (json.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


_QUOTED_VALUE = re.compile(r"(?:(\w+) named |(\w+) )?'([^'\s]{1,80})'")
_PATH_LIKE = re.compile(r"/|\.\w{1,4}$")
_ID = re.compile(r"\b[A-Z]{2,}\d+\b|\b[a-z]+_\d+\b")
_NOT_A_NAME = frozenset("a an the is was of in on at to for from with by and or not no as".split())


def generalise(message: str) -> tuple[str, dict[str, str]]:
    """An error's first line with its variable parts named, and their values:
    "No module named 'jwt'" → ("No module named <module>", {"module": "jwt"}); quoted paths are <file>,
    codes like HAT030 are <id>. Errors that differ only in these values are one error."""
    values: dict[str, str] = {}

    def name(match: re.Match) -> str:
        named, before, value = match.groups()
        if _PATH_LIKE.search(value):
            var = "file"
        elif named or (before and before.isascii() and before.isalpha() and before.lower() not in _NOT_A_NAME):
            var = (named or before).lower()
        else:
            var = "value"
        key, n = var, 2
        while key in values and values[key] != value:
            key, n = f"{var}{n}", n + 1
        values[key] = value
        prefix = f"{named} named " if named else (f"{before} " if before else "")
        return f"{prefix}<{key}>"

    text = _QUOTED_VALUE.sub(name, message.strip().splitlines()[0] if message.strip() else "")

    def code(match: re.Match) -> str:
        key = "id" if "id" not in values or values["id"] == match.group(0) else f"id{len(values)}"
        values[key] = match.group(0)
        return f"<{key}>"

    return _ID.sub(code, text), values


def error_shape(message: str) -> str:
    """Group errors that differ only in named values, ids, numbers and dates ('flight HAT030 …' ~ 'flight HAT229 …')."""
    return _CODE_OR_NUMBER.sub("#", generalise(message)[0])[:120]


PATH_WINDOW = 12  # records after an error in which the failing tool's next result is looked for


def _path(
    after: list[dict[str, Any]], tool: str, values: dict[str, str]
) -> tuple[tuple[str, ...], dict, list, list, bool | None]:
    """The calls that worked between an error and the failing tool's next result (each argument rendered
    as the error's variable, <module>, when it passes that value), the notes taken, whether the tool then
    worked (None: no rerun seen)."""
    steps: list[str] = []
    notes: list[str] = []
    args: dict[tuple[int, str], str] = {}
    renamed: list[str] = []
    by_value = {v.lower(): k for k, v in values.items()}
    pending: dict[str, tuple[str, dict[str, Any]]] = {}
    for r in after[:PATH_WINDOW]:
        name = r.get("tool_name")
        if r["kind"] == "observation" and r.get("content"):
            notes.append(" ".join(r["content"].split())[:80])
        elif r["kind"] == "tool_call" and name and name != tool and name not in SCRATCHPAD_TOOLS:
            pending[name] = (name, tool_arguments(r))
        elif r["kind"] == "tool_result" and name == tool:
            return tuple(steps), args, notes, renamed, not r.get("tool_error")
        elif r["kind"] == "tool_result" and name in pending:
            _, call_args = pending.pop(name)
            if r.get("tool_error"):
                continue  # a call that failed is no step of the path (see the pitfalls)
            for arg, value in call_args.items():
                text = str(value)
                near = next((k for v, k in by_value.items() if len(v) >= 3 and v in text.lower()), None)
                if text.lower() in by_value:
                    rendered = f"<{by_value[text.lower()]}>"
                elif near:  # the value, spelled another way: dateutil → python-dateutil
                    rendered = f"<{near}>"
                    renamed.append(f"{values[near]} → {text}")
                else:
                    rendered = "…"
                args[(len(steps), arg)] = rendered
            steps.append(name)
    return tuple(steps), args, notes, renamed, None


def _followup(after: list[dict[str, Any]], tool: str) -> tuple[str, bool]:
    """What the agent did next in the session after an error, and whether the same tool then worked."""
    steps: list[str] = []
    recovered = False
    for r in after[:4]:
        if r["kind"] == "observation" and r.get("content"):
            steps.append(f"noted {r['content'][:100]!r}")
        elif r["kind"] == "tool_call":
            steps.append(f"retried {tool}" if r.get("tool_name") == tool else f"called {r.get('tool_name')}")
        elif r["kind"] == "tool_result" and r.get("tool_name") == tool:
            recovered = not r.get("tool_error")
            steps.append(f"{tool} {'succeeded' if recovered else 'failed again'}")
            break
    return ", then ".join(steps[:3]), recovered


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
            text, recovered = _followup(session[position + 1 :], tool)
            if text:
                pattern.followups[text] += 1
            pattern.recovered += int(recovered)
            steps, args, notes, renamed, rerun_ok = _path(session[position + 1 :], tool, values)
            if rerun_ok is None:
                continue
            path = pattern.paths.setdefault(steps, Path(steps))
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
    for session in sessions:
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
