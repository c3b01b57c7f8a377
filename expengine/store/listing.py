"""Raw records addressed by their own ids: for integrations that keep keys of their own (LangGraph's store)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import Store

FIELDS = ("id", "agent", "session", "ts", "kind", "content", "meta", "state", "weight")


def list_records(
    store: "Store",
    *,
    ids: list[str] | None = None,
    id_prefix: str | None = None,
    agent: str | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Records by id list and/or id prefix and agent, newest first; `meta` parsed."""
    where: list[str] = ["TRUE"]
    params: list[Any] = []
    if ids is not None:
        where.append("id IN (SELECT unnest(?))")
        params.append(ids)
    if id_prefix is not None:
        where.append("starts_with(id, ?)")
        params.append(id_prefix)
    if agent is not None:
        where.append("agent = ?")
        params.append(agent)
    rows = store.con.execute(
        f"SELECT {', '.join(FIELDS)} FROM records WHERE {' AND '.join(where)} ORDER BY ts DESC, id LIMIT ? OFFSET ?",
        [*params, limit, offset],
    ).fetchall()
    out = []
    for row in rows:
        record = dict(zip(FIELDS, row))
        record["meta"] = json.loads(record["meta"]) if record["meta"] else {}
        out.append(record)
    return out
