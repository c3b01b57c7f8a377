"""The clusters refinement looked at and got no unit from, by their members' signature: a night skips them
until their members change (`m018_refined_clusters`). This module owns that table."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store import Store


def refined_signatures(store: "Store") -> dict[str, str]:
    """Cluster key → the signature refinement last looked at and got no unit from (`m018_refined_clusters`)."""
    return dict(store.con.execute("SELECT cluster_key, signature FROM refined_clusters").fetchall())


def mark_refined(store: "Store", looked: list[tuple[str, str]], current: list[str]) -> None:
    """Remember the (cluster key, signature) pairs that gave no unit; forget clusters no longer in `current`."""
    con = store.con
    con.execute("DELETE FROM refined_clusters WHERE cluster_key NOT IN (SELECT unnest(?))", [current])
    if looked:
        con.execute(
            "INSERT OR REPLACE INTO refined_clusters SELECT * FROM (SELECT unnest(?), unnest(?))",
            [[k for k, _ in looked], [s for _, s in looked]],
        )
