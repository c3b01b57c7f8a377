"""The cycle's last step: refresh the full-text and vector indexes when rows changed."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext


class IndexStep:
    name = "index"

    def run(self, store: "Store", ctx: "CycleContext") -> dict[str, Any]:
        from ..query.search import refresh_indexes

        started = time.perf_counter()
        moved = store.con.execute(
            "SELECT count(*) FROM history WHERE run_id = ? AND action LIKE 'state:%'", [ctx.run_id]).fetchall()[0][0]
        clustered = "skipped" not in ctx.reports.get("clusters", {})
        indexes = refresh_indexes(store) if moved or clustered else None
        return {"state_changes": int(moved), "indexes": indexes, "seconds": round(time.perf_counter() - started, 3)}
