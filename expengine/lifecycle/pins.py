"""Pin a memory (it never decays, is never merged away or pruned) or unpin it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from ..store.state import set_state

if TYPE_CHECKING:
    from ..store.store import Store


def set_pinned(store: "Store", record_id: str, *, pinned: bool) -> dict[str, Any]:
    """Pinning a dormant or archived memory also brings it back to active."""
    row = store.con.execute("SELECT state FROM records WHERE id = ?", [record_id]).fetchall()
    if not row:
        raise NotFoundError(f"no record with id {record_id!r}", hint="see `expengine show ID` or `expengine query`")
    store.con.execute("UPDATE records SET pinned = ? WHERE id = ?", [pinned, record_id])
    store.history_log(record_id, "pin" if pinned else "unpin")
    if pinned and row[0][0] != "active":
        set_state(store, [record_id], "active", reason="pinned")
    return {"id": record_id, "pinned": pinned, "state": "active" if pinned else row[0][0]}
