"""The cycle's last step: refresh the full-text and vector indexes when rows changed, then drop the
LanceDB versions older than the latest (the cycle's snapshot holds the store as it was before)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..results import Result

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext


def planned_indexes(store: "Store") -> dict[str, dict[str, bool]]:
    """What `refresh_indexes` would report, from DuckDB alone (a dry run's copy has no LanceDB)."""
    from ..store.index import MEMORIES, UNITS
    from ..store.vocabulary import INDEXED_RECORDS_SQL, LIVE_SQL

    con, above = store.con, store.config.query.index_above
    rows = {
        MEMORIES: con.execute(f"SELECT count(*) FROM records WHERE {INDEXED_RECORDS_SQL}").fetchall()[0][0],
        UNITS: con.execute(f"SELECT count(*) FROM units WHERE {LIVE_SQL}").fetchall()[0][0],
    }
    return {name: {"vector_index": n >= above, "text_index": n > 0} for name, n in rows.items()}


@dataclass
class IndexReport(Result):
    state_changes: int
    indexes: dict[str, dict[str, bool]] | None  # None: nothing changed, nothing refreshed
    seconds: float = 0.0

    def summary(self) -> str:
        if self.indexes is None:
            return "nothing changed"
        return f"{self.state_changes} state changes; refreshed " + ", ".join(self.indexes)


class IndexStep:
    def run(self, store: "Store", ctx: "CycleContext") -> IndexReport:
        from ..query.expand import cached_texts
        from ..store.index import MEMORIES, UNITS
        from ..store.reindex import refresh_indexes

        started = time.perf_counter()
        moved = store.con.execute(
            "SELECT count(*) FROM history WHERE run_id = ? AND action LIKE 'state:%'", [ctx.run_id]
        ).fetchall()[0][0]
        clustered = "skipped" not in ctx.reports.get("clusters", {})
        indexes = None
        if moved or clustered:
            indexes = planned_indexes(store) if ctx.dry_run else refresh_indexes(store)
        if not ctx.dry_run:  # files, not memories: a dry run's report (equal to the real one's) leaves it out
            store.embeddings.drop_indexed()  # LanceDB holds them now
            store.embeddings.keep(cached_texts(store))  # so that a query appends nothing to the cache
            for name in (MEMORIES, UNITS):
                store.index.drop_old_versions(name)
        return IndexReport(int(moved), indexes, seconds=round(time.perf_counter() - started, 3))
