"""Whose memory a row is. A record names its user (the person it is about) or none (shared: system
notes, policies, whatever no one person said). A unit belongs to the user of its sources when they
are one person's (a note, a fact, a preference, or a rule only one person's runs showed); a unit whose
sources are several people's, or no one's, is shared know-how."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from .db import json_ids
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


WORD = re.compile(r"\w+")
RUN = 4  # words in a row that quote a text ("flight BOS to LHR"): more than a common phrase shares


def _runs(text: str) -> set[tuple[str, ...]]:
    words = WORD.findall(text.lower())
    return {tuple(words[i : i + RUN]) for i in range(len(words) - RUN + 1)}


def quoted_users(con: "duckdb.DuckDBPyConnection", text: str, source_ids: list[str]) -> str | None:
    """For a shared unit: the users (a JSON list) whose own words its wording carries, `RUN` words in
    a row that among its sources (and their episodes) only that user's records hold (an intent rule quoting one person's
    request, "For requests like 'Book BOS to LHR on 2026-03-26…'"); None when it quotes no one. A
    query for another user does not show it (`visible_unit`)."""
    if not source_ids:
        return None
    said: dict[str | None, set[tuple[str, ...]]] = {}
    # a source's episode too: an intent rule cites a run's goal and quotes the request said in it
    for user, source in con.execute(
        "SELECT user, text FROM records WHERE id IN (SELECT unnest($ids)) OR goal_id IN "
        "(SELECT goal_id FROM records WHERE id IN (SELECT unnest($ids)) AND goal_id IS NOT NULL)",
        {"ids": list(source_ids)},
    ).fetchall():
        said.setdefault(user, set()).update(_runs(source or ""))
    wording = _runs(text)
    quoted = sorted(
        str(user)
        for user, runs in said.items()
        if user is not None and wording & (runs - set().union(*(r for other, r in said.items() if other != user)))
    )
    return json.dumps(quoted) if quoted else None


def visible_unit(unit_user: Any, quotes: Any, user: str | None) -> bool:
    """Whether a unit may go into the prompt of a query for `user`: theirs, or shared and quoting no
    one else's words."""
    return user is None or unit_user == user or (unit_user is None and all(q == user for q in json_ids(quotes)))


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
