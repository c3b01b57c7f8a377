"""Units built from mined facts alone: always grounded, the default wording when the model's fails."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ...query.projects import project_of
from ...store.db import json_meta
from ...textutil import CJK
from .mine import Mined
from .wording import WORDINGS

MAX_FACT_UNITS_PER_CLUSTER = 8
MAX_QUOTES = 4
MAX_QUOTE_CHARS = 140
DIGEST_ATTRIBUTE = "digest"
DIGEST_SUBJECT = "conversation"
GENERIC_CATEGORIES = ("process", "tool", "conversation", "observation", "error", "outcome", "message", "note", "goal")


@dataclass
class Draft:
    """A unit before it has an id: the fields a rule or fact needs, its sources and its evidence."""

    kind: str
    category: str
    source_ids: list[str]
    condition: str | None = None
    action: str | None = None
    expected_outcome: str | None = None
    pitfall: str | None = None
    statement: str | None = None
    subject: str | None = None
    attribute: str | None = None
    as_of: dt.datetime | None = None
    success_rate: float | None = None
    confidence: float = 0.0
    successes: int = 0
    trials: int = 0
    agreeing: int = 0
    previous_values: list[str] = field(default_factory=list)
    method: str = "template"
    dated: bool = True  # False when no source carries a real time (only the ingest time)
    language: str = "en"  # a key of wording.WORDINGS: how render_text words a rule

    @property
    def support(self) -> int:
        return len(self.source_ids)


def wilson_lower_bound(successes: int, trials: int, z: float = 1.96) -> float:
    """The pessimistic success rate: 6/7 → 0.49, 60/70 → 0.76 (more evidence, more trust)."""
    if trials <= 0:
        return 0.0
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = p + z * z / (2 * trials)
    margin = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return max(0.0, (centre - margin) / denominator)


def support_factor(support: int) -> float:
    """1 source → 0.25, 3 → 0.5, 9 → 0.75: confidence grows with evidence, never from the model."""
    return support / (support + 3)


def confidence_of(draft: Draft) -> float:
    """Rules: Wilson lower bound of the success rate × support factor. Facts: how often the current
    value was stated (a changed value is news, not inconsistency)."""
    if draft.kind == "rule":
        consistency = wilson_lower_bound(draft.successes, draft.trials) if draft.trials else 0.5
        return round(consistency * support_factor(draft.support), 4)
    return round(support_factor(draft.agreeing), 4)


def render_text(draft: Draft) -> str:
    """The one paragraph `query` returns for a unit."""
    if draft.attribute == DIGEST_ATTRIBUTE:
        return draft.statement or ""
    if draft.kind == "fact" and CJK.search(draft.statement or ""):
        return _render_chinese_fact(draft)
    if draft.kind == "fact":
        when = f"As of {draft.as_of:%Y-%m-%d} " if draft.as_of and draft.dated else ""
        statement = draft.statement or ""
        text = (
            f"{when}{statement[0].lower() + statement[1:] if when and statement.startswith('The user') else statement}"
        )
        if draft.previous_values:
            text += f" (previously {', '.join(draft.previous_values)})"
        if draft.support > 1:
            text += f" (stated {draft.support} times)"
        return text.rstrip(".") + "."
    words = WORDINGS[draft.language]
    action = draft.action or ""
    parts = [
        words.rule_sentence.format(condition=draft.condition, action=action)
        if draft.condition
        else action + words.sentence_end
    ]
    if draft.expected_outcome:
        parts.append(words.expected.format(text=draft.expected_outcome))
    if draft.pitfall:
        parts.append(words.pitfall.format(text=draft.pitfall))
    evidence = words.seen.format(count=draft.support)
    if draft.trials:
        evidence += words.succeeded_of.format(successes=draft.successes, trials=draft.trials)
    parts.append(words.evidence.format(text=evidence))
    return words.sentence_gap.join(p.replace("..", ".").replace("。。", "。") for p in parts)


def _render_chinese_fact(draft: Draft) -> str:
    """A fact stated in Chinese reads as Chinese: 截至2024-05-01，用户住在杭州（此前：上海；提到3次）。"""
    text = (draft.statement or "").rstrip("。.")
    if draft.as_of and draft.dated:
        text = f"截至{draft.as_of:%Y-%m-%d}，{text}"
    notes = []
    if draft.previous_values:
        notes.append(f"此前：{'、'.join(draft.previous_values)}")
    if draft.support > 1:
        notes.append(f"提到{draft.support}次")
    return text + (f"（{'；'.join(notes)}）" if notes else "") + "。"


def _category(mined: Mined, default: str) -> str:
    counts = Counter(r.get("category") for r in mined.records if r.get("category") not in GENERIC_CATEGORIES + (None,))
    return str(counts.most_common(1)[0][0]) if counts else default


def _call(tool: str, mined: Mined) -> str:
    args = ", ".join(
        f"{name}={mined.recurring_values[name]}" if name in mined.recurring_values else f"{name}=…"
        for name, _ in mined.arg_names.most_common(6)
    )
    return f"{tool}({args})"


def _restates_a_command(mined: Mined) -> bool:
    """A shell tool's rule (its `command` argument is the command line, varying every time; the others,
    `description` or `timeout`, are options): a coding agent's `grep` or `mix` (what it learned there is
    in its environment rules, which keep the command line, and its error rules). Even a command line
    that recurs is one session's (`mix test test/foo_test.exs:12`): the environment rules generalise it."""
    return "command" in mined.arg_names and not mined.corrections


