"""Query filters: checked once (`make_filters`), then written as LanceDB prefilters per table.

`kind` is a record kind (message, tool_call, …: memories only) or a unit kind (rule, fact: units
only); `outcome` and `goal` are memory attributes, so they exclude units; `since` / `until`
compare a memory's `ts` and a unit's `updated`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..store.filters import lance_eq
from ..store.users import visible_sql
from ..store.vocabulary import KINDS as RECORD_KINDS
from ..store.vocabulary import LIVE_SQL, LIVE_UNIT_STATUSES, OUTCOMES, EventError, parse_ts

if TYPE_CHECKING:
    from ..operations import QueryArgs

    pass


UNIT_KINDS = ("rule", "fact")


@dataclass
class Filters:
    agent: str | None = None
    user: str | None = None  # that user's and the shared rows only
    category: str | None = None
    kind: str | None = None
    outcome: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    goal: str | None = None
    include_dormant: bool = False

    @property
    def search_memories(self) -> bool:
        return self.kind not in UNIT_KINDS

    @property
    def search_units(self) -> bool:
        return (self.kind is None or self.kind in UNIT_KINDS) and self.outcome is None and self.goal is None

    @property
    def memory_states(self) -> tuple[str, ...]:
        return ("active", "dormant") if self.include_dormant else ("active",)

    def memory_where(self, states: tuple[str, ...] | None = None) -> str:
        """The memories' prefilter; `states`: those searched instead of `memory_states`."""
        return " AND ".join(
            [
                f"state IN ({', '.join(repr(s) for s in states or self.memory_states)})",
                *self._common("ts"),
                *_equals(kind=self.kind, outcome=self.outcome, goal_id=self.goal),
            ]
        )

    def unit_where(self) -> str:
        return " AND ".join([LIVE_SQL, *self._common("ts"), *_equals(kind=self.kind)])

    def unit_mask(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        """`unit_where` over the units table's columns held in memory (`store.index.HeldVectors`): the
        rows it keeps (a missing value matches no filter, as in SQL)."""
        mask = np.isin(columns["status"], LIVE_UNIT_STATUSES)
        for column, value in (("agent", self.agent), ("category", self.category), ("kind", self.kind)):
            if value is not None:
                mask &= columns[column] == value
        if self.user is not None:
            mask &= (columns["user"] == None) | (columns["user"] == self.user)  # noqa: E711 (elementwise)
        if self.since:
            mask &= columns["ts"] >= np.datetime64(self.since, "us")
        if self.until:
            mask &= columns["ts"] <= np.datetime64(self.until, "us")
        return mask

    def memory_mask(self, columns: Any) -> np.ndarray | None:
        """`memory_where` but the state over a fragment's columns held in memory (Arrow,
        `store.held_fragments`): the rows it keeps, or None when it keeps every row (a missing value
        matches no filter, as in SQL)."""
        import pyarrow.compute as pc

        masks = [
            pc.equal(columns.column(column), value).fill_null(False)
            for column, value in (
                ("agent", self.agent),
                ("category", self.category),
                ("kind", self.kind),
                ("outcome", self.outcome),
                ("goal_id", self.goal),
            )
            if value is not None
        ]
        if self.user is not None:
            user = columns.column("user")
            masks.append(pc.or_(pc.is_null(user), pc.equal(user, self.user).fill_null(False)))
        for bound, compare in ((self.since, pc.greater_equal), (self.until, pc.less_equal)):
            if bound is not None:
                masks.append(compare(columns.column("ts"), np.datetime64(bound, "us")).fill_null(False))
        if not masks:
            return None
        mask = np.ones(columns.num_rows, dtype=bool)
        for passed in masks:
            mask &= passed.to_numpy(zero_copy_only=False)
        return mask

    def _common(self, ts_column: str) -> list[str]:
        clauses = _equals(agent=self.agent, category=self.category)
        if self.user is not None:
            clauses.append(visible_sql(self.user))
        if self.since:
            clauses.append(f"{ts_column} >= {_timestamp(self.since)}")
        if self.until:
            clauses.append(f"{ts_column} <= {_timestamp(self.until)}")
        return clauses


def _equals(**values: str | None) -> list[str]:
    return [lance_eq(column, value) for column, value in values.items() if value is not None]


def _timestamp(value: dt.datetime) -> str:
    return f"timestamp '{value.isoformat(sep=' ', timespec='microseconds')}'"


def as_time(value: dt.datetime | str | None, name: str) -> dt.datetime | None:
    """ISO-8601 (no zone means UTC) or a datetime, as naive UTC like everything in the store."""
    if value is None or isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value and value.tzinfo else value
    try:
        return parse_ts(value)
    except EventError as exc:
        raise InputError(f"--{name}: {exc}", hint="use ISO-8601, e.g. 2026-03-01 or 2026-03-01T09:15:00Z") from exc


def make_filters(args: "QueryArgs") -> Filters:
    """The query's filters, checked: a kind or outcome the store never holds is a usage error."""
    kind, outcome = args.kind, args.outcome
    if kind is not None and kind not in RECORD_KINDS + UNIT_KINDS:
        raise InputError(
            f"unknown kind {kind!r}", hint=f"use a record kind ({', '.join(RECORD_KINDS)}) or a unit kind (rule, fact)"
        )
    if outcome is not None and outcome not in OUTCOMES:
        raise InputError(f"unknown outcome {outcome!r}", hint=f"use one of {', '.join(OUTCOMES)}")
    return Filters(
        agent=args.agent,
        user=args.user,
        category=args.category,
        kind=kind,
        outcome=outcome,
        since=as_time(args.since, "since"),
        until=as_time(args.until, "until"),
        goal=args.goal,
        include_dormant=args.include_dormant,
    )
