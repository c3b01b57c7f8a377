"""How notes are written to the `units` table: through its one owner, `store/units.py` (insert,
merge, supersede), each write with its history entry and its LanceDB journal entry; `flush` then
brings LanceDB level in one batch (a crash before it is healed on the next open, as for every
journalled id)."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from ...store import units as owner

if TYPE_CHECKING:
    from ...store.store import Store
    from .merge import Note

NOTE_KIND = "note"


def insert(store: "Store", rows: list[dict[str, Any]], *, run_id: str | None, now: dt.datetime) -> None:
    """New active notes (rows hold the note's fields but the clock's and the status); a note already
    written (same id) is left as it is."""
    present = owner.existing_ids(store, [row["id"] for row in rows])
    for row in rows:
        if row["id"] in present:
            continue
        sources = row["source_ids"]
        row.update(kind=NOTE_KIND, created=now, updated=now, status="active", source_ids=json.dumps(sources))
        detail = {"sources": sources, "as_of": row["as_of"]}
        owner.insert(store, row, action="noted", detail=detail, run_id=run_id, now=now)


def merge(
    store: "Store", note: "Note", *, why: str, run_id: str | None, now: dt.datetime, new_day: bool = False
) -> None:
    """A restatement, a reaction or a consolidated note joins `note`: its wording and sources as they
    are now (the text names the dates it was said on); with `new_day`, its day too."""
    current = store.con.execute(f"SELECT {', '.join(owner.MERGE_FIELDS)} FROM units WHERE id = ?", [note.id]).fetchone()
    assert current is not None, note.id
    row = dict(zip(owner.MERGE_FIELDS, current))
    sources = note.source_ids
    row.update(id=note.id, text=note.text, statement=note.text, source_ids=json.dumps(sources), support=len(sources))
    if new_day:
        row["as_of"] = dt.datetime.combine(note.as_of, dt.time())
    owner.merge(store, row, detail=why, run_id=run_id, now=now)


def supersede(store: "Store", old_id: str, new_id: str, *, why: str, run_id: str | None, now: dt.datetime) -> None:
    """A changed fact: the old note gives way to the new one and keeps its history; `show` says why."""
    owner.set_status(store, [old_id], "superseded", winner=new_id, reason=why, run_id=run_id, now=now)


def flush(store: "Store", ids: list[str]) -> None:
    """LanceDB after the writes above: the active notes among `ids` (re)indexed in one batch."""
    owner.index_journalled(store, list(ids))
