"""Telling the agent and its user why: an item's story (`show`), what was set aside (`why`), a unit's
sources (`trace`), the goals worked on (`goals`), and their reports on it (`feedback`). A mixin of `Engine`, as `Upkeep` is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ContextManager

if TYPE_CHECKING:
    from ..query.feedback import FeedbackResult
    from ..query.show import ShowResult
    from ..query.why import WhyResult
    from ..store.store import Store


class Explain:
    """Reads and reports about single items; every method opens the store through `session()`."""

    if TYPE_CHECKING:

        def session(self) -> ContextManager["Store"]: ...

    def trace(self, unit_id: str) -> dict[str, Any]:
        """A unit with every raw record it came from (archived ones included) and its history."""
        from ..store.unit_reads import trace_unit

        with self.session() as store:
            return trace_unit(store, unit_id)

    # --- query, feedback, show (owner: query/) -------------------------------------------------
    def feedback(
        self, item_id: str, *, helpful: bool | None, note: str | None = None, restore: bool = False
    ) -> "FeedbackResult":
        """Helpful / harmful report on a unit or record (utility ±); `restore` brings back a quarantined unit."""
        from ..query.feedback import give_feedback

        with self.session() as store:
            return give_feedback(store, item_id, helpful=helpful, note=note, restore=restore)

    def goals(self, *, agent: str | None = None, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The goals worked on, the latest first, with their status and how many records each holds."""
        from ..query.goals import list_goals

        with self.session() as store:
            return list_goals(store, agent=agent, status=status, limit=limit)

    def why(self, text: str, *, limit: int = 5, revive: bool = False) -> "WhyResult":
        """What the memory set aside that matches `text` (sleeping, archived, merged, superseded) and
        what happened to each; `revive` wakes them."""
        from ..query.why import why

        with self.session() as store:
            return why(store, text, limit=limit, revive=revive)

    def show(self, item_id: str) -> "ShowResult":
        """One record or unit with its scores, state, provenance and history."""
        from ..query.show import show

        with self.session() as store:
            return show(store, item_id)
