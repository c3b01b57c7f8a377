"""Change the lifecycle state of records in one place: DuckDB, the history log and LanceDB together."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from .db import utcnow
from .index import MEMORIES

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
    """Move records to `state` (active / dormant / archived) and say why; archived leaves LanceDB.

    Returns how many records changed. Pinned records never leave `active`. `now` stamps `marked_at` and
    the history (a cycle passes its clock, so a faked clock moves the purge window too).
    """
    assert state in STATES, state
    if not ids:
        return 0
    con = store.con
    previous = dict(
        con.execute(
            "SELECT id, state FROM records WHERE id IN (SELECT unnest(?)) AND state <> ? AND (NOT pinned OR ? = 'active')",
            [list(ids), state, state],
        ).fetchall()
    )
    changed = list(previous)
    if not changed:
        return 0
    now = now or utcnow()
    con.execute(
        """UPDATE records SET state = ?, state_reason = ?,
               marked_at = CASE WHEN ? = 'dormant' THEN ? ELSE marked_at END
           WHERE id IN (SELECT unnest(?))""",
        [state, reason, state, now, changed],
    )
    con.execute("INSERT INTO history SELECT unnest(?), ?, ?, ?, ?", [changed, now, f"state:{state}", reason, run_id])
    if state == "archived":
        store.embeddings.keep_leaving(changed)
        store.index.delete(MEMORIES, changed)
        return len(changed)
    revived = [i for i in changed if previous[i] == "archived"]
    store.index.update(MEMORIES, [i for i in changed if previous[i] != "archived"], {"state": state})
    if revived:
        from .reindex import index_pending

        con.executemany("INSERT INTO pending_index VALUES (?, 'memory') ON CONFLICT DO NOTHING", [[i] for i in revived])
        index_pending(store)
    return len(changed)
