"""Whose memory a row is. A record names its user (the person it is about) or none (shared: system
notes, policies, whatever no one person said). A unit belongs to the user of its sources when they
are one person's (a note, a fact, a preference, or a rule only one person's runs showed); a unit whose
sources are several people's, or no one's, is shared know-how."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .filters import sql_str

if TYPE_CHECKING:
    import duckdb


def owner_of(con: "duckdb.DuckDBPyConnection", source_ids: list[str]) -> str | None:
    """The one user among the records `source_ids` name (their shared records aside); None when they
    name no user's record, or more than one user's."""
    if not source_ids:
        return None
    found = con.execute(
        "SELECT DISTINCT user FROM records WHERE id IN (SELECT unnest(?)) AND user IS NOT NULL LIMIT 2",
        [list(source_ids)],
    ).fetchall()
    return found[0][0] if len(found) == 1 else None


def visible_sql(user: str) -> str:
    """A filter (DuckDB and LanceDB alike) keeping what `user` may be shown: theirs and the shared."""
    return f"(user IS NULL OR user = {sql_str(user)})"


def visible(row_user: Any, user: str | None) -> bool:
    """Whether a row of `row_user` may go into the prompt of a query for `user` (None: any user)."""
    return user is None or row_user is None or row_user == user


SHARED = "(shared)"  # how listings name the rows of no user


def per_user(con: "duckdb.DuckDBPyConnection") -> dict[str, dict[str, int]]:
    """Per user (`SHARED` for no one's): records, active records, live units and logged queries."""
    out: dict[str, dict[str, int]] = {}
    for table, what, where in (
        ("records", "records", "true"),
        ("records", "active", "state = 'active'"),
        ("units", "units", "status IN ('active', 'dormant')"),
        ("query_log", "queries", "true"),
    ):
        for user, count in con.execute(f"SELECT user, count(*) FROM {table} WHERE {where} GROUP BY user").fetchall():
            row = out.setdefault(
                SHARED if user is None else str(user), dict.fromkeys(("records", "active", "units", "queries"), 0)
            )
            row[what] = int(count)
    return dict(sorted(out.items(), key=lambda kv: (kv[0] != SHARED, -kv[1]["records"], kv[0])))
