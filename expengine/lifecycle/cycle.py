"""The compaction cycle's step interface: a step is an object with a `name` and `run(store, ctx)`.

A step reads and writes only through the `Store` and the context, and returns a typed report that
renders its own summary line (`StepReport`), so the CLI has no per-step branch. `steps.STEPS`
declares them in order; adding a step is its module, one line there, its config section and its
test.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..results import Result

if TYPE_CHECKING:
    from ..models.llm import LLMProvider
    from ..store.store import Store


@dataclass
class CycleContext:
    """What every step of one cycle shares: the one clock, the run, the models and the budgets."""

    now: dt.datetime
    run_id: str
    llm: "LLMProvider"
    dry_run: bool = False
    refine: bool = True
    max_llm_calls: int | None = None
    full: bool = False  # `compact --full`: every step looks at the whole store, clustering starts afresh
    # the reports of the steps that already ran, by name (a later step may depend on an earlier one)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the last completed cycle's watermark (None: first or full cycle, everything counts as changed)
    since: dt.datetime | None = None
    sweep: list[str] = field(default_factory=list)  # records this cycle re-checks though not new

    def changed(self, alias: str = "") -> tuple[str, list[Any]]:
        """SQL (and its parameters) for the records this cycle works on: ingested since the last cycle,
        or in this cycle's sweep; every record on a first or full cycle."""
        if self.since is None:
            return "TRUE", []
        return f"({alias}ingested_at > ? OR {alias}id IN (SELECT unnest(?)))", [self.since, self.sweep]


WATERMARK = "cycle.ingested_upto"  # store_meta: the newest record the last completed cycle saw
SWEEP_CURSOR = "cycle.swept_upto"  # store_meta: the last record id the sweep re-checked (ids in order, wrapping)


def meta(store: "Store", key: str) -> str | None:
    row = store.con.execute("SELECT value FROM store_meta WHERE key = ?", [key]).fetchone()
    return row[0] if row else None


def set_meta(store: "Store", key: str, value: str) -> None:
    store.con.execute("INSERT OR REPLACE INTO store_meta VALUES (?, ?)", [key, value])


def changed_inputs(
    store: "Store", ctx: CycleContext, key: str, sql: str, params: list[Any] | None = None
) -> str | None:
    """A fingerprint of what a step reads (one SQL aggregate), or None when it is the one stored under
    `key` by the last cycle: the step's result would be the same, so it is skipped. A full cycle always
    runs it. The caller stores the fingerprint (`set_meta`) once it has run, in its transaction."""
    found = json.dumps(store.con.execute(sql, params or []).fetchall(), default=str)
    return found if ctx.full or found != meta(store, key) else None


def prepare(store: "Store", ctx: CycleContext) -> None:
    """Fill in what this cycle works on: since the watermark, plus the next `sweep_size` older records."""
    watermark = None if ctx.full else meta(store, WATERMARK)
    if watermark is None:
        return
    ctx.since = dt.datetime.fromisoformat(watermark)
    rows = sweep_size(store, ctx.since)
    after = meta(store, SWEEP_CURSOR) or ""
    picked = "SELECT id FROM records WHERE state IN ('active', 'dormant') AND ingested_at <= ? AND id > ? ORDER BY id LIMIT ?"
    ctx.sweep = [r[0] for r in store.con.execute(picked, [ctx.since, after, rows]).fetchall()]
    if len(ctx.sweep) < rows:  # wrap round to the first ids
        more = store.con.execute(picked, [ctx.since, "", rows - len(ctx.sweep)]).fetchall()
        ctx.sweep = list(dict.fromkeys(ctx.sweep + [r[0] for r in more]))


def sweep_size(store: "Store", since: dt.datetime) -> int:
    """How many older records a cycle re-checks: `cycle.sweep_per_new` for each record ingested after
    `since`, at most `cycle.sweep_rows`; `sweep_rows` on a quiet night, which has nothing else to do."""
    cfg = store.config.cycle
    new = store.con.execute("SELECT count(*) FROM records WHERE ingested_at > ?", [since]).fetchall()[0][0]
    return min(cfg.sweep_rows, math.ceil(cfg.sweep_per_new * new)) if new else cfg.sweep_rows


def finish(store: "Store", ctx: CycleContext, ingested_upto: dt.datetime | None) -> None:
    """Move the watermark and the sweep cursor on, once every step has run."""
    if ingested_upto is not None:
        set_meta(store, WATERMARK, ingested_upto.isoformat())
    if ctx.sweep:
        set_meta(store, SWEEP_CURSOR, ctx.sweep[-1])


class StepReport(Protocol):
    """What a step returns: JSON-ready, with the one line `compact` prints for it."""

    def to_dict(self) -> dict[str, Any]: ...

    def summary(self) -> str: ...


class CycleStep(Protocol):
    """A step of the cycle; `steps.STEPS` names it."""

    def run(self, store: "Store", ctx: CycleContext) -> StepReport: ...


@dataclass
class Skipped(Result):
    """A step that did not run this cycle, and why."""

    skipped: str
    seconds: float = 0.0

    def summary(self) -> str:
        return self.skipped


@dataclass
class Failed(Result):
    """A step whose failure is reported without undoing the steps before it (a missing model)."""

    error: str
    seconds: float = 0.0

    def summary(self) -> str:
        return f"error: {self.error}"
