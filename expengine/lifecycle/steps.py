"""The compaction cycle's steps, declared once, in order: what each is called, what it does (the
`compact` help text is built from this) and where its class lives. Classes are imported when a cycle
runs, so `expengine --help` stays instant. Adding a step: its module, one line here, its config
section (and its test)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .cycle import CycleStep


@dataclass(frozen=True)
class DeclaredStep:
    name: str  # the key of its report in `CompactReport.steps`
    does: str  # a few words for the help text
    where: str  # "module:Class" under expengine.lifecycle

    def load(self) -> "CycleStep":
        module, cls = self.where.split(":")
        return getattr(importlib.import_module(f"expengine.lifecycle.{module}"), cls)()


STEPS: tuple[DeclaredStep, ...] = (
    DeclaredStep("credit", "outcome credit", "credit:CreditStep"),
    DeclaredStep("decay", "decay", "decay:DecayStep"),
    DeclaredStep("goals", "goal cleanup", "goals:GoalsStep"),
    DeclaredStep("chatter", "chatter to sleep", "chatter:ChatterStep"),
    DeclaredStep("notes", "conversation turns into dated notes", "notes.step:NotesStep"),
    DeclaredStep("clusters", "cluster pruning and merging", "clusters:ClustersStep"),
    DeclaredStep("refine", "refinement into units", "refine:RefineStep"),
    DeclaredStep("purge", "purge", "purge:PurgeStep"),
    DeclaredStep("index", "index refresh", "index_refresh:IndexStep"),
)
