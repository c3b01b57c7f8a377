"""Outcome credit by contrast: the units the query log showed an episode against how it ended.

An episode is a goal (the log entry's `goal_id`) or else a session. It has ended when its goal
succeeded or failed (the `goals` table, which outcome records and openai-chat rewards feed). For each
unit shown in at least `credit.min_runs` ended episodes, the contrast is the ended episodes *not*
shown it that asked about the same situation (a logged query's cosine similarity to the unit reaches
`query.unit_slot_floor`; episodes from before the unit existed count): raw success only says how hard
a task was, the contrast says what the unit changed. Fisher's exact test (as lessons.py uses) at
`credit.alpha`:

- clearly worse: the unit becomes suspect (history "suspect" with the counts); still clearly worse in
  a later cycle, it is quarantined through `units.set_status`, as harmful feedback does;
- clearly better: utility += δ_task_success (history "credit" with the counts), once per new evidence.

Explicit feedback still moves utility by its own δ, on top. Off by default (`credit.enabled`): the
tau-bench simulation (bench/credit.py) showed the "same situation" contrast mixing tasks of different
difficulty, so it moved neutral units.
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
from .cycle import Skipped

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


@dataclass
class Episode:
    key: str
    succeeded: bool
    shown: set[str]
    queries: list[str]


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


def _fisher(shown_ok: int, shown_failed: int, other_ok: int, other_failed: int) -> float:
    from scipy.stats import fisher_exact

    return float(fisher_exact([[shown_ok, shown_failed], [other_ok, other_failed]])[1])


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
            f"SELECT id, text FROM units WHERE id IN (SELECT unnest(?)) AND {units.LIVE_SQL}", [candidates]
        ).fetchall()
    }
    if not live:
        report.seconds = round(time.perf_counter() - started, 3)
        return report
    texts = sorted({q for e in episodes for q in e.queries})
    query_vectors = dict(zip(texts, store.embeddings.encode(texts)))
    unit_ids = sorted(live)
    unit_vectors = np.asarray(store.embeddings.encode([live[u] for u in unit_ids]))
    floor = store.config.query.unit_slot_floor
    near = {  # episode → the units one of its queries was close to
        e.key: {
            unit_ids[i]
            for i in np.flatnonzero((np.stack([query_vectors[q] for q in e.queries]) @ unit_vectors.T).max(0) >= floor)
        }
        for e in episodes
    }
    for uid in unit_ids:
        shown = [e for e in episodes if uid in e.shown]
        others = [e for e in episodes if uid not in e.shown and uid in near[e.key]]
        if len(shown) < cfg.min_runs or len(others) < cfg.min_runs:
            continue
        report.units_judged += 1
        s_ok, o_ok = sum(e.succeeded for e in shown), sum(e.succeeded for e in others)
        counts: dict[str, float] = {
            "shown": len(shown),
            "shown_succeeded": s_ok,
            "not_shown": len(others),
            "not_shown_succeeded": o_ok,
        }
        p_value = _fisher(s_ok, len(shown) - s_ok, o_ok, len(others) - o_ok)
        counts["p_value"] = round(p_value, 4)
        if p_value >= cfg.alpha:
            continue
        worse = s_ok / len(shown) < o_ok / len(others)
        last = _last_detail(store, uid, ("credit", "suspect"))
        if last is not None and {k: last.get(k) for k in ("shown", "not_shown")} == {
            k: counts[k] for k in ("shown", "not_shown")
        }:
            continue  # judged on this very evidence before
        if worse:
            if _last_detail(store, uid, ("suspect",)) is None:
                store.history_log(uid, "suspect", counts, run_id=run_id, at=now)
                report.suspect += 1
            else:
                reason = (
                    f"outcome credit: {s_ok}/{len(shown)} succeeded when shown vs {o_ok}/{len(others)} "
                    f"when not (p={p_value:.3g})"
                )
                report.quarantined += units.set_status(
                    store, [uid], "quarantined", reason=reason, run_id=run_id, now=now
                )
        else:
            units.credit_outcome(
                store, uid, delta=store.config.decay.delta_task_success, detail=counts, run_id=run_id, now=now
            )
            report.credited += 1
    report.seconds = round(time.perf_counter() - started, 3)
    return report


class CreditStep:
    """Credit runs first in a cycle, before decay changes the weights it does not read."""

    def run(self, store: "Store", ctx: "CycleContext") -> "CreditReport | Skipped":
        if not store.config.credit.enabled:
            return Skipped(skipped="credit.enabled is false")
        with store.transaction():
            return credit(store, run_id=ctx.run_id, now=ctx.now)
