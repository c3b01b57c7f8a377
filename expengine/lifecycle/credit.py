"""Outcome credit by contrast: the units the query log showed an episode against how it ended.

An episode is a goal (the log entry's `goal_id`) or else a session. It has ended when its goal
succeeded or failed (the `goals` table, which outcome records and openai-chat rewards feed). Raw
success only says how hard a task was, so a unit is judged only within situations (contrast.py):
episodes whose first queries are at least `credit.same_situation` cosine alike, where a logged query
is close to the unit (`query.unit_slot_floor`). Within each, the episodes shown the unit are compared
with those not shown it (before it existed, or when a query did not show it), pooled over situations
by the score test of a conditional logistic regression at `credit.alpha`, the units judged before
it fitted beside it, once `credit.min_runs` episodes of each side are in situations that compare:

- clearly worse: the unit becomes suspect (history "suspect" with the counts); still clearly worse in
  a later cycle, on new evidence, it is quarantined through `units.set_status`, as harmful feedback does;
- clearly better: utility += δ_task_success (history "credit" with the counts), once per new evidence.

Explicit feedback still moves utility by its own δ, on top.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..results import Result
from ..store import query_log, units
from .contrast import Episode, Judgement, judge, situations
from .cycle import Skipped, changed_inputs, set_meta

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext


@dataclass
class CreditReport(Result):
    episodes: int = 0  # logged episodes that have ended
    units_judged: int = 0  # units with enough shown and comparable episodes
    credited: int = 0
    suspect: int = 0
    quarantined: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"{self.episodes} ended episodes, {self.units_judged} units judged: {self.credited} credited, "
            f"{self.suspect} suspect, {self.quarantined} quarantined"
        )


def ended_episodes(store: "Store") -> list[Episode]:
    """Logged episodes whose goal (or, for a session, its latest goal) succeeded or failed."""
    by_goal = dict(
        store.con.execute("SELECT goal_id, status FROM goals WHERE status IN ('succeeded', 'failed')").fetchall()
    )
    by_session = dict(
        store.con.execute(
            "SELECT session, arg_max(status, updated) FROM goals WHERE status IN ('succeeded', 'failed') "
            "AND session IS NOT NULL GROUP BY session"
        ).fetchall()
    )
    episodes: dict[str, Episode] = {}
    for entry in query_log.entries(store):
        goal, session = entry["goal_id"], entry["session"]
        status = by_goal.get(goal) if goal else by_session.get(session)
        if status is None:
            continue
        key = f"goal:{goal}" if goal else f"session:{session}"
        episode = episodes.setdefault(key, Episode(key, status == "succeeded", set(), []))
        episode.shown.update(entry["unit_ids"])
        episode.queries.append(entry["query"])
    return list(episodes.values())


def _last_detail(store: "Store", uid: str, actions: tuple[str, ...]) -> dict[str, Any] | None:
    row = store.con.execute(
        "SELECT detail FROM history WHERE item_id = ? AND action IN (SELECT unnest(?)) ORDER BY happened_at DESC "
        "LIMIT 1",
        [uid, list(actions)],
    ).fetchone()
    return json.loads(row[0]) if row and row[0] else None


def credit(store: "Store", *, run_id: str | None = None, now: dt.datetime | None = None) -> CreditReport:
    started = time.perf_counter()
    cfg = store.config.credit
    report = CreditReport()
    episodes = ended_episodes(store)
    report.episodes = len(episodes)
    candidates = sorted({u for e in episodes for u in e.shown})
    live = {
        r[0]: r[1]
        for r in store.con.execute(
            f"SELECT id, text FROM units WHERE id IN (SELECT unnest(?)) AND {units.LIVE_SQL} ORDER BY created DESC, id",
            [candidates],
        ).fetchall()
    }
    if not live:
        report.seconds = round(time.perf_counter() - started, 3)
        return report
    texts = sorted({q for e in episodes for q in e.queries})
    query_vectors = dict(zip(texts, store.embeddings.encode(texts)))
    labels = situations(np.stack([query_vectors[e.queries[0]] for e in episodes]), cfg.same_situation)
    unit_ids = list(live)
    unit_vectors = np.asarray(store.embeddings.encode([live[u] for u in unit_ids]))
    floor = store.config.query.unit_slot_floor
    near = np.zeros((max(labels) + 1, len(unit_ids)), dtype=bool)  # situation × unit: a query close to it
    for episode, label in zip(episodes, labels):
        closest = (np.stack([query_vectors[q] for q in episode.queries]) @ unit_vectors.T).max(0)
        near[label] |= closest >= floor
    relevant = {uid: set(np.flatnonzero(near[:, i]).tolist()) for i, uid in enumerate(unit_ids)}
    report.units_judged, judgements = judge(
        episodes, labels, relevant, newest_first=unit_ids, alpha=cfg.alpha, min_runs=cfg.min_runs
    )
    for judgement in judgements:
        _act(store, judgement, report, run_id=run_id, now=now)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _act(
    store: "Store", judgement: Judgement, report: CreditReport, *, run_id: str | None, now: dt.datetime | None
) -> None:
    """Suspect, quarantine or credit a unit on a clear judgement, unless this very evidence moved it before."""
    uid, counts = judgement.uid, judgement.counts
    last = _last_detail(store, uid, ("credit", "suspect"))
    if last is not None and all(last.get(k) == counts[k] for k in ("shown", "not_shown")):
        return
    if not judgement.worse:
        units.credit_outcome(
            store, uid, delta=store.config.decay.delta_task_success, detail=counts, run_id=run_id, now=now
        )
        report.credited += 1
    elif _last_detail(store, uid, ("suspect",)) is None:
        store.history_log(uid, "suspect", counts, run_id=run_id, at=now)
        report.suspect += 1
    else:
        reason = (
            f"outcome credit: {counts['shown_succeeded']}/{counts['shown']} succeeded when shown vs "
            f"{counts['not_shown_succeeded']}/{counts['not_shown']} when not, in {counts['situations']} "
            f"situations (p={judgement.p_value:.3g})"
        )
        report.quarantined += units.set_status(store, [uid], "quarantined", reason=reason, run_id=run_id, now=now)


# What credit reads: the query log and the ended goals. Unchanged since the last cycle, the judgements
# are too (and `_act` would repeat none of them), so the step is skipped.
CREDIT_INPUTS = "credit.inputs"  # store_meta
CREDIT_INPUTS_SQL = """
    SELECT (SELECT count(*) FROM query_log), (SELECT max(asked_at) FROM query_log),
           (SELECT count(*) FROM goals WHERE status IN ('succeeded', 'failed')),
           (SELECT bit_xor(hash(goal_id, status, session)) FROM goals WHERE status IN ('succeeded', 'failed'))
"""


class CreditStep:
    """Credit runs first in a cycle, before decay changes the weights it does not read."""

    def run(self, store: "Store", ctx: "CycleContext") -> "CreditReport | Skipped":
        if not store.config.credit.enabled:
            return Skipped(skipped="credit.enabled is false")
        fingerprint = changed_inputs(store, ctx, CREDIT_INPUTS, CREDIT_INPUTS_SQL)
        if fingerprint is None:
            return Skipped(skipped="no query logged and no goal ended since the last cycle")
        with store.transaction():
            report = credit(store, run_id=ctx.run_id, now=ctx.now)
            set_meta(store, CREDIT_INPUTS, fingerprint)
            return report
