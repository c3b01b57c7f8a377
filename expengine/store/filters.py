"""LanceDB filter strings: the one place where values are quoted into a query.

LanceDB's `where`, `delete` and `update` take a SQL (DataFusion) string, not parameters; DuckDB
queries bind every value instead (id lists through `db.in_ids`). Standard SQL string
literals have a single escape, the doubled quote; backslashes, newlines and emoji stay as they are.
"""

from __future__ import annotations

from typing import Iterable


def sql_str(value: str) -> str:
    """A string literal for a LanceDB filter (and for the decay step's CASE over config categories)."""
    return "'" + str(value).replace("'", "''") + "'"


def lance_eq(column: str, value: str) -> str:
    return f"{column} = {sql_str(value)}"


def lance_in(column: str, values: Iterable[str]) -> str:
    """`column IN (...)`; callers pass a non-empty list (an empty IN list is not valid SQL)."""
    return f"{column} IN ({', '.join(sql_str(v) for v in values)})"
