"""Feedback moves utility; a unit that keeps being harmful is quarantined."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import NotFoundError

if TYPE_CHECKING:
    from ..engine import Engine

UTILITY_STEP = 0.2


def apply_feedback(
    engine: "Engine", *, target: str, helpful: bool, note: str | None = None, source: str | None = None,
    missing_ok: bool = False,
) -> dict:
    """Utility ±step on the unit or record `target`; returns what changed."""
    delta = UTILITY_STEP if helpful else -UTILITY_STEP
    con = engine.con
    unit = con.execute("SELECT harmful FROM units WHERE id = ?", [target]).fetchone()
    if unit is not None:
        column = "helpful" if helpful else "harmful"
        con.execute(f"UPDATE units SET utility = utility + ?, {column} = {column} + 1 WHERE id = ?", [delta, target])
        harmful, helpful_count, status = con.execute(
            "SELECT harmful, helpful, status FROM units WHERE id = ?", [target]
        ).fetchone()
        quarantined = False
        if (
            not helpful
            and status == "active"
            and harmful >= engine.config.refine.harmful_quarantine
            and harmful > helpful_count
        ):
            con.execute("UPDATE units SET status = 'quarantined' WHERE id = ?", [target])
            engine.index.delete("units", [target])
            quarantined = True
        engine.history_log(target, "feedback", {"helpful": helpful, "note": note, "source": source})
        if quarantined:
            engine.history_log(target, "quarantined", f"{harmful} harmful vs {helpful_count} helpful reports")
        return {"id": target, "type": "unit", "delta": delta, "quarantined": quarantined}
    if con.execute("SELECT 1 FROM records WHERE id = ?", [target]).fetchone() is not None:
        con.execute("UPDATE records SET utility = utility + ? WHERE id = ?", [delta, target])
        engine.history_log(target, "feedback", {"helpful": helpful, "note": note, "source": source})
        return {"id": target, "type": "memory", "delta": delta, "quarantined": False}
    if missing_ok:
        return {"id": target, "type": None, "delta": 0.0, "quarantined": False}
    raise NotFoundError(f"no unit or record with id {target!r}", hint="see `expengine units` or `expengine show ID`")