def _in_coding_projects(mined: Mined) -> bool:
    """Every tool record is a coding project's command (`query.projects.project_of`): its errors are
    keyed per project by fixes.py ("In django/django, when python fails with '…'"), never quoted from
    one run here."""
    tools = [r for r in mined.records if r["kind"] in ("tool_call", "tool_result")]
    return bool(tools) and all(project_of(json_meta(r.get("meta"))) for r in tools)


def rule_draft(mined: Mined) -> Draft | None:
    """condition · action · expected outcome · pitfall, from tools, errors and corrections, worded in the
    sources' language; None if nothing concrete."""
    words = mined.wording
    tool = mined.primary_tool
    condition = action = expected = pitfall = None
    successes, trials = mined.successes, mined.trials
    if tool:
        top_error = mined.errors[0] if mined.errors else None
        steps = [f"{t}(…)" for t, _ in mined.preceded_by.most_common(3)]
        call = _call(tool, mined)
        action = (
            words.first_then_call.format(steps=words.then.join(steps), call=call)
            if steps
            else words.call.format(call=call)
        )
        error_rule = bool(top_error and mined.error_results > mined.ok_results)
        if error_rule and _restates_a_command(mined) and _in_coding_projects(mined):
            return None
        if top_error and error_rule:
            condition = words.when_fails.format(tool=tool, error=words.quoted(top_error.example))
            best = top_error.best_path()
            # an error rule's action is the path that recovered, never one that failed; its rate, that path's
            if best is not None:
                action = words.joined((best.describe(words), words.rerun.format(tool=tool))) + best.respelled(words)
                successes, trials = best.recovered, best.count
            elif top_error.paths:
                action = words.no_fix.format(tool=tool)
                successes, trials = 0, sum(p.count for p in top_error.paths.values())
        elif _restates_a_command(mined):
            return None  # "To grep (grep): call grep(command=…)": nothing the tool schema does not say
        else:
            condition = words.to_use.format(human=tool.replace("_", " "), tool=tool)
        if mined.result_keys:
            keys = words.list_separator.join(k for k, _ in mined.result_keys.most_common(6))
            expected = words.returns.format(tool=tool, keys=keys)
        elif mined.ok_results:
            example = next(
                (
                    r.get("tool_result") or ""
                    for r in mined.records
                    if r.get("tool_name") == tool and r["kind"] == "tool_result" and not r.get("tool_error")
                ),
                "",
            )
            example = " ".join(example.split())[:80]
            expected = words.succeeds.format(tool=tool) + (
                words.for_example.format(example=words.quoted(example)) if example else ""
            )
        pitfalls = []
        for error in mined.errors[:2]:
            text = words.error_seen.format(error=words.quoted(error.example), count=error.count)
            best = error.best_path()
            if best is not None and not (error_rule and error is top_error):
                path = best.describe(words) or words.bare_rerun
                text += words.recovered.format(path=path, recovered=best.recovered, count=best.count)
            failed = error.failed_paths()
            if failed:
                path = failed[0].describe(words) or words.immediate_rerun
                text += words.failed_again.format(path=path, count=failed[0].count)
            pitfalls.append(text)
        pitfall = words.clause_separator.join(pitfalls) or None
    if mined.corrections:
        said = Counter(text for _, text in mined.corrections)
        quoted = words.clause_separator.join(
            words.quoted(text[:120]) + (words.times.format(count=n) if n > 1 else "") for text, n in said.most_common(2)
        )
        if action:
            pitfall = (pitfall + words.clause_separator if pitfall else "") + words.user_corrected.format(quoted=quoted)
        else:
            condition = words.standing_instruction
            action = words.follow_correction.format(quoted=quoted)
    if not action:
        return None
    draft = Draft(
        kind="rule",
        category=_category(mined, "procedure"),
        source_ids=[r["id"] for r in mined.records],
        condition=condition,
        action=action,
        expected_outcome=expected,
        pitfall=pitfall,
        as_of=mined.last_ts,
        successes=successes,
        trials=trials,
        language=words.language,
    )
    draft.success_rate = round(successes / trials, 4) if trials else None
    draft.confidence = confidence_of(draft)
    return draft


