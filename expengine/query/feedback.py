"""`expengine feedback`: a helpful or harmful report, or an explicit restore, and what the item
looks like after it. The utility step and the quarantine rule are store/feedback.py's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..results import Result
from ..store.feedback import apply_feedback, restore_unit

if TYPE_CHECKING:
    from ..store.store import Store


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
