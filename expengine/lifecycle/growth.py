"""The design's health metrics: how the store grew and shrank per cycle, and where the weight sits now.

`history` adds to each compaction run what the cycle did (forgotten, merged, purged, refined), counted
from the per-item history log the steps write (`charts.series` turns the runs into what a chart
plots). `weights` is the weight distribution of active memories and units, and the share of each
category that went to sleep.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .compact import history as compact_history

if TYPE_CHECKING:
    from ..store.store import Store

# The weight histogram's bin edges: the purge and dormant thresholds' neighbourhood, then the usual range.
EDGES = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0, 1.1, 1.5)


def history(store: "Store") -> list[dict[str, Any]]:
    """Compaction runs, oldest first, each with what its cycle forgot, merged, purged and refined."""
    runs = compact_history(store)
    acted = store.con.execute(
        """SELECT run_id,
                  count(*) FILTER (WHERE action = 'state:dormant'),
                  count(*) FILTER (WHERE action = 'merge:absorbed'),
                  count(*) FILTER (WHERE action = 'state:archived' AND detail LIKE 'purge:%')
           FROM history WHERE run_id IS NOT NULL GROUP BY run_id"""
    ).fetchall()
    by_run = {r[0]: r[1:] for r in acted}
    refined = dict(store.con.execute("SELECT id, report FROM runs WHERE NOT dry_run AND report IS NOT NULL").fetchall())
    for run in runs:
        forgotten, merged, purged = by_run.get(run["run_id"], (0, 0, 0))
        steps = json.loads(refined.get(run["run_id"]) or "{}").get("steps") or {}
        run.update(
            forgotten=int(forgotten),
            merged=int(merged),
            purged=int(purged),
            refined=int((steps.get("refine") or {}).get("units_written") or 0),
        )
    return runs


def _distribution(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    edges = [*EDGES, max(EDGES[-1], ordered[-1]) if ordered else EDGES[-1]]
    bins = []
    for low, high in zip(edges, edges[1:]):
        last = high == edges[-1]
        bins.append(
            {"from": low, "to": high, "count": sum(1 for v in ordered if low <= v < high or (last and v == high))}
        )

    def quantile(q: float) -> float | None:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 4) if ordered else None

    return {
        "count": len(ordered),
        "mean": round(sum(ordered) / len(ordered), 4) if ordered else None,
        "min": quantile(0.0),
        "median": quantile(0.5),
        "max": round(ordered[-1], 4) if ordered else None,
        "bins": [b for b in bins if b["from"] < b["to"]],
    }


def weights(store: "Store") -> dict[str, Any]:
    """Weights of active memories and units, and which categories are forgotten (dormant or archived) most."""
    con = store.con
    memories = [r[0] for r in con.execute("SELECT weight FROM records WHERE state = 'active'").fetchall()]
    units = [r[0] for r in con.execute("SELECT weight FROM units WHERE status = 'active'").fetchall()]
    rows = con.execute(
        """SELECT category, count(*), count(*) FILTER (WHERE state <> 'active') AS forgotten
           FROM records GROUP BY category ORDER BY forgotten / count(*) DESC, forgotten DESC, category"""
    ).fetchall()
    categories = [
        {"category": c, "records": int(n), "forgotten": int(f), "share": round(f / n, 3) if n else 0.0}
        for c, n, f in rows
    ]
    return {"memories": _distribution(memories), "units": _distribution(units), "categories": categories}
