"""Erasing a person (`forget --user U`): `forget`'s own path (the records, every row derived from them,
the units only they supported, from the store and every snapshot, with no copy left in the files), plus
what only a user filter finds: the queries asked for that user (the query log keeps their text), and
the run reports' examples that quote that user's words without naming a record."""

from __future__ import annotations

import json
from typing import Any, Callable

import duckdb

from ..store import query_log
from ..store.db import in_ids, json_meta


def _quotes(value: Any, words: set[str], find: Callable[[str], set[str]]) -> bool:
    if isinstance(value, dict):
        return any(_quotes(v, words, find) for v in value.values())
    if isinstance(value, list):
        return any(_quotes(v, words, find) for v in value)
    return isinstance(value, str) and bool(find(value) & words)


def _without_quotes(value: Any, words: set[str], find: Callable[[str], set[str]]) -> Any:
    """A run report without the examples (list items) that hold any of `words`."""
    if isinstance(value, dict):
        return {k: _without_quotes(v, words, find) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_quotes(v, words, find) for v in value if not _quotes(v, words, find)]
    return value


def user_forget_rows(
    users: list[str],
    forget_rows: Callable[[duckdb.DuckDBPyConnection, list[str]], tuple[Any, list[str]]],
    words_of: Callable[[list[str]], set[str]],
) -> Callable[[duckdb.DuckDBPyConnection, list[str]], tuple[Any, list[str]]]:
    """`forget_rows` (on the live store or a snapshot's file) that also deletes the query-log entries
    of `users` and the run-report examples quoting words that only the forgotten records had."""

    def rows(con: duckdb.DuckDBPyConnection, targets: list[str]) -> tuple[Any, list[str]]:
        where, params = in_ids("id", targets)
        said = [t for (t,) in con.execute(f"SELECT text FROM records WHERE {where}", params).fetchall()]
        result, emptied = forget_rows(con, targets)
        kept = words_of(
            [t for (t,) in con.execute("SELECT text FROM records UNION ALL SELECT text FROM units").fetchall()]
        )
        theirs = words_of(said) - kept
        for user in users:
            result.query_log += query_log.forget_user(con, user)
        for run_id, report in con.execute("SELECT id, report FROM runs WHERE report IS NOT NULL").fetchall():
            data = json_meta(report)
            cleaned = _without_quotes(data, theirs, lambda text: words_of([text]))
            if cleaned != data:
                con.execute("UPDATE runs SET report = ? WHERE id = ?", [json.dumps(cleaned, default=str), run_id])
        return result, emptied

    return rows
