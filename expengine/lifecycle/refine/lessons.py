"""Lessons from outcomes: what separates the successful runs of an intent from the failed ones.

Each run of an intent is described by binary features: which tools it called (and so which it
omitted), which short argument values it passed, which tool it first called before another, whether
it called a tool more than once, and whether the user had to correct the agent. For each feature
the 2×2 table (feature yes/no × run succeeded/failed) is tested with Fisher's exact test; a feature
with p below `alpha`, seen in at least `min_runs` runs and absent from at least `min_runs`, becomes a
do / avoid lesson with its counts. Features whose runs are exactly those of a stronger one say
nothing new and are dropped; at most `max_lessons` per intent are kept, strongest first.

Pure functions over `intents.Run`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from .intents import Intent, Run, describe_step, group_intents, procedure
from .templates import Draft, confidence_of
from .wording import Wording

MAX_VALUE_CHARS = 30
SIMPLEST = ("calls", "repeats", "order", "arg", "corrected")  # of features that split the runs alike, say the first


@dataclass
class Contrast:
    """One feature's 2×2 table and Fisher's exact p-value."""

    feature: str  # stable key: 'calls:cancel_reservation', 'order:a<b', 'arg:tool.name=value', …
    phrase: str  # what runs with the feature did: 'called cancel_reservation'
    act: str  # the same as an instruction: 'call cancel_reservation'
    with_ok: int
    with_failed: int
    without_ok: int
    without_failed: int
    p_value: float
    run_ids: list[str]  # the runs with the feature

    @property
    def helps(self) -> bool:
        """Runs with the feature succeeded more often than runs without it."""
        with_n, without_n = self.with_ok + self.with_failed, self.without_ok + self.without_failed
        return self.with_ok * without_n > self.without_ok * with_n

    def evidence(self, words: Wording) -> str:
        return words.contrast_evidence.format(
            phrase=self.phrase,
            with_ok=self.with_ok,
            with_n=self.with_ok + self.with_failed,
            without_ok=self.without_ok,
            without_n=self.without_ok + self.without_failed,
            p=f"{self.p_value:.3g}",
        )


def features(run: Run, words: Wording) -> dict[str, tuple[str, str]]:
    """Feature key → (what the run did, the same as an instruction), for every feature the run has."""
    found: dict[str, tuple[str, str]] = {}
    first: dict[str, int] = {}
    counts: dict[str, int] = {}
    for position, call in enumerate(run.calls):
        first.setdefault(call.tool, position)
        counts[call.tool] = counts.get(call.tool, 0) + 1
        found[f"calls:{call.tool}"] = (words.did_call.format(tool=call.tool), words.do_call.format(tool=call.tool))
        for name, value in call.args.items():
            if (
                isinstance(value, (str, int, float))
                and not isinstance(value, bool)
                and len(str(value)) <= MAX_VALUE_CHARS
            ):
                parts = {"tool": call.tool, "name": name, "value": value}
                found[f"arg:{call.tool}.{name}={value}"] = (
                    words.did_call_with.format(**parts),
                    words.do_call_with.format(**parts),
                )
    for tool, n in counts.items():
        if n > 1:
            found[f"repeats:{tool}"] = (words.did_repeat.format(tool=tool), words.do_repeat.format(tool=tool))
    for a, b in combinations(sorted(first, key=first.__getitem__), 2):
        found[f"order:{a}<{b}"] = (
            words.did_order.format(first=a, second=b),
            words.do_order.format(first=a, second=b),
        )
    if run.corrected:
        found["corrected"] = (words.were_corrected, words.get_it_right)
    return found


def contrasts(runs: list[Run], words: Wording, *, alpha: float, min_runs: int, max_lessons: int) -> list[Contrast]:
    """The features that separate successes from failures at p < alpha, strongest first."""
    from scipy.stats import fisher_exact

    judged = [r for r in runs if r.succeeded is not None]
    ok = sum(1 for r in judged if r.succeeded)
    if not ok or ok == len(judged):
        return []
    per_run = {r.run_id: features(r, words) for r in judged}
    phrases: dict[str, tuple[str, str]] = {}
    holders: dict[str, list[str]] = {}
    for run_id, found in per_run.items():
        for key, phrase in found.items():
            phrases[key] = phrase
            holders.setdefault(key, []).append(run_id)
    outcome = {r.run_id: bool(r.succeeded) for r in judged}
    found_contrasts = []
    for key, ids in holders.items():
        if len(ids) < min_runs or len(judged) - len(ids) < min_runs:
            continue
        with_ok = sum(outcome[i] for i in ids)
        with_failed = len(ids) - with_ok
        without_ok = ok - with_ok
        without_failed = len(judged) - ok - with_failed
        p_value = float(fisher_exact([[with_ok, with_failed], [without_ok, without_failed]])[1])
        if p_value < alpha:
            found_contrasts.append(
                Contrast(key, *phrases[key], with_ok, with_failed, without_ok, without_failed, p_value, sorted(ids))
            )
    found_contrasts.sort(key=lambda c: (c.p_value, -len(c.run_ids), SIMPLEST.index(c.feature.split(":")[0]), c.feature))
    kept: list[Contrast] = []
    seen: set[frozenset[str]] = set()
    for contrast in found_contrasts:
        runs_of = frozenset(contrast.run_ids)
        complement = frozenset(outcome) - runs_of
        if runs_of in seen or complement in seen:
            continue  # the same split of the runs, said another way
        seen.add(runs_of)
        kept.append(contrast)
        if len(kept) == max_lessons:
            break
    return kept


def lesson_drafts(intent: Intent, *, alpha: float, min_runs: int, max_lessons: int) -> list[Draft]:
    """One do / avoid rule per separating feature; the evidence is every judged run of the intent."""
    words = intent.wording
    judged = [r for r in intent.runs if r.succeeded is not None]
    drafts = []
    for contrast in contrasts(judged, words, alpha=alpha, min_runs=min_runs, max_lessons=max_lessons):
        if contrast.helps:
            action, successes, trials = contrast.act, contrast.with_ok, contrast.with_ok + contrast.with_failed
        else:
            action, successes = words.do_not.format(act=contrast.act), contrast.without_ok
            trials = contrast.without_ok + contrast.without_failed
        draft = Draft(
            kind="rule",
            category="lesson",
            source_ids=[r.opening_id for r in judged],
            condition=intent.condition,
            action=action,
            expected_outcome=contrast.evidence(words),
            subject=contrast.feature,
            as_of=_latest(judged),
            successes=successes,
            trials=trials,
            language=words.language,
        )
        draft.success_rate = round(successes / trials, 4) if trials else None
        draft.confidence = confidence_of(draft)
        drafts.append(draft)
    return drafts


def _latest(runs: list[Run]) -> dt.datetime | None:
    return max((r.ended for r in runs if r.ended is not None), default=None)


def procedure_draft(intent: Intent, *, share: float, pitfalls: list[Draft]) -> Draft | None:
    """The intent's rule: the procedure its successful runs followed, or, when none succeeded, the
    path every failure took stated as a pitfall (a failed path is never the action)."""
    words = intent.wording
    judged = [r for r in intent.runs if r.succeeded is not None]
    successes = intent.successes
    steps = procedure(successes, share=share)
    do_not = words.do_not.format(act="")
    avoid = [d.action.removeprefix(do_not) for d in pitfalls if d.action and d.action.startswith(do_not)]
    if steps:
        action = words.joined(describe_step(s, words) for s in steps)
        expected = words.procedure_done.format(tool=steps[-1].tool)
        pitfall = words.clause_separator.join(avoid) or None
    elif judged:
        failed_path = procedure(intent.failures, share=share)
        if not failed_path:
            return None
        action = words.no_path.format(runs=len(judged))
        expected = None
        pitfall = words.failed_runs_called.format(tools=words.joined(s.tool for s in failed_path))
    else:
        return None
    draft = Draft(
        kind="rule",
        category="procedure",
        source_ids=[r.opening_id for r in intent.runs],
        condition=intent.condition,
        action=action,
        expected_outcome=expected,
        pitfall=pitfall,
        as_of=_latest(intent.runs),
        successes=len(successes),
        trials=len(judged),
        language=words.language,
    )
    draft.success_rate = round(len(successes) / len(judged), 4) if judged else None
    draft.confidence = confidence_of(draft)
    return draft


def intent_drafts(
    runs: list[Run], vectors: Any, cfg: Any, *, min_runs: int, agent_wording: Wording
) -> list[tuple[Intent, list[Draft]]]:
    """One agent's runs → its intents with at least `min_runs` runs, each with its procedure rule and
    lessons (`cfg`: the [lessons] config section), in the language of its requests."""
    grouped = group_intents(
        runs,
        vectors,
        distance=cfg.intent_distance,
        typical=cfg.typical_requests,
        typical_words=cfg.typical_words,
        agent_wording=agent_wording,
    )
    found = []
    for intent in grouped:
        if len(intent.runs) < min_runs:
            continue
        lessons = lesson_drafts(intent, alpha=cfg.alpha, min_runs=cfg.min_runs, max_lessons=cfg.max_lessons)
        main = procedure_draft(intent, share=cfg.procedure_share, pitfalls=lessons)
        drafts = ([main] if main else []) + lessons
        if drafts:
            found.append((intent, drafts))
    return found
