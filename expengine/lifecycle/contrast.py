"""The statistics of outcome credit (credit.py), apart from the store: which episodes are the same
situation, and whether being shown a unit changed how episodes of one situation ended.

A hard task fails with or without the unit, so episodes are compared only with episodes of their own
situation (their first queries at least `same` cosine apart): the unit's showing against its absence,
before the unit existed or when a query did not show it. The situations pool in an exact test: in
each situation the shown episodes' successes, given its margins, are hypergeometric (Fisher's exact
test), and the sum over situations is their convolution (the exact form of the Mantel-Haenszel test).
A situation where every episode was shown the unit, or none was, says nothing and is left out.

Units shown together are told apart step by step: the clearest unit is judged first, and every later
contrast also holds its showing fixed (a unit another one pushed out of the prompt would otherwise
take the credit or the blame for it). Ties go to the newer unit: its appearance is what changed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Episode:
    key: str
    succeeded: bool
    shown: set[str]
    queries: list[str]


@dataclass
class Judgement:
    uid: str
    worse: bool
    p_value: float  # two-sided: twice the smaller one-sided p of the pooled exact test
    counts: dict[str, Any]  # over the situations that compare: shown, shown_succeeded, not_shown, ...


def situations(vectors: np.ndarray, same: float) -> list[int]:
    """A situation per episode (by its first query's vector, in order): the first situation whose first
    episode is at least `same` cosine away, else a new one."""
    leaders: list[int] = []
    labels = []
    for i, vector in enumerate(vectors):
        if leaders:
            similarity = vectors[leaders] @ vector
            best = int(np.argmax(similarity))
            if similarity[best] >= same:
                labels.append(best)
                continue
        leaders.append(i)
        labels.append(len(leaders) - 1)
    return labels


def pooled_exact(strata: list[tuple[int, int, int, int]]) -> tuple[float, float]:
    """One-sided p-values (fewer, more) of the shown episodes' successes summed over strata of
    (shown_succeeded, shown, other_succeeded, others), each stratum's margins fixed."""
    from scipy.stats import hypergeom

    distribution, low, observed = np.array([1.0]), 0, 0
    for shown_ok, shown, other_ok, others in strata:
        total, successes = shown + others, shown_ok + other_ok
        lo, hi = max(0, shown - (total - successes)), min(shown, successes)
        distribution = np.convolve(distribution, hypergeom.pmf(np.arange(lo, hi + 1), total, successes, shown))
        low += lo
        observed += shown_ok
    at = observed - low
    return min(1.0, float(distribution[: at + 1].sum())), min(1.0, float(distribution[at:].sum()))


def contrast(
    uid: str, episodes: list[Episode], labels: list[int], relevant: set[int], held: list[str], min_runs: int
) -> Judgement | None:
    """The unit's pooled contrast over the `relevant` situations, each split further by the showing of
    the `held` units; None under `min_runs` shown, or not shown, episodes in situations that compare."""
    cells: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for episode, label in zip(episodes, labels):
        if label not in relevant:
            continue
        cell = cells[(label, *(h in episode.shown for h in held))]
        offset = 0 if uid in episode.shown else 2
        cell[offset] += episode.succeeded
        cell[offset + 1] += 1
    strata = [(a, b, c, d) for a, b, c, d in cells.values() if b and d]
    shown, others = sum(s[1] for s in strata), sum(s[3] for s in strata)
    if shown < min_runs or others < min_runs:
        return None
    fewer, more = pooled_exact(strata)
    counts: dict[str, Any] = {
        "shown": shown,
        "shown_succeeded": sum(s[0] for s in strata),
        "not_shown": others,
        "not_shown_succeeded": sum(s[2] for s in strata),
        "situations": len(strata),
        "p_value": round(min(1.0, 2 * min(fewer, more)), 4),
    }
    return Judgement(uid, fewer < more, counts["p_value"], counts)


def judge(
    episodes: list[Episode],
    labels: list[int],
    relevant: dict[str, set[int]],
    *,
    newest_first: list[str],
    alpha: float,
    min_runs: int,
) -> tuple[int, list[Judgement]]:
    """(units with enough evidence, the clear judgements in the order they were made). `relevant`:
    each candidate unit's situations; `newest_first`: the candidates, newest first (ties)."""
    rank = {uid: n for n, uid in enumerate(newest_first)}
    held: list[str] = []
    found: list[Judgement] = []
    judged = None
    while True:
        pending = [u for u in newest_first if u not in held]
        results = [j for u in pending if (j := contrast(u, episodes, labels, relevant[u], held, min_runs))]
        judged = len(results) if judged is None else judged
        clear = [j for j in results if j.p_value < alpha]
        if not clear:
            return judged, found
        best = min(clear, key=lambda j: (j.p_value, rank[j.uid]))
        found.append(best)
        held.append(best.uid)
