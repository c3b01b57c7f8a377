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
