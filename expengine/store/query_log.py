"""The one owner of the query log: which units and memories each answered query showed (the ids whose
text fit in the prompt, never the candidates below the cut), for which `session` and `goal_id`, so
an outcome can later credit what the agent was given.

The log is part of the DuckDB file, so snapshots hold it; `forget` removes forgotten ids from it and
drops the entries of a session it deletes whole (`forget_rows`, on any connection); `prune` keeps it
to `query.log_days` (the purge step runs it).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any, Callable

from .db import json_ids

if TYPE_CHECKING:
    import duckdb

    from .store import Store

FIELDS = ("asked_at", "session", "goal_id", "query", "unit_ids", "memory_ids")


def record(
    store: "Store",
    *,
    at: dt.datetime,
    query: str,
    session: str | None,
    goal_id: str | None,
    unit_ids: list[str],
    memory_ids: list[str],
    user: str | None = None,
) -> None:
    store.con.execute(
        "INSERT INTO query_log (asked_at, session, goal_id, query, unit_ids, memory_ids, user) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [at, session, goal_id, query, json.dumps(unit_ids), json.dumps(memory_ids), user],
    )


def entries(store: "Store", *, session: str | None = None, goal_id: str | None = None) -> list[dict[str, Any]]:
    """The log, oldest first; only a session's or a goal's entries when one is given."""
    where, params = [], []
    for column, value in (("session", session), ("goal_id", goal_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = f"SELECT {', '.join(FIELDS)} FROM query_log" + (" WHERE " + " AND ".join(where) if where else "")
    rows = [dict(zip(FIELDS, r)) for r in store.con.execute(sql + " ORDER BY asked_at", params).fetchall()]
    for row in rows:
        row["unit_ids"], row["memory_ids"] = json_ids(row["unit_ids"]), json_ids(row["memory_ids"])
    return rows


def prune(store: "Store", *, before: dt.datetime) -> int:
    """Entries older than `before` leave; returns how many."""
    gone = store.con.execute("SELECT count(*) FROM query_log WHERE asked_at < ?", [before]).fetchall()[0][0]
    if gone:
        store.con.execute("DELETE FROM query_log WHERE asked_at < ?", [before])
    return int(gone)


def _has_log(con: "duckdb.DuckDBPyConnection") -> bool:
    """Whether the database has the log (a snapshot's file may predate it)."""
    found = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'query_log'").fetchall()
    return bool(found[0][0])


def texts(con: "duckdb.DuckDBPyConnection") -> list[str]:
    """Every logged query's text (what `forget` checks for quotes of what it deletes)."""
    return [t for (t,) in con.execute("SELECT query FROM query_log").fetchall()] if _has_log(con) else []


def forget_rows(
    con: "duckdb.DuckDBPyConnection",
    record_ids: set[str],
    unit_ids: set[str],
    sessions_gone: list[str],
    *,
    quotes: Callable[[str], bool] = lambda text: False,
) -> int:
    """Forget on one connection (the live store or a snapshot's file, which may predate the log): the
    entries of `sessions_gone` and those whose query text `quotes` the forgotten records (asked in any
    session, or none) are deleted, and forgotten record and unit ids leave the others.
    Returns how many entries were deleted or rewritten."""
    if not _has_log(con):
        return 0
    changed = 0
    if sessions_gone:
        changed += con.execute(
            "SELECT count(*) FROM query_log WHERE session IN (SELECT unnest(?))", [sessions_gone]
        ).fetchall()[0][0]
        con.execute("DELETE FROM query_log WHERE session IN (SELECT unnest(?))", [sessions_gone])
    gone = record_ids | unit_ids
    rows = con.execute("SELECT rowid, query, unit_ids, memory_ids FROM query_log").fetchall()
    for rowid, text, units_json, memories_json in rows:
        if quotes(text):
            con.execute("DELETE FROM query_log WHERE rowid = ?", [rowid])
            changed += 1
            continue
        units, memories = json_ids(units_json), json_ids(memories_json)
        if gone & (set(units) | set(memories)):
            con.execute(
                "UPDATE query_log SET unit_ids = ?, memory_ids = ? WHERE rowid = ?",
                [
                    json.dumps([u for u in units if u not in gone]),
                    json.dumps([m for m in memories if m not in gone]),
                    rowid,
                ],
            )
            changed += 1
    return int(changed)


def forget_user(con: "duckdb.DuckDBPyConnection", user: str) -> int:
    """Delete the entries of the queries asked for `user` (their text is that person's); how many. A
    snapshot's file made before the log knew users has none."""
    if not con.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'query_log' AND column_name = 'user'"
    ).fetchall()[0][0]:
        return 0
    gone = con.execute("SELECT count(*) FROM query_log WHERE user = ?", [user]).fetchall()[0][0]
    con.execute("DELETE FROM query_log WHERE user = ?", [user])
    return int(gone)
