"""The statistics of outcome credit (lifecycle/contrast.py) on hand-made episodes: a hard situation
does not make the unit shown there look bad, a unit pushed out of the prompt by a bad one does not
take its credit, and a bad unit the better one pushed out is still caught."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2, fisher_exact
from scipy.stats.contingency import odds_ratio

from expengine.lifecycle.contrast import EPISODES_EACH_WAY, Episode, conditional_fit, contrast, judge, situations


def _episodes(label: int, shown: set[str], succeeded: int, failed: int) -> list[tuple[Episode, int]]:
    outcomes = [True] * succeeded + [False] * failed
    return [(Episode(f"{label}-{sorted(shown)}-{n}", ok, set(shown), ["q"]), label) for n, ok in enumerate(outcomes)]


def _split(rows: list[tuple[Episode, int]]) -> tuple[list[Episode], list[int]]:
    return [e for e, _ in rows], [label for _, label in rows]


def test_one_situation_estimates_the_conditional_odds_ratio() -> None:
    # 3 of 16 shown episodes succeeded, 11 of 16 not shown: the conditional maximum-likelihood odds ratio
    shown = np.array([[1.0]] * 16 + [[0.0]] * 16)
    succeeded = np.array([True] * 3 + [False] * 13 + [True] * 11 + [False] * 5)
    _, (log_odds,) = conditional_fit([(shown, succeeded)])
    assert np.exp(log_odds) == pytest.approx(odds_ratio([[3, 13], [11, 5]], kind="conditional").statistic, rel=1e-4)
    null, _ = conditional_fit([(shown[:, :0], succeeded)])  # no unit: every set of 14 successes alike
    assert null == pytest.approx(-math.log(math.comb(32, 14)))


def test_pooled_situations_add_evidence_one_alone_lacks() -> None:
    one = _episodes(0, set(), 3, 1) + _episodes(0, {"u"}, 1, 3)
    alone = contrast("u", *_split(one), {0}, [], min_runs=4)
    five = [row for label in range(5) for row in _episodes(label, set(), 3, 1) + _episodes(label, {"u"}, 1, 3)]
    pooled = contrast("u", *_split(five), set(range(5)), [], min_runs=4)
    assert alone is not None and pooled is not None and alone.p_value > 0.1 and pooled.p_value < 0.01
    assert pooled.worse and pooled.counts["situations"] == 5


def test_a_hard_situation_does_not_make_its_unit_look_bad() -> None:
    # the unit is shown in the hard task (20% success with or without it), never in the easy one
    rows = (
        _episodes(0, set(), 4, 16)  # hard, before the unit existed
        + _episodes(0, {"u"}, 4, 16)  # hard, shown: no worse
        + _episodes(1, set(), 18, 2)  # easy, never shown
    )
    episodes, labels = _split(rows)
    naive = fisher_exact([[4, 16], [22, 18]])[1]  # shown against every episode not shown it
    assert naive < 0.05
    judgement = contrast("u", episodes, labels, {0, 1}, [], min_runs=5)
    assert judgement is not None and judgement.counts["situations"] == 1 and judgement.p_value > 0.5
    assert judge(episodes, labels, {"u": {0, 1}}, newest_first=["u"], alpha=0.05, min_runs=5) == (1, [])


def test_a_unit_pushed_out_by_a_bad_one_takes_no_credit() -> None:
    # "wrong" is new and shown in three tasks, where it pushes out a different old unit each time
    rows = []
    for task, old in enumerate(("a", "b", "c")):
        rows += _episodes(task, {old}, 7, 1) + _episodes(task, {"wrong"}, 2, 6)
    episodes, labels = _split(rows)
    relevant = {u: {0, 1, 2} for u in ("wrong", "a", "b", "c")}
    judged, found = judge(episodes, labels, relevant, newest_first=["wrong", "a", "b", "c"], alpha=0.05, min_runs=5)
    assert judged == 4 and [(j.uid, j.worse) for j in found] == [("wrong", True)]
    assert found[0].counts == {
        "shown": 24,
        "shown_succeeded": 6,
        "not_shown": 24,
        "not_shown_succeeded": 21,
        "situations": 3,
        "excess_successes": found[0].counts["excess_successes"],
        "p_value": found[0].p_value,
    }
    assert found[0].counts["excess_successes"] == pytest.approx(6 - 24 * 27 / 48, abs=0.01)  # observed - expected


def test_a_bad_unit_the_better_one_pushed_out_is_still_caught() -> None:
    # "right" helps in all seven tasks; in the three cancel tasks it also takes the slot "wrong" had
    rows = []
    for task in range(3):
        rows += _episodes(task, set(), 2, 2) + _episodes(task, {"wrong"}, 0, 2) + _episodes(task, {"right"}, 4, 0)
    for task in range(3, 7):
        rows += _episodes(task, set(), 1, 3) + _episodes(task, {"right"}, 4, 1)
    episodes, labels = _split(rows)
    relevant = {"wrong": set(range(7)), "right": set(range(7))}
    judged, found = judge(episodes, labels, relevant, newest_first=["wrong", "right"], alpha=0.05, min_runs=5)
    assert judged == 2 and [(j.uid, j.worse) for j in found] == [("right", False), ("wrong", True)]
    assert found[1].counts["shown"] == 6 and found[1].counts["shown_succeeded"] == 0
    # strata split by the showing of "right" drop its episodes: "wrong" 0/6 against 6/12 is not clear
    kept = [(e, label) for e, label in zip(episodes, labels) if "right" not in e.shown]
    alone = contrast("wrong", *_split(kept), relevant["wrong"], [], min_runs=5)
    assert alone is not None and alone.p_value > 0.05 > found[1].p_value


def test_the_score_test_of_one_unit_is_the_mantel_haenszel_test() -> None:
    rows = _episodes(0, set(), 5, 3) + _episodes(0, {"u"}, 2, 4) + _episodes(1, set(), 1, 5) + _episodes(1, {"u"}, 1, 1)
    judgement = contrast("u", *_split(rows), {0, 1}, [], min_runs=5)
    # (shown, shown_succeeded, episodes, successes) per situation
    strata = [(6, 2, 14, 7), (2, 1, 8, 2)]
    expected = sum(n1 * k / n for n1, _, n, k in strata)
    variance = sum(n1 * (n - n1) * k * (n - k) / (n * n * (n - 1)) for n1, _, n, k in strata)
    statistic = (sum(t for _, t, _, _ in strata) - expected) ** 2 / variance
    assert judgement is not None and judgement.p_value == pytest.approx(chi2.sf(statistic, 1), abs=1e-4)
    assert judgement.counts["excess_successes"] == pytest.approx(3 - expected, abs=0.01)


def test_a_judged_unit_never_shown_here_changes_nothing() -> None:
    # "other" was judged elsewhere; in these situations it carries no information and is left out
    rows = _episodes(0, set(), 11, 5) + _episodes(0, {"u"}, 3, 13)
    alone = contrast("u", *_split(rows), {0}, [], min_runs=5)
    beside = contrast("u", *_split(rows), {0}, ["other"], min_runs=5)
    assert alone is not None and beside is not None and alone.p_value < 0.01
    assert beside.p_value == pytest.approx(alone.p_value, abs=1e-4) and beside.worse


def test_too_few_episodes_are_not_judged() -> None:
    episodes, labels = _split(_episodes(0, set(), 4, 0) + _episodes(0, {"u"}, 0, 4))
    assert contrast("u", episodes, labels, {0}, [], min_runs=5) is None
    assert contrast("u", episodes, labels, {0}, [], min_runs=4) is not None
    assert contrast("u", episodes, labels, set(), [], min_runs=1) is None  # no situation it is about


def test_situations_group_close_first_queries() -> None:
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.995, 0.0998], [0.6, 0.8]])
    assert situations(vectors, 0.9) == [0, 1, 0, 2]
    assert situations(vectors, 0.5) == [0, 1, 0, 1]


def test_a_task_repeated_thousands_of_times_is_judged_on_its_latest_episodes_each_way() -> None:
    # 1,500 episodes before the unit (half succeeded), then 1,500 shown it (a fifth succeeded): the
    # judgement reads the latest 100 of each, and still finds the unit worse
    before = [Episode(f"b{n}", n % 2 == 0, set(), ["q"]) for n in range(1500)]
    after = [Episode(f"a{n}", n % 5 == 0, {"u"}, ["q"]) for n in range(1500)]
    judgement = contrast("u", before + after, [0] * 3000, {0}, [], min_runs=5)
    assert judgement is not None and judgement.worse and judgement.p_value < 0.05
    assert judgement.counts["shown"] == judgement.counts["not_shown"] == EPISODES_EACH_WAY
