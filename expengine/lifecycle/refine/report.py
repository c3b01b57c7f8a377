"""What one refinement pass reports (the step's report in a compaction)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...results import Result


@dataclass
class RefineReport(Result):
    run_id: str | None
    dry_run: bool
    auto_clusters: bool = False
    clusters_total: int = 0
    clusters_unchanged: int = 0
    clusters_refined: int = 0
    clusters_not_concrete: int = 0
    clusters_left: list[str] = field(default_factory=list)
    units_written: int = 0
    units_unchanged: int = 0
    units_merged: int = 0
    units_by_method: dict[str, int] = field(default_factory=lambda: {"llm": 0, "template": 0})
    units_superseded: int = 0
    units_lost_conflict: int = 0
    intents: int = 0
    lessons: int = 0
    llm_calls: int = 0
    llm_failures: int = 0
    grounding_rejected: int = 0
    rejection_reasons: list[str] = field(default_factory=list)
    llm_error: str | None = None
    archiving: int = 0  # process sources marked dormant, archived by purge after the observation window
    dormant: int = 0
    routine_asleep: int = 0  # routine calls of a tool whose rule would only restate its schema (routine.py)
    runs_read: int = 0  # runs (goals, sessions) whose records the whole-store passes read again
    run_records_read: int = 0  # and those records: the night's, not the store's
    seconds: float = 0.0
    units: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> str:
        by_model = self.units_by_method.get("llm", 0)
        return (
            f"{self.clusters_refined} of {self.clusters_total} clusters refined: {self.units_written} units written "
            f"({by_model} worded by the model), {self.units_merged} merged, {self.units_superseded} superseded; "
            f"{self.archiving} sources to archive after the observation window, {self.dormant} asleep, {self.routine_asleep} routine calls asleep"
            + (f"; {len(self.clusters_left)} changed clusters left for the next night" if self.clusters_left else "")
        )
