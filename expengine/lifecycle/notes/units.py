"""The one place notes are written to the `units` table: insert, merge, supersede.

Each write does the DuckDB row, the history entry and its `pending_index` entry together; `flush`
then brings LanceDB level in one batch (a crash before it is healed on the next open, as for every
pending id). When `store/units.py` becomes the owner of every unit write, these functions forward
to it.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from ...store.index import UNITS

if TYPE_CHECKING:
    from ...store.store import Store

NOTE_KIND = "note"
COLUMNS = (
    "id",
    "kind",
    "text",
    "statement",
    "subject",
    "attribute",
    "as_of",
    "category",
    "agent",
    "support",
    "confidence",
    "source_ids",
    "method",
    "cluster_key",
    "created",
    "updated",
    "status",
)


def insert(store: "Store", rows: list[dict[str, Any]], *, run_id: str | None, now: dt.datetime) -> None:
    """New active notes (rows hold COLUMNS but the clock's three and the status)."""
    for row in rows:
        row.update(kind=NOTE_KIND, created=now, updated=now, status="active")
        store.con.execute(
            f"INSERT INTO units ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)}) ON CONFLICT DO NOTHING",
            [json.dumps(row[c]) if c == "source_ids" else row[c] for c in COLUMNS],
        )
        store.history_log(
            row["id"], "noted", {"sources": row["source_ids"], "as_of": row["as_of"]}, run_id=run_id, at=now
        )
        _pending(store, row["id"])


def merge(
    store: "Store", note_id: str, *, text: str, source_ids: list[str], why: str, run_id: str | None, now: dt.datetime
) -> None:
    """A restatement joins its note: the sources add up, the text names both dates."""
    store.con.execute(
        "UPDATE units SET text = ?, statement = ?, source_ids = ?, support = ?, updated = ? WHERE id = ?",
        [text, text, json.dumps(source_ids), len(source_ids), now, note_id],
    )
    store.history_log(note_id, "merged", why, run_id=run_id, at=now)
    _pending(store, note_id)


def supersede(store: "Store", old_id: str, new_id: str, *, why: str, run_id: str | None, now: dt.datetime) -> None:
    """A changed fact: the old note gives way to the new one and keeps its history; `show` says why."""
    store.con.execute(
        "UPDATE units SET status = 'superseded', superseded_by = ?, updated = ? WHERE id = ? AND status = 'active'",
        [new_id, now, old_id],
    )
    store.con.execute(
        "UPDATE units SET supersedes = ? WHERE id = ?",
        [old_id, new_id],
    )
    store.history_log(old_id, "superseded", f"by {new_id} ({why})", run_id=run_id, at=now)
    _pending(store, old_id)


def _pending(store: "Store", note_id: str) -> None:
    store.con.execute("INSERT INTO pending_index VALUES (?, 'unit') ON CONFLICT DO NOTHING", [note_id])


def flush(store: "Store", ids: list[str]) -> None:
    """LanceDB after the writes above: active notes (re)indexed, superseded ones dropped, in one batch."""
    from ...store.reindex import unit_rows

    if not ids:
        return
    gone = store.con.execute(
        "SELECT id FROM units WHERE id IN (SELECT unnest(?)) AND status <> 'active'", [ids]
    ).fetchall()
    store.index.delete(UNITS, [i for (i,) in gone])
    store.index.add(UNITS, unit_rows(store, "id IN (SELECT unnest(?)) AND status = 'active'", [ids]), replace=True)
    store.con.execute("DELETE FROM pending_index WHERE target = 'unit' AND id IN (SELECT unnest(?))", [ids])
