"""Reads of the `units` table for people and reports: listing, tracing a unit to its records, and
the units decay put to sleep. Writes stay in units.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import InputError, NotFoundError
from .db import json_ids
from .records import fetch_records
from .units import STATUSES, UNIT_FIELDS

if TYPE_CHECKING:
    from .store import Store


def _unit_dict(row: tuple) -> dict[str, Any]:
    unit = dict(zip(UNIT_FIELDS, row))
    unit["source_ids"] = json_ids(unit["source_ids"])
    return unit


def list_units(
    store: "Store",
    *,
    agent: str | None = None,
    status: str | None = None,
    kind: str | None = None,
    user: str | None = None,
) -> list[dict[str, Any]]:
    """Every field of every unit matching the filters, best first (confidence, then support); `user`:
    that user's personal units only. A status no unit can have is a usage mistake (exit 2), not an empty list."""
    if status is not None and status not in STATUSES:
        raise InputError(f"unknown unit status {status!r}", hint=f"one of: {', '.join(STATUSES)}")
    where, params = [], []
    for column, value in (("agent", agent), ("status", status), ("kind", kind), ("user", user)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = f"SELECT {', '.join(UNIT_FIELDS)} FROM units"
    if where:
        sql += " WHERE " + " AND ".join(where)
    rows = store.con.execute(sql + " ORDER BY confidence DESC, support DESC, id", params).fetchall()
    return [_unit_dict(row) for row in rows]


def trace_unit(store: "Store", uid: str) -> dict[str, Any]:
    """The unit, every raw record it came from (whatever their state) and its history."""
    row = store.con.execute(f"SELECT {', '.join(UNIT_FIELDS)} FROM units WHERE id = ?", [uid]).fetchall()
    if not row:
        raise NotFoundError(f"no unit with id {uid!r}", hint="see `expengine units`")
    unit = _unit_dict(row[0])
    records = fetch_records(store, unit["source_ids"])
    found = {r["id"] for r in records}
    history = store.con.execute(
        "SELECT happened_at, action, detail, run_id FROM history WHERE item_id = ? ORDER BY happened_at", [uid]
    ).fetchall()
    return {
        "unit": unit,
        "records": records,
        "missing_source_ids": [i for i in unit["source_ids"] if i not in found],
        "history": [dict(zip(("happened_at", "action", "detail", "run_id"), h)) for h in history],
    }


def sleepers(store: "Store", theta: float) -> list[tuple[str, str, float]]:
    """Active units whose weight is under `theta` (decay put them there): (id, text, weight)."""
    return store.con.execute(
        "SELECT id, text, weight FROM units WHERE status = 'active' AND weight < ? ORDER BY weight, id", [theta]
    ).fetchall()
