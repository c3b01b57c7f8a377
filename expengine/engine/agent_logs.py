"""Coding agents' logs where they live, as `Engine` methods: list them, ingest what is new. A mixin,
as `Upkeep` is; it relies on the Engine's `session()`."""

from __future__ import annotations

from typing import TYPE_CHECKING, ContextManager

if TYPE_CHECKING:
    from ..ingest.agents import AgentsResult, SourceRow
    from ..store.store import Store


class AgentLogs:
    if TYPE_CHECKING:

        def session(self, *, heal: bool = True, row_group_rows: int | None = None) -> ContextManager["Store"]: ...

    def sources(self, tools: list[str] | None = None, roots: list[str] | None = None) -> list["SourceRow"]:
        """Agent log locations on this machine, per tool and folder, with what is not yet ingested (it reads
        the cursors only, so it leaves an index append an ingest deferred to the next open that heals)."""
        from ..ingest.agents import list_sources

        with self.session(heal=False) as store:
            return list_sources(store, tools, roots)

    @staticmethod
    def sources_unread(tools: list[str] | None = None, roots: list[str] | None = None) -> list["SourceRow"]:
        """What `sources` lists before any store exists: every location, all of it not yet ingested (no
        store is opened or made)."""
        from ..ingest.agents import list_sources

        return list_sources(None, tools, roots)

    def ingest_agents(
        self,
        tools: list[str] | None = None,
        roots: list[str] | None = None,
        *,
        strict: bool = False,
        defer_index: bool = False,
    ) -> "AgentsResult":
        """Ingest what every agent's logs gained since the last run (all of them the first time). With
        `defer_index` (a one-shot process: the CLI's cron run), the records go into DuckDB only and the
        next open of the store that heals (the nightly `compact`, or the first query) appends them to
        LanceDB; this process then loads neither lance nor lancedb, so its peak memory is the encoder's
        and DuckDB's. Like any ingest, it appends in small row groups (`INGEST_ROW_GROUP_ROWS`), so DuckDB's
        checkpoints rewrite little. A process that keeps the store open (a server) must not defer: it would
        not heal."""
        from ..ingest.agents import ingest_agents
        from ..store.db import INGEST_ROW_GROUP_ROWS

        with self.session(heal=not defer_index, row_group_rows=INGEST_ROW_GROUP_ROWS) as store:
            return ingest_agents(store, tools, roots, strict=strict, defer_index=defer_index)
