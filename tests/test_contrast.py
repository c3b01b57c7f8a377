"""The statistics of outcome credit (lifecycle/contrast.py) on hand-made episodes: a hard situation
does not make the unit shown there look bad, and a unit pushed out of the prompt by a bad one does
not take its credit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import fisher_exact

from expengine.lifecycle.contrast import Episode, contrast, judge, pooled_exact, situations


def _episodes(label: int, shown: set[str], succeeded: int, failed: int) -> list[tuple[Episode, int]]:
    outcomes = [True] * succeeded + [False] * failed
    return [(Episode(f"{label}-{sorted(shown)}-{n}", ok, set(shown), ["q"]), label) for n, ok in enumerate(outcomes)]


def _split(rows: list[tuple[Episode, int]]) -> tuple[list[Episode], list[int]]:
    return [e for e, _ in rows], [label for _, label in rows]


def test_one_stratum_is_fishers_exact_test() -> None:
    fewer, more = pooled_exact([(3, 16, 11, 16)])
    assert fewer == pytest.approx(fisher_exact([[3, 13], [11, 5]], alternative="less")[1])
    assert more == pytest.approx(fisher_exact([[3, 13], [11, 5]], alternative="greater")[1])


def test_pooled_strata_add_evidence_one_alone_lacks() -> None:
    alone = pooled_exact([(1, 4, 3, 4)])[0]
    assert alone > 0.2 and pooled_exact([(1, 4, 3, 4)] * 5)[0] < 0.01


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
        "p_value": found[0].p_value,
    }


def test_too_few_episodes_are_not_judged() -> None:
    episodes, labels = _split(_episodes(0, set(), 4, 0) + _episodes(0, {"u"}, 0, 4))
    assert contrast("u", episodes, labels, {0}, [], min_runs=5) is None
    assert contrast("u", episodes, labels, {0}, [], min_runs=4) is not None
    assert contrast("u", episodes, labels, set(), [], min_runs=1) is None  # no situation it is about


def test_situations_group_close_first_queries() -> None:
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.995, 0.0998], [0.6, 0.8]])
    assert situations(vectors, 0.9) == [0, 1, 0, 2]
    assert situations(vectors, 0.5) == [0, 1, 0, 1]
