"""`why TEXT`: what the memory set aside that matches TEXT, and what happened to each item.

The agent's answer to "do you remember that I said …?": the best-matching dormant, archived and
merged records and dormant, superseded and quarantined units, each with its latest change (when,
which step or run, why), its weight, and what it was merged into or superseded by. `revive` wakes
them: records become active, units active again, each with a history line and a weight of at
least θ_dormant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from ..results import Result
from ..store import units
from ..store.db import in_ids
from ..store.state import set_state

if TYPE_CHECKING:
    from ..store.store import Store

# Candidates read per kind, most recently changed first: `why` reads cached vectors, never the model.
MAX_CANDIDATES = 20000


@dataclass
class SetAside(Result):
    id: str
    type: str  # "memory" | "unit"
    text: str
    status: str  # a record's state (dormant, archived) or a unit's status
    similarity: float
    weight: float
    when: str | None
    step: str | None  # the history action of the latest change (state:dormant, merged, superseded…)
    reason: str | None
    run_id: str | None
    merged_into: str | None = None
    superseded_by: str | None = None
    revived: bool = False


@dataclass
class WhyResult(Result):
    text: str
    items: list[SetAside] = field(default_factory=list)


_RECORDS = (
    "SELECT id, text, state, weight, merged_into, NULL FROM records "
    "WHERE state IN ('dormant', 'archived') OR merged_into IS NOT NULL ORDER BY marked_at DESC NULLS LAST LIMIT ?"
)
_UNITS = (
    "SELECT id, text, status, weight, NULL, superseded_by FROM units "
    "WHERE status IN ('dormant', 'superseded', 'quarantined') ORDER BY updated DESC LIMIT ?"
)


def _latest_change(store: "Store", ids: list[str]) -> dict[str, tuple]:
    where, params = in_ids("item_id", ids)
    rows = store.con.execute(
        f"SELECT item_id, happened_at, action, detail, run_id FROM history WHERE {where} ORDER BY happened_at", params
    ).fetchall()
    return {r[0]: r[1:] for r in rows}  # the last row per item wins


def why(store: "Store", text: str, *, limit: int = 5, revive: bool = False) -> WhyResult:
    if not isinstance(text, str) or not text.strip():
        raise InputError("say what to look for", hint='e.g. expengine why "my flight to Tokyo"')
    if limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}")
    found = [("memory", r) for r in store.con.execute(_RECORDS, [MAX_CANDIDATES]).fetchall()]
    found += [("unit", r) for r in store.con.execute(_UNITS, [MAX_CANDIDATES]).fetchall()]
    if not found:
        return WhyResult(text=text)
    vectors = store.embeddings.encode([r[1] for _, r in found], indexed=True)
    query = store.embeddings.encode([text])[0]
    similarity = np.asarray(vectors) @ query
    best = sorted(range(len(found)), key=lambda n: -float(similarity[n]))[:limit]
    changes = _latest_change(store, [found[n][1][0] for n in best])
    items = []
    for n in best:
        kind, (item_id, item_text, status, weight, merged_into, superseded_by) = found[n]
        when, step, reason, run_id = changes.get(item_id, (None, None, None, None))
        items.append(
            SetAside(
                id=item_id,
                type=kind,
                text=item_text,
                status=status,
                similarity=round(float(similarity[n]), 4),
                weight=round(float(weight), 4),
                when=when.isoformat() if when else None,
                step=step,
                reason=reason,
                run_id=run_id,
                merged_into=merged_into,
                superseded_by=superseded_by,
            )
        )
    if revive:
        _revive(store, items)
    return WhyResult(text=text, items=items)


def _revive(store: "Store", items: list[SetAside]) -> None:
    """Wake what `why` found: records back to active, units back to active (both logged)."""
    reason = "revived by why"
    records = [i.id for i in items if i.type == "memory" and i.status != "active"]
    unit_ids = [i.id for i in items if i.type == "unit"]
    with store.transaction():
        set_state(store, records, "active", reason=reason)
        revived, revived_ids = in_ids("id", records)
        store.con.execute(  # as a woken unit: the next cycle must not put it straight back to sleep
            f"UPDATE records SET weight = GREATEST(weight, ?) WHERE {revived} AND state = 'active'",
            [store.config.decay.theta_dormant, *revived_ids],
        )
        units.set_status(store, unit_ids, "active", reason=reason)
    revived, revived_ids = in_ids("id", records)
    woken, woken_ids = in_ids("id", unit_ids)
    now_active = {
        r[0]
        for r in store.con.execute(
            f"SELECT id FROM records WHERE {revived} AND state = 'active' UNION ALL "
            f"SELECT id FROM units WHERE {woken} AND status = 'active'",
            [*revived_ids, *woken_ids],
        ).fetchall()
    }
    for item in items:
        item.revived = item.id in now_active
