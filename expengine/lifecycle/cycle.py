"""The compaction cycle's step interface: a step is an object with a `name` and `run(store, ctx)`.

A step reads and writes only through the `Store` and the context, and returns its report as a
dict. `compact.STEPS` lists them in order; adding a step is its module, one line there, its config
section and its test.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

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


class Step(Protocol):
    name: str

    def run(self, store: "Store", ctx: CycleContext) -> dict[str, Any]: ...
