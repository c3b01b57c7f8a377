"""The clusters refinement has looked at, by their members' signature: a night skips them until their members
change (`m018_refined_clusters`), whatever came of it (no unit, or units later superseded, merged into a slot
rule or put to sleep, which an unchanged cluster must not bring back). This module owns that table, and the
changed clusters a night left for the next (`store_meta`, in the order they waited)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store import Store


def refined_signatures(store: "Store") -> dict[str, str]:
    """Cluster key → the signature refinement last looked at."""
    return dict(store.con.execute("SELECT cluster_key, signature FROM refined_clusters").fetchall())


def mark_refined(store: "Store", looked: list[tuple[str, str]], current: list[str]) -> None:
    """Remember the (cluster key, signature) pairs looked at; forget clusters no longer in `current`."""
    con = store.con
    con.execute("DELETE FROM refined_clusters WHERE cluster_key NOT IN (SELECT unnest(?))", [current])
    if looked:
        con.execute(
            "INSERT OR REPLACE INTO refined_clusters SELECT * FROM (SELECT unnest(?), unnest(?))",
            [[k for k, _ in looked], [s for _, s in looked]],
        )


CARRIED_KEY = "refine.carried"  # store_meta: changed clusters' keys a night's budget left, oldest first


def carried_keys(store: "Store") -> list[str]:
    """The keys of the changed clusters the last pass left for this one, oldest first."""
    row = store.con.execute("SELECT value FROM store_meta WHERE key = ?", [CARRIED_KEY]).fetchone()
    return json.loads(row[0]) if row else []


def carry(store: "Store", keys: list[str]) -> None:
    """Leave these changed clusters' keys (oldest first) for the next pass to take first."""
    store.con.execute("INSERT OR REPLACE INTO store_meta VALUES (?, ?)", [CARRIED_KEY, json.dumps(keys)])
