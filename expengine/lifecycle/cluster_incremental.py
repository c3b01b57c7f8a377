"""Incremental clustering: new records join the nearest stored centroid, and only the clusters they
joined (plus a sweep of the clusters clustered longest ago) are planned again; a cluster grown past
twice `cluster.members_per_cluster` is split by k-means. The drift rule says when to cluster afresh
instead (`clustering_mode`, and per partition in `plan_incremental`); the rule and its measurement
are in docs (the compaction page)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import numpy as np

from .cluster_plan import Plan, agent_rows, choose_k, plan_groups, run_kmeans, unit_vectors
from .cycle import meta

if TYPE_CHECKING:
    from ..store.store import Store


CLUSTERED_UPTO = "cycle.clustered_upto"  # store_meta: the newest record the last clustering saw
FULL_SIZE = "cycle.full_clustered"  # store_meta: records the last full clustering clustered
SINCE_FULL = "cycle.clustered_since_full"  # store_meta: new records clustered incrementally since


def clustering_mode(store: "Store", full: bool) -> tuple[dt.datetime | None, str]:
    """Since when this clustering works incrementally (None: afresh), and why: the drift rule's other half
    (too many new records far from every centroid) is decided per partition in `_plan_incremental`."""
    if full:
        return None, "full: compact --full"
    upto = meta(store, CLUSTERED_UPTO)
    if upto is None:
        return None, "full: no clustering with centroids yet"
    at_full, since_full = int(meta(store, FULL_SIZE) or 0), int(meta(store, SINCE_FULL) or 0)
    growth = store.config.cycle.refit_growth
    if since_full > growth * at_full:
        return None, (
            f"full: {since_full} records clustered incrementally since the last full clustering of {at_full} "
            f"(> cycle.refit_growth {growth}x)"
        )
    return dt.datetime.fromisoformat(upto), "incremental"


def stored_centroids(store: "Store", agent: str, user: str | None) -> list[tuple[str, np.ndarray]]:
    """The partition's clusters and centroids, or nothing when one lacks its centroid (written before m017)."""
    found = store.con.execute(
        "SELECT cluster_key, centroid FROM clusters WHERE agent = ? AND user IS NOT DISTINCT FROM ? ORDER BY cluster_key",
        [agent, user],
    ).fetchall()
    if any(c is None for _, c in found):
        return []
    return [(key, np.frombuffer(blob, dtype=np.float16).astype(np.float32)) for key, blob in found]


def plan_incremental(
    store: "Store",
    agent: str,
    user: str | None,
    since: dt.datetime,
    stored: list[tuple[str, np.ndarray]],
    report: Any,
    sweep_rows: int | None = None,
) -> tuple[list[dict[str, Any]], Plan, list[str]] | None:
    """New records join their nearest cluster; those clusters, and the partition's share of the sweep
    (the clusters clustered longest ago), are planned again. None: the partition drifted (more than
    `cycle.drift_share` of its new records far from every centroid), so it is clustered afresh.
    `report` is the step's ClusterReport, whose drift counts this adds to; the sweep is `sweep_rows`
    members' worth of clusters (default `cycle.sweep_rows`)."""
    cfg = store.config.cycle
    new_rows = agent_rows(store, agent, user, "r.ingested_at > ?", [since])
    keys = [k for k, _ in stored]
    centroids = np.stack([c for _, c in stored])
    joined: dict[str, list[int]] = {}
    if new_rows:
        new_vectors = store.embeddings.encode([r["text"] for r in new_rows], indexed=True)
        sims = new_vectors @ centroids.T
        far = int((sims.max(axis=1) < cfg.drift_similarity).sum())
        report.new_records += len(new_rows)
        report.new_far += far
        if far > cfg.drift_share * len(new_rows) and len(new_rows) >= store.config.cluster.min_cluster_size:
            report.partitions_drifted += 1
            return None
        for i, nearest in enumerate(sims.argmax(axis=1)):
            joined.setdefault(keys[int(nearest)], []).append(i)
    swept_members = cfg.sweep_rows if sweep_rows is None else sweep_rows
    sweep = max(1, swept_members // max(1, store.config.cluster.members_per_cluster))
    oldest = store.con.execute(
        "SELECT cluster_key FROM clusters WHERE agent = ? AND user IS NOT DISTINCT FROM ? ORDER BY updated, cluster_key LIMIT ?",
        [agent, user, sweep],
    ).fetchall()
    affected = sorted(set(joined) | {k for (k,) in oldest})
    members = store.con.execute(
        "SELECT cluster_key, record_id FROM cluster_members WHERE cluster_key IN (SELECT unnest(?))", [affected]
    ).fetchall()
    old_rows = agent_rows(
        store, agent, user, "r.id IN (SELECT unnest(?)) AND r.ingested_at <= ?", [[m for _, m in members], since]
    )
    rows = old_rows + new_rows
    position = {r["id"]: i for i, r in enumerate(old_rows)}
    by_cluster: dict[str, list[int]] = {k: [] for k in affected}
    for key, record_id in members:
        if record_id in position:
            by_cluster[key].append(position[record_id])
    for key, new_positions in joined.items():
        by_cluster[key] += [len(old_rows) + i for i in new_positions]
    vectors = store.embeddings.encode([r["text"] for r in rows], indexed=True)
    groups = [g for positions in by_cluster.values() if positions for g in _split(store, vectors, positions)]
    report.partitions_incremental += 1
    report.clusters_replanned += len(affected)
    return rows, plan_groups(store, rows, vectors, unit_vectors(store, agent, user), groups), affected


def _split(store: "Store", vectors: np.ndarray, positions: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """A cluster as one group around its mean, or, grown past twice `members_per_cluster`, split by k-means."""
    members = np.array(sorted(positions), dtype=np.int64)
    local = vectors[members]
    per = max(1, store.config.cluster.members_per_cluster)
    if len(members) <= 2 * per:
        centroid = local.mean(axis=0)
        return [(members, (centroid / max(float(np.linalg.norm(centroid)), 1e-12)).astype(np.float32))]
    labels, centroids = run_kmeans(
        local, choose_k(len(members), store), minibatch_above=store.config.cluster.minibatch_above
    )
    return [(members[labels == j], centroids[j]) for j in range(len(centroids)) if (labels == j).any()]