def _clip(text: str, limit: int = MAX_QUOTE_CHARS) -> str:
    """A quote short enough to scan, cut at a word: still a verbatim prefix of the source."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + "…"


def digest_draft(records: list[dict], *, quote_chars: int, category: str = "conversation") -> Draft | None:
    """One fact that stands for a whole conversational cluster: every member clipped, in time order,
    grouped under its date ('[2023-05-08] Caroline: … | Melanie: … [2023-06-01] …'). Only source text."""
    members = sorted((r for r in records if (r.get("content") or "").strip()), key=lambda r: (r["ts"], r["id"]))
    if not members:
        return None
    parts: list[str] = []
    day = None
    for r in members:
        quote = _clip(r["content"], quote_chars)
        if r["ts"].date() != day:
            day = r["ts"].date()
            parts.append(f"[{day:%Y-%m-%d}] {quote}")
        else:
            parts.append(f"| {quote}")
    draft = Draft(
        kind="fact",
        category=category,
        source_ids=[r["id"] for r in members],
        statement=" ".join(parts),
        subject=DIGEST_SUBJECT,
        attribute=DIGEST_ATTRIBUTE,
        as_of=members[-1]["ts"],
        agreeing=len(members),
    )
    draft.confidence = confidence_of(draft)
    return draft


def fact_drafts(mined: Mined) -> list[Draft]:
    """One fact per (subject, attribute): the latest value wins, earlier different values are 'previously'."""
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for fact in mined.facts:
        groups[(fact.subject, fact.attribute)].append(fact)
    drafts = []
    category = _category(mined, "fact")
    for (subject, attribute), facts in groups.items():
        facts.sort(key=lambda f: (f.ts, f.source_id))
        latest = facts[-1]
        if attribute.startswith("said on"):
            sentences = list(dict.fromkeys(_clip(f.statement) for f in facts))
            quoted = " · ".join(f'"{sentence}"' for sentence in sentences[:MAX_QUOTES])
            statement = f"{subject} said: {quoted}" + (" …" if len(sentences) > MAX_QUOTES else "")
            agreeing = len(facts)
        else:
            statement = latest.statement
            agreeing = sum(1 for f in facts if f.value.lower() == latest.value.lower())
        previous = list(
            dict.fromkeys(f.value for f in facts if f.single_valued and f.value.lower() != latest.value.lower())
        )
        source_ids = list(dict.fromkeys(f.source_id for f in facts))
        draft = Draft(
            kind="fact",
            category=category,
            source_ids=source_ids,
            statement=statement,
            subject=subject,
            attribute=attribute,
            as_of=latest.ts,
            agreeing=min(agreeing, len(source_ids)),
            previous_values=previous[::-1],
        )
        draft.confidence = confidence_of(draft)
        drafts.append(draft)
    drafts.sort(key=lambda d: (-d.support, -(d.as_of or dt.datetime.min).timestamp()))
    return drafts[:MAX_FACT_UNITS_PER_CLUSTER]


def template_drafts(mined: Mined) -> list[Draft]:
    if mined.kind == "rule":
        draft = rule_draft(mined)
        return [draft] if draft else []
    if mined.kind == "fact":
        return fact_drafts(mined)
    return []
