"""Coding agents' logs where they live, as `Engine` methods: list them, ingest what is new. A mixin,
as `Upkeep` is; it relies on the Engine's `session()`."""

from __future__ import annotations

from typing import TYPE_CHECKING, ContextManager

if TYPE_CHECKING:
    from ..ingest.agents import AgentsResult, SourceRow
    from ..store.store import Store


class AgentLogs:
    if TYPE_CHECKING:

        def session(self) -> ContextManager["Store"]: ...

    def sources(self, tools: list[str] | None = None, roots: list[str] | None = None) -> list["SourceRow"]:
        """Agent log locations on this machine, per tool and folder, with what is not yet ingested."""
        from ..ingest.agents import list_sources

        with self.session() as store:
            return list_sources(store, tools, roots)

    @staticmethod
    def sources_unread(tools: list[str] | None = None, roots: list[str] | None = None) -> list["SourceRow"]:
        """What `sources` lists before any store exists: every location, all of it not yet ingested (no
        store is opened or made)."""
        from ..ingest.agents import list_sources

        return list_sources(None, tools, roots)

    def ingest_agents(
        self, tools: list[str] | None = None, roots: list[str] | None = None, *, strict: bool = False
    ) -> "AgentsResult":
        """Ingest what every agent's logs gained since the last run (all of them the first time)."""
        from ..ingest.agents import ingest_agents

        with self.session() as store:
            return ingest_agents(store, tools, roots, strict=strict)
