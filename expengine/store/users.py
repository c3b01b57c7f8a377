"""Whose memory a row is. A record names its user (the person it is about) or none (shared: system
notes, policies, whatever no one person said). A unit belongs to the user of its sources when they
are one person's (a note, a fact, a preference, or a rule only one person's runs showed); a unit whose
sources are several people's, or no one's, is shared know-how."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from .db import in_ids, json_ids
from .filters import sql_str

if TYPE_CHECKING:
    import duckdb


def owner_of(con: "duckdb.DuckDBPyConnection", source_ids: list[str]) -> str | None:
    """The one user among the records `source_ids` name (their shared records aside); None when they
    name no user's record, or more than one user's."""
    if not source_ids:
        return None
    where, params = in_ids("id", list(dict.fromkeys(source_ids)))
    found = con.execute(
        f"SELECT DISTINCT user FROM records WHERE {where} AND user IS NOT NULL LIMIT 2", params
    ).fetchall()
    return found[0][0] if len(found) == 1 else None


WORD = re.compile(r"\w+")
RUN = 4  # words in a row that quote a text ("flight BOS to LHR"): more than a common phrase shares


# where a unit's wording ends one thing said and starts another: a sentence's end, a quote's edge, the
# " / " between two quoted requests; a run across one joins two people's words by chance
CLAUSE = re.compile(r"[.?!;:。？！；]+(?=\s|$)|\s/\s|(?<!\w)['\"‘’“”「」]|['\"‘’“”「」](?!\w)")


def _runs(text: str) -> set[tuple[str, ...]]:
    words = WORD.findall(text.lower())
    return {tuple(words[i : i + RUN]) for i in range(len(words) - RUN + 1)}


def _clause_runs(text: str) -> set[tuple[str, ...]]:
    return set().union(*(_runs(clause) for clause in CLAUSE.split(text)))


def quoted_users(con: "duckdb.DuckDBPyConnection", text: str, source_ids: list[str]) -> str | None:
    """For a shared unit: the users (a JSON list) whose personal words its wording carries, `RUN` words
    in a row that among its sources (and their episodes) only that user's records hold, and no other
    user's record nor a shared one anywhere in the store (an intent rule quoting one person's request,
    "For requests like 'Book BOS to LHR on 2026-03-26…'"; not an error message or a note many users'
    runs show); None when it quotes no one. A query for another user does not show it (`visible_unit`)."""
    if not source_ids:
        return None
    # a source's episode too: an intent rule cites a run's goal and quotes the request said in it
    sources = (
        "FROM records WHERE id IN (SELECT unnest($ids)) OR goal_id IN "
        "(SELECT goal_id FROM records WHERE id IN (SELECT unnest($ids)) AND goal_id IS NOT NULL)"
    )
    ids = {"ids": list(source_ids)}
    if not con.execute(f"SELECT bool_or(user IS NOT NULL) {sources}", ids).fetchall()[0][0]:
        return None  # no user's words among them (a store with no user source): no text to read
    said: dict[str | None, set[tuple[str, ...]]] = {}
    for user, source in con.execute(f"SELECT user, text {sources}", ids).fetchall():
        said.setdefault(user, set()).update(_runs(source or ""))
    wording = _clause_runs(text)
    only = {
        str(user): wording & (runs - set().union(*(r for other, r in said.items() if other != user)))
        for user, runs in said.items()
        if user is not None
    }
    quoted = sorted(user for user, runs in only.items() if runs - _held_by_others(con, user, runs))
    return json.dumps(quoted) if quoted else None


_GAP = r"[^\pL\pN_]"  # what separates two of `WORD`'s words (RE2, as DuckDB matches)


def _held_by_others(con: "duckdb.DuckDBPyConnection", user: str, runs: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """Those of `runs` (a user's) that a record of another user, or a shared one, holds too."""
    if not runs:
        return set()
    ordered = sorted(runs)
    patterns = [f"(?:^|{_GAP})" + f"{_GAP}+".join(re.escape(w) for w in run) + f"(?:{_GAP}|$)" for run in ordered]
    found = con.execute(
        f"SELECT {', '.join('bool_or(regexp_matches(lower(text), ?))' for _ in ordered)} FROM records "
        "WHERE (user IS NULL OR user <> ?) AND regexp_matches(lower(text), ?)",
        [*patterns, user, "|".join(patterns)],
    ).fetchone()
    return {run for run, held in zip(ordered, found or ()) if held}


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
