"""Change the lifecycle state of records in one place: DuckDB, the history log and LanceDB together."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from .db import in_ids, utcnow
from .index import MEMORIES
from .vocabulary import ARCHIVE_AFTER_WINDOW, INDEXED_RECORDS_SQL, OBSERVED_SQL

if TYPE_CHECKING:
    from .store import Store

STATES = ("active", "dormant", "archived")


def set_state(
    store: "Store",
    ids: list[str],
    state: str,
    *,
    reason: str,
    run_id: str | None = None,
    now: dt.datetime | None = None,
) -> int:
    """Move records to `state` (active / dormant / archived) and say why; archived leaves LanceDB, and
    so does a rule's source marked to wait out the observation window; one woken from either returns.

    Returns how many records changed. Pinned records never leave `active`. `now` stamps `marked_at` and
    the history (a cycle passes its clock, so a faked clock moves the purge window too).
    """
    assert state in STATES, state
    if not ids:
        return 0
    con = store.con
    marking = state == "dormant" and reason.startswith(f"{ARCHIVE_AFTER_WINDOW} ")
    # marking takes records already dormant for another reason (merged into a survivor, process of a
    # succeeded goal) too: left as they were, they would stay indexed and in the cycle, where archiving
    # at once (`refine.observe_sources` off) takes them out
    moving = f"NOT {OBSERVED_SQL}" if marking else "state <> ?"
    named, named_params = in_ids("id", list(dict.fromkeys(ids)))
    previous = dict(
        con.execute(
            f"SELECT id, NOT {INDEXED_RECORDS_SQL} FROM records WHERE {named} AND {moving} AND (NOT pinned OR ? = 'active')",
            [*named_params, *([] if marking else [state]), state],
        ).fetchall()
    )
    changed = list(previous)
    if not changed:
        return 0
    now = now or utcnow()
    where, params = in_ids("id", changed)
    con.execute(
        f"""UPDATE records SET state = ?, state_reason = ?,
               marked_at = CASE WHEN ? = 'dormant' THEN ? ELSE marked_at END
           WHERE {where}""",
        [state, reason, state, now, *params],
    )
    con.execute("INSERT INTO history SELECT unnest(?), ?, ?, ?, ?", [changed, now, f"state:{state}", reason, run_id])
    if state == "archived" or marking:
        store.embeddings.keep_leaving(changed)  # archived, or waiting out the observation window
        store.index.delete(MEMORIES, changed)
        return len(changed)
    revived = [i for i in changed if previous[i]]  # archived, or marked: not in LanceDB
    store.index.update(MEMORIES, [i for i in changed if not previous[i]], {"state": state})
    if revived:
        from .reindex import index_pending

        con.executemany("INSERT INTO pending_index VALUES (?, 'memory') ON CONFLICT DO NOTHING", [[i] for i in revived])
        index_pending(store)
    return len(changed)
