"""The cycle's last step: refresh the full-text and vector indexes when rows changed."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext


def planned_indexes(store: "Store") -> dict[str, dict[str, bool]]:
    """What `refresh_indexes` would report, from DuckDB alone (a dry run's copy has no LanceDB)."""
    from ..store.index import MEMORIES, UNITS

    con, above = store.con, store.config.query.index_above
    rows = {
        MEMORIES: con.execute("SELECT count(*) FROM records WHERE state IN ('active', 'dormant')").fetchall()[0][0],
        UNITS: con.execute("SELECT count(*) FROM units WHERE status = 'active'").fetchall()[0][0],
    }
    return {name: {"vector_index": n >= above, "text_index": n > 0} for name, n in rows.items()}


class IndexStep:
    name = "index"

    def run(self, store: "Store", ctx: "CycleContext") -> dict[str, Any]:
        from ..store.reindex import refresh_indexes

        started = time.perf_counter()
        moved = store.con.execute(
            "SELECT count(*) FROM history WHERE run_id = ? AND action LIKE 'state:%'", [ctx.run_id]
        ).fetchall()[0][0]
        clustered = "skipped" not in ctx.reports.get("clusters", {})
        indexes = None
        if moved or clustered:
            indexes = planned_indexes(store) if ctx.dry_run else refresh_indexes(store)
        return {"state_changes": int(moved), "indexes": indexes, "seconds": round(time.perf_counter() - started, 3)}
