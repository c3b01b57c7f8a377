"""Decay: W ← W·λ once per cycle; λ by category, raised for important memories and long-term goals.
Units decay too, with λ by kind (`decay.lambda_by_unit_kind`): an active unit under θ_dormant goes
dormant (still found, at its low weight, and woken when a query shows it); units are never purged.

Pinned and protected memories do not decay, nor do the units standing for them. Active and dormant memories both decay (a dormant one
must keep sinking to reach θ_purge); archived ones, and a rule's sources waiting out the observation
window to be archived, are out of the cycle. A λ above 1 (a boost on a
high λ) lets a weight grow back, but never past 1.0 or past where it already was.
Reinforcement on use (W += δ_access) happens at query time, not here.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clock import utcnow
from ..results import Result
from ..store import unit_reads, units
from ..store.filters import sql_str
from ..store.state import set_state
from ..store.vocabulary import INDEXED_RECORDS_SQL
from .common import examples, sql_float

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext


@dataclass
class DecayReport(Result):
    decayed: int = 0
    became_dormant: int = 0
    units_dormant: int = 0
    mean_weight_before: float = 0.0
    mean_weight_after: float = 0.0
    examples: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        return f"{self.decayed} decayed, {self.became_dormant} dormant, {self.units_dormant} units dormant"


def lambda_sql(store: "Store") -> str:
    """SQL for each record's λ this cycle (columns of `records r`; a long-term goal's records take
    at least `decay.lambda_long_term`)."""
    cfg = store.config.decay
    by_category = " ".join(
        f"WHEN {sql_str(cat)} THEN {sql_float(lam)}" for cat, lam in sorted(cfg.lambda_by_category.items())
    )
    base = (
        f"(CASE r.category {by_category} ELSE {sql_float(cfg.lambda_global)} END)"
        if by_category
        else sql_float(cfg.lambda_global)
    )
    boosted = (
        f"({base} + CASE WHEN r.importance >= {sql_float(cfg.importance_threshold)} "
        f"THEN {sql_float(cfg.lambda_importance_boost)} ELSE 0 END)"
    )
    long_term = (
        "CASE WHEN r.goal_id IN (SELECT goal_id FROM goals WHERE long_term) "
        f"THEN {sql_float(cfg.lambda_long_term)} ELSE 0 END"
    )
    return f"CASE WHEN r.pinned OR r.protected THEN 1.0 ELSE GREATEST({boosted}, {long_term}) END"


def _new_weight_sql(store: "Store") -> str:
    return f"LEAST(r.weight * ({lambda_sql(store)}), GREATEST(r.weight, 1.0))"


def decay(store: "Store", *, dry_run: bool, run_id: str | None = None, now: dt.datetime | None = None) -> DecayReport:
    """One scan for the report and one UPDATE for the weights, both in DuckDB: no row comes to Python
    but the few that fall asleep."""
    started = time.perf_counter()
    con = store.con
    theta = sql_float(store.config.decay.theta_dormant)
    new_weight = _new_weight_sql(store)
    indexed = INDEXED_RECORDS_SQL
    n, before, after = con.execute(
        f"SELECT count(*), coalesce(avg(weight), 0), coalesce(avg(new_weight), 0) FROM "
        f"(SELECT r.weight, {new_weight} AS new_weight FROM records r WHERE {indexed}) c WHERE new_weight <> weight"
    ).fetchall()[0]
    report = DecayReport(
        decayed=int(n), mean_weight_before=round(float(before), 4), mean_weight_after=round(float(after), 4)
    )
    may_sleep = f"r.state = 'active' AND NOT (r.pinned OR r.protected) AND {indexed}"
    if dry_run:
        sleepers = con.execute(
            f"SELECT r.id, r.text, {new_weight} AS w FROM records r WHERE {may_sleep} AND {new_weight} < {theta} "
            "ORDER BY w, r.id"
        ).fetchall()
    else:
        con.execute(f"UPDATE records AS r SET weight = {new_weight} WHERE {indexed} AND {new_weight} <> r.weight")
        sleepers = con.execute(
            f"SELECT r.id, r.text, r.weight FROM records r WHERE {may_sleep} AND r.weight < {theta} ORDER BY r.weight, r.id"
        ).fetchall()
    report.became_dormant = len(sleepers)
    report.examples = examples(sleepers, lambda r: {"id": r[0], "text": r[1], "weight": round(r[2], 4)})
    if not dry_run:
        cfg = store.config.decay
        unused_since = (now or utcnow()) - dt.timedelta(hours=cfg.observation_window_hours)
        units.decay(store, cfg.lambda_by_unit_kind, default=1.0, unused_since=unused_since)
        sleeping_units = [r[0] for r in unit_reads.sleepers(store, cfg.theta_dormant)]
        report.units_dormant = units.set_status(
            store,
            sleeping_units,
            "dormant",
            reason=f"decay: unused, weight fell below theta_dormant {cfg.theta_dormant}",
            run_id=run_id,
            now=now,
        )
        set_state(
            store,
            [r[0] for r in sleepers],
            "dormant",
            reason=f"decay: weight fell below theta_dormant {store.config.decay.theta_dormant}",
            run_id=run_id,
            now=now,
        )
    report.seconds = round(time.perf_counter() - started, 3)
    return report


class DecayStep:
    """Decay is defined per cycle, so it runs every cycle."""

    def run(self, store: "Store", ctx: "CycleContext") -> DecayReport:
        return decay(store, dry_run=False, run_id=ctx.run_id, now=ctx.now)
