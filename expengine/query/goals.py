"""The goals an agent worked on, for people: each with its status, description and how many records
it holds, the latest first. The `goals` table's writers are ingest (a goal record opens or closes
one) and outcome reports; this is a read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store.store import Store

COLUMNS = ("goal_id", "agent", "session", "status", "description", "long_term", "opened", "updated", "records")


def list_goals(
    store: "Store", *, agent: str | None = None, status: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """Goals matching the filters, the latest updated first, each with its count of records."""
    where, params = [], []
    for column, value in (("g.agent", agent), ("g.status", status)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    rows = store.con.execute(
        f"""SELECT g.goal_id, g.agent, g.session, g.status, g.description, g.long_term, g.opened, g.updated,
                   (SELECT count(*) FROM records r WHERE r.goal_id = g.goal_id)
            FROM goals g {"WHERE " + " AND ".join(where) if where else ""}
            ORDER BY g.updated DESC NULLS LAST, g.goal_id LIMIT ?""",
        [*params, limit],
    ).fetchall()
    return [dict(zip(COLUMNS, row)) for row in rows]
