"""The compaction cycle's step interface: a step is an object with a `name` and `run(store, ctx)`.

A step reads and writes only through the `Store` and the context, and returns a typed report that
renders its own summary line (`StepReport`), so the CLI has no per-step branch. `steps.STEPS`
declares them in order; adding a step is its module, one line there, its config section and its
test.
"""

from __future__ import annotations

import datetime as dt
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
    # the reports of the steps that already ran, by name (a later step may depend on an earlier one)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)


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
