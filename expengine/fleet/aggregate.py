"""`fleet stats` and `fleet history`: one row per store and the fleet's totals (read in this process:
each is a few SQL counts, far cheaper than starting Ray)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import fleet_stores

SUMMED = ("raw", "active", "dormant", "archived", "units", "rejects", "hot_tokens", "raw_tokens", "size_bytes")


def _each(root: str | Path, read: str) -> list[dict[str, Any]]:
    from ..engine import Engine
    from ..errors import ExpengineError

    rows = []
    for name, path in fleet_stores(root).items():
        try:
            with Engine(store=path, lock_timeout=5.0) as engine:
                rows.append({"store": name, read: getattr(engine, read)()})
        except ExpengineError as exc:
            rows.append({"store": name, "error": exc.message})
    return rows


def fleet_stats(root: str | Path) -> dict[str, Any]:
    stores = []
    totals = dict.fromkeys(SUMMED, 0)
    for row in _each(root, "stats"):
        if "error" in row:
            stores.append(row)
            continue
        stats = row["stats"].to_dict()
        stores.append({"store": row["store"], **{k: stats[k] for k in SUMMED}, "hot_share": stats["hot_share"]})
        for key in SUMMED:
            totals[key] += int(stats[key] or 0)
    share = round(totals["hot_tokens"] / totals["raw_tokens"], 4) if totals["raw_tokens"] else None
    failed = sum(1 for s in stores if "error" in s)
    return {"root": str(root), "stores": stores, "totals": {**totals, "hot_share": share}, "failed": failed}


def fleet_history(root: str | Path) -> dict[str, Any]:
    stores = []
    for row in _each(root, "history"):
        if "error" in row:
            stores.append(row)
            continue
        runs = row["history"]
        done = [r for r in runs if r.get("status") == "completed"]
        stores.append(
            {
                "store": row["store"],
                "cycles": len(done),
                "runs": len(runs),
                "last_started": done[-1]["started"] if done else None,
                "forgotten": sum(int(r.get("forgotten") or 0) for r in runs),
                "merged": sum(int(r.get("merged") or 0) for r in runs),
                "purged": sum(int(r.get("purged") or 0) for r in runs),
                "refined": sum(int(r.get("refined") or 0) for r in runs),
            }
        )
    never = [s["store"] for s in stores if not s.get("cycles")]
    failed = sum(1 for s in stores if "error" in s)
    return {"root": str(root), "stores": stores, "never_compacted": never, "failed": failed}
