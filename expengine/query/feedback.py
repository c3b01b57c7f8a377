"""Feedback moves utility; a unit that keeps being harmful is quarantined, and can come back.

A unit is quarantined when its harmful reports reach `refine.harmful_quarantine` and outnumber the
helpful ones: it leaves the LanceDB index (so no query returns it) but stays in DuckDB, listed by
`units --status quarantined`. It is restored (back to `active`, re-indexed) when helpful feedback
brings helpful reports level with the harmful ones, or at once by `restore_unit`
(`expengine feedback ID --restore`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InputError, NotFoundError
from ..results import Result
from ..store import units

if TYPE_CHECKING:
    from ..store.store import Store

UTILITY_STEP = 0.2


def apply_feedback(
    store: "Store",
    *,
    target: str,
    helpful: bool,
    note: str | None = None,
    source: str | None = None,
    missing_ok: bool = False,
) -> dict[str, Any]:
    """Utility ±step on the unit or record `target`; returns what changed."""
    delta = UTILITY_STEP if helpful else -UTILITY_STEP
    con = store.con
    if units.status_of(store, target) is not None:
        harmful, helpful_count, status = units.count_feedback(store, target, helpful=helpful, delta=delta)
        store.history_log(target, "feedback", {"helpful": helpful, "note": note, "source": source})
        quarantined = restored = False
        if helpful and status == "quarantined" and helpful_count >= harmful:
            restored = restore_unit(store, target, reason=f"{helpful_count} helpful vs {harmful} harmful reports")
        elif (
            not helpful
            and status == "active"
            and harmful >= store.config.refine.harmful_quarantine
            and harmful > helpful_count
        ):
            reason = f"{harmful} harmful vs {helpful_count} helpful reports"
            quarantined = units.set_status(store, [target], "quarantined", reason=reason) == 1
        return {"id": target, "type": "unit", "delta": delta, "quarantined": quarantined, "restored": restored}
    if con.execute("SELECT 1 FROM records WHERE id = ?", [target]).fetchone() is not None:
        con.execute("UPDATE records SET utility = utility + ? WHERE id = ?", [delta, target])
        store.history_log(target, "feedback", {"helpful": helpful, "note": note, "source": source})
        return {"id": target, "type": "memory", "delta": delta, "quarantined": False, "restored": False}
    if missing_ok:
        return {"id": target, "type": None, "delta": 0.0, "quarantined": False, "restored": False}
    raise NotFoundError(f"no unit or record with id {target!r}", hint="see `expengine units` or `expengine show ID`")


def restore_unit(store: "Store", unit_id: str, *, reason: str = "restored by the user") -> bool:
    """Bring a quarantined unit back into queries; returns False when it was not quarantined."""
    status = units.status_of(store, unit_id)
    if status is None:
        raise NotFoundError(f"no unit with id {unit_id!r}", hint="see `expengine units --status quarantined`")
    if status != "quarantined":
        return False
    return units.set_status(store, [unit_id], "active", reason=reason) == 1


@dataclass
class FeedbackResult(Result):
    id: str
    type: str
    helpful: bool | None
    delta: float
    utility: float
    status: str
    quarantined: bool
    restored: bool


def give_feedback(
    store: "Store", item_id: str, *, helpful: bool | None, note: str | None = None, restore: bool = False
) -> FeedbackResult:
    """What `expengine feedback` does: a helpful/harmful report, or an explicit restore of a unit."""
    if helpful is None and not restore:
        raise InputError("say --helpful or --harmful (or --restore for a quarantined unit)")
    change: dict[str, Any] = {"type": "unit", "delta": 0.0, "quarantined": False, "restored": False}
    if helpful is not None:
        change = apply_feedback(store, target=item_id, helpful=helpful, note=note, source="cli")
    if restore:
        change["restored"] = restore_unit(store, item_id, reason=note or "restored by the user") or change["restored"]
    table, state = ("units", "status") if change["type"] == "unit" else ("records", "state")
    utility, status = store.con.execute(f"SELECT utility, {state} FROM {table} WHERE id = ?", [item_id]).fetchall()[0]
    return FeedbackResult(
        id=item_id,
        type=change["type"],
        helpful=helpful,
        delta=change["delta"],
        utility=utility,
        status=status,
        quarantined=change["quarantined"],
        restored=change["restored"],
    )
