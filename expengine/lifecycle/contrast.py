"""The statistics of outcome credit (credit.py), apart from the store: which episodes are the same
situation, and whether being shown a unit changed how episodes of one situation ended.

A hard task fails with or without the unit, so episodes are compared only with episodes of their own
situation (their first queries at least `same` cosine apart). The model is conditional logistic
regression (Breslow and Day's matched sets): each situation's outcomes, given its number of successes,
depend only on which units its episodes were shown, so a situation's difficulty drops out. A unit is
judged by the efficient score test of its coefficient, the units already judged fitted beside it:
with none, that is the Mantel-Haenszel test; unlike strata split by those units' showing, it keeps
every episode where a better unit took this one's place (what that unit does is estimated over all
its situations, so the displaced episodes still tell how the situation goes without this one). A
situation where every episode was shown the unit, or none was, compares nothing, and one whose
episodes all ended alike says nothing.

Units shown together are told apart step by step: the clearest unit is judged first, and every later
contrast also fits its showing (a unit another one pushed out of the prompt would otherwise take the
credit or the blame for it). Ties go to the newer unit: its appearance is what changed.
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
    p_value: float  # two-sided, of the score test (chi-squared, one degree of freedom)
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


def _log_denominators(eta: np.ndarray, successes: int) -> np.ndarray:
    """log of the sum, over every set of `successes` episodes of a situation, of exp(their η summed), for
    each column of `eta` (episodes × coefficient vectors): the elementary symmetric polynomial, built one
    episode at a time in log space, so a unit whose episodes all failed overflows nothing."""
    if successes > len(eta) - successes:  # fewer terms: each set's complement, with -η
        return eta.sum(0) + _log_denominators(-eta, len(eta) - successes)
    log_e = np.full((successes + 1, eta.shape[1]), -np.inf)
    log_e[0] = 0.0
    for value in eta:
        log_e[1:] = np.logaddexp(log_e[1:], log_e[:-1] + value)
    return log_e[successes]


def _log_likelihood(groups: list[tuple[np.ndarray, np.ndarray]]) -> Any:
    """The conditional log-likelihood of coefficient vectors (coefficients × ..., as scipy.differentiate
    passes them): each situation's outcomes given its number of successes; one of all alike says nothing."""
    terms = [(x[y].sum(0), x, int(y.sum())) for x, y in groups if 0 < y.sum() < len(y)]

    def log_likelihood(beta: np.ndarray) -> np.ndarray:
        beta = np.asarray(beta, dtype=float)
        flat = beta.reshape(beta.shape[0], int(np.prod(beta.shape[1:])))
        total = sum((s @ flat - _log_denominators(x @ flat, k) for s, x, k in terms), np.zeros(flat.shape[1]))
        return total.reshape(beta.shape[1:])

    return log_likelihood


def conditional_fit(groups: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, np.ndarray]:
    """(maximum log-likelihood, coefficients) of conditional logistic regression on each situation's
    (shown matrix, outcomes). A unit whose episodes all failed has no finite estimate; the bound at ±20
    stands for it (the likelihood's limit)."""
    from scipy.optimize import minimize

    width = groups[0][0].shape[1] if groups else 0
    log_likelihood = _log_likelihood(groups)
    if not width:
        return float(log_likelihood(np.zeros((0, 1)))[0]), np.zeros(0)
    fit = minimize(
        lambda beta: -float(log_likelihood(beta[:, None])[0]),
        np.zeros(width),
        method="L-BFGS-B",
        bounds=[(-20.0, 20.0)] * width,
    )
    return -float(fit.fun), fit.x


def score_test(groups: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """(two-sided p, score) of the first column's coefficient being 0, the other columns fitted: the
    score is the shown episodes' successes less those the model expects without the unit, and its
    variance the information left once the other columns are accounted for (Rao's efficient score)."""
    from scipy.differentiate import hessian, jacobian
    from scipy.stats import chi2

    _, fitted = conditional_fit([(x[:, 1:], y) for x, y in groups])
    at = np.concatenate([[0.0], fitted])
    log_likelihood = _log_likelihood(groups)
    score = float(jacobian(log_likelihood, at).df[0])
    information = -hessian(log_likelihood, at).ddf
    # the other units' information, inverted where it has any (a unit shown alike within every situation,
    # or one whose episodes all ended alike, has none: its direction is left out, not divided by ~0)
    values, vectors = np.linalg.eigh(information[1:, 1:])
    known = values > 1e-6
    inverse = vectors[:, known] @ np.diag(1 / values[known]) @ vectors[:, known].T
    variance = information[0, 0] - information[0, 1:] @ inverse @ information[1:, 0]
    if variance <= 1e-6 * max(information[0, 0], 1e-6):  # shown exactly when the others were: no evidence
        return 1.0, score
    return float(chi2.sf(score * score / variance, 1)), score


# a situation's latest episodes shown the unit, and as many not shown it, that a judgement reads: the
# likelihood costs about n^2 a situation (a task repeated 2,000 times took ~30 s of CPU a unit)
EPISODES_EACH_WAY = 100


def _latest_each_way(uid: str, group: list[Episode]) -> list[Episode]:
    """The situation's latest `EPISODES_EACH_WAY` episodes shown the unit and latest not shown it (the
    episodes come oldest first). Choosing episodes by what they were shown, never by how they ended,
    leaves the conditional model of their outcomes unbiased."""
    shown = [e for e in group if uid in e.shown][-EPISODES_EACH_WAY:]
    others = [e for e in group if uid not in e.shown][-EPISODES_EACH_WAY:]
    kept = {id(e) for e in shown + others}
    return [e for e in group if id(e) in kept]


def contrast(
    uid: str, episodes: list[Episode], labels: list[int], relevant: set[int], held: list[str], min_runs: int
) -> Judgement | None:
    """The unit's score test over the `relevant` situations, each `held` unit's showing fitted beside
    it; None under `min_runs` shown, or not shown, episodes in situations that compare."""
    rows: dict[int, list[Episode]] = defaultdict(list)
    for episode, label in zip(episodes, labels):
        if label in relevant:
            rows[label].append(episode)
    rows = {label: _latest_each_way(uid, group) for label, group in rows.items()}
    compare = [group for group in rows.values() if len({uid in e.shown for e in group}) == 2]
    shown = [e for group in compare for e in group if uid in e.shown]
    others = [e for group in compare for e in group if uid not in e.shown]
    if len(shown) < min_runs or len(others) < min_runs:
        return None
    columns = [uid, *held]
    p_value, score = score_test(
        [
            (
                np.array([[c in e.shown for c in columns] for e in group], dtype=float),
                np.array([e.succeeded for e in group]),
            )
            for group in rows.values()
        ]
    )
    counts: dict[str, Any] = {
        "shown": len(shown),
        "shown_succeeded": sum(e.succeeded for e in shown),
        "not_shown": len(others),
        "not_shown_succeeded": sum(e.succeeded for e in others),
        "situations": len(compare),
        "excess_successes": round(score, 2),  # when shown, over what the situations and other units predict
        "p_value": round(p_value, 4),
    }
    return Judgement(uid, score < 0, counts["p_value"], counts)


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
