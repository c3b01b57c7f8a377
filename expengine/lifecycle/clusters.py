"""Cluster pruning: k-means per agent over active memories, then merge near-duplicates and put to sleep
only what is redundant inside each cluster (cluster_plan.py decides, documented there); this module
reads each agent's memories, applies the plan through `set_state`, writes the `clusters` and
`cluster_members` tables refinement reads, and says when clustering is due.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..clock import utcnow
from ..results import Result
from ..store.db import arrow_view, in_ids
from ..store.state import set_state
from .cluster_incremental import (
    CLUSTERED_UPTO,
    FULL_SIZE,
    SINCE_FULL,
    clustering_mode,
    plan_incremental,
    stored_centroids,
)
from .cluster_plan import Plan, agent_rows, plan_agent, unit_vectors
from .common import examples
from .cycle import meta, set_meta, sweep_size

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext


@dataclass
class ClusterReport(Result):
    agents: int = 0
    records_clustered: int = 0
    clusters: int = 0
    k_rule: str = ""
    merged_groups: int = 0
    merged_records: int = 0
    dormant_covered: int = 0
    dormant_empty: int = 0
    kept_by_floor: int = 0
    partitions_full: int = 0  # (agent, user) partitions clustered afresh
    partitions_incremental: int = 0  # partitions where only the clusters new records joined were planned again
    partitions_drifted: int = 0  # clustered afresh because too many new records were far from every centroid
    clusters_replanned: int = 0
    new_records: int = 0  # active records ingested since the last cycle, in incremental partitions
    new_far: int = 0  # of those, the ones with no centroid within cycle.drift_similarity
    skipped: str | None = None
    merge_examples: list[dict[str, Any]] = field(default_factory=list)
    dormant_examples: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    clustering: str = ""  # why a cycle ran or skipped it (the cycle moves it to its own report)

    def summary(self) -> str:
        if self.skipped:
            return self.skipped
        return (
            f"{self.records_clustered} records in {self.clusters} clusters; {self.merged_records} merged into "
            f"{self.merged_groups} survivors; {self.dormant_covered} covered and {self.dormant_empty} empty "
            f"went dormant; {self.kept_by_floor} kept by the keep_ratio floor"
        )


def k_rule(store: "Store") -> str:
    cfg = store.config.cluster
    return (
        f"k = ceil(n / {cfg.members_per_cluster}) per agent, capped at {cfg.max_k}; "
        f"MiniBatchKMeans above {cfg.minibatch_above} records, KMeans below"
    )


def prune_clusters(
    store: "Store",
    *,
    dry_run: bool,
    run_id: str | None = None,
    now: dt.datetime | None = None,
    since: dt.datetime | None = None,
    sweep_rows: int | None = None,
) -> ClusterReport:
    """Cluster and prune each (agent, user) partition: afresh when `since` is None or the partition
    drifted (cluster_incremental.py), else only the clusters its records ingested after `since` joined,
    and `sweep_rows` members' worth of those clustered longest ago (default `cycle.sweep_rows`)."""
    started = time.perf_counter()
    report = ClusterReport(k_rule=k_rule(store))
    # each user's records apart (and the shared apart from all): no cluster mixes two people's memories
    partitions = store.con.execute(
        "SELECT DISTINCT agent, user FROM records WHERE state = 'active' ORDER BY agent, user NULLS FIRST"
    ).fetchall()
    texts: dict[str, str] = {}
    for agent, user in partitions:
        planned = _plan_partition(store, agent, user, since, report, sweep_rows)
        if planned is None:
            continue
        rows, plan, replaced = planned
        report.agents += 1
        report.records_clustered += len(rows)
        report.clusters += len(plan.clusters)
        report.merged_groups += len(plan.merges)
        report.merged_records += sum(len(v) for v in plan.merges.values())
        report.dormant_covered += len(plan.covered)
        report.dormant_empty += len(plan.empty)
        report.kept_by_floor += plan.kept_by_floor
        texts.update({r["id"]: r["text"] for r in rows})
        if len(report.merge_examples) < 5:
            report.merge_examples += examples(
                plan.merges.items(),
                lambda kv: {"survivor": kv[0], "text": texts[kv[0]], "absorbed": kv[1][:5], "count": len(kv[1])},
                limit=5 - len(report.merge_examples),
            )
        if len(report.dormant_examples) < 5:
            report.dormant_examples += examples(
                list(plan.empty.items()) + list(plan.covered.items()),
                lambda kv: {"id": kv[0], "text": texts[kv[0]], "why": kv[1]},
                limit=5 - len(report.dormant_examples),
            )
        if not dry_run:
            _apply(store, agent, user, plan, replaced, run_id, now or utcnow())
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _plan_partition(
    store: "Store",
    agent: str,
    user: str | None,
    since: dt.datetime | None,
    report: ClusterReport,
    sweep_rows: int | None = None,
) -> tuple[list[dict[str, Any]], Plan, list[str] | None] | None:
    """The partition's rows, plan and the cluster keys it replaces (None: all of the partition's)."""
    stored = [] if since is None else stored_centroids(store, agent, user)
    if since is not None and stored:
        incremental = plan_incremental(store, agent, user, since, stored, report, sweep_rows)
        if incremental is not None:
            return incremental
    rows = agent_rows(store, agent, user)
    if not rows:
        return None
    vectors = store.embeddings.encode([r["text"] for r in rows], indexed=True)
    report.partitions_full += 1
    return rows, plan_agent(store, rows, vectors, unit_vectors(store, agent, user)), None


def _apply(
    store: "Store",
    agent: str,
    user: str | None,
    plan: Plan,
    replaced: list[str] | None,
    run_id: str | None,
    now: dt.datetime,
) -> None:
    con = store.con
    if plan.merges:
        survivors = list(plan.merges)
        absorbed_rows = [(a, s) for s, group in plan.merges.items() for a in group]
        where, params = in_ids("id", survivors + [a for a, _ in absorbed_rows])
        previous = dict(con.execute(f"SELECT id, merged_ids FROM records WHERE {where}", params).fetchall())
        merged_lists = {}
        for survivor, group in plan.merges.items():
            ids = set(json.loads(previous.get(survivor) or "[]"))
            for a in group:
                ids.add(a)
                ids.update(json.loads(previous.get(a) or "[]"))
            ids.discard(survivor)
            merged_lists[survivor] = sorted(ids)
        table = pa.table(
            {
                "id": survivors,
                "merged_ids": [json.dumps(merged_lists[s]) for s in survivors],
                "merged_count": [1 + len(merged_lists[s]) for s in survivors],
            }
        )
        with arrow_view(con, "survivors", table):
            con.execute(
                "UPDATE records SET merged_ids = s.merged_ids, merged_count = s.merged_count FROM survivors s WHERE records.id = s.id"
            )
            con.execute(
                "INSERT INTO history SELECT id, ?, 'merge:survivor', 'stands for ' || merged_count || ' records', ? FROM survivors",
                [now, run_id],
            )
        links = pa.table({"id": [a for a, _ in absorbed_rows], "survivor": [s for _, s in absorbed_rows]})
        with arrow_view(con, "absorbed", links):
            # the absorbed, and whatever they had absorbed before, now point at the new survivor
            con.execute(
                "UPDATE records SET merged_into = a.survivor, merged_ids = NULL, merged_count = 1 FROM absorbed a WHERE records.id = a.id"
            )
            con.execute("UPDATE records SET merged_into = a.survivor FROM absorbed a WHERE records.merged_into = a.id")
            con.execute(
                "INSERT INTO history SELECT id, ?, 'merge:absorbed', 'into ' || survivor, ? FROM absorbed",
                [now, run_id],
            )
        set_state(
            store,
            [a for a, _ in absorbed_rows],
            "dormant",
            reason="merged into a near-duplicate survivor (see merged_into)",
            run_id=run_id,
            now=now,
        )
    by_reason: dict[str, list[str]] = {}
    for rid, reason in list(plan.covered.items()) + list(plan.empty.items()):
        by_reason.setdefault(reason, []).append(rid)
    for reason, reason_ids in by_reason.items():
        set_state(store, reason_ids, "dormant", reason=f"cluster pruning: {reason}", run_id=run_id, now=now)
    _write_clusters(store, agent, user, plan, replaced, now)


def _write_clusters(
    store: "Store", agent: str, user: str | None, plan: Plan, replaced: list[str] | None, now: dt.datetime
) -> None:
    """The plan's clusters in place of the ones it replaced (`replaced` None: all of the partition's)."""
    con = store.con
    params: list[Any]
    if replaced is None:
        mine, params = "agent = ? AND user IS NOT DISTINCT FROM ?", [agent, user]
    else:
        mine, params = "cluster_key IN (SELECT unnest(?))", [replaced]
    con.execute(
        f"DELETE FROM cluster_members WHERE cluster_key IN (SELECT cluster_key FROM clusters WHERE {mine})", params
    )
    con.execute(f"DELETE FROM clusters WHERE {mine}", params)
    if not plan.clusters:
        return
    clusters = pa.table(
        {
            "cluster_key": [c["cluster_key"] for c in plan.clusters],
            "agent": [agent] * len(plan.clusters),
            "user": pa.array([user] * len(plan.clusters), pa.string()),
            "size": [c["size"] for c in plan.clusters],
            "signature": [c["signature"] for c in plan.clusters],
            "updated": [now] * len(plan.clusters),
            "centroid": [np.asarray(c["centroid"], dtype=np.float16).tobytes() for c in plan.clusters],
        }
    )
    members = pa.table(
        {
            "cluster_key": [c["cluster_key"] for c in plan.clusters for _ in c["members"]],
            "record_id": [m for c in plan.clusters for m in c["members"]],
        }
    )
    with arrow_view(con, "new_clusters", clusters):
        con.execute(
            "INSERT INTO clusters (cluster_key, agent, user, size, signature, updated, centroid) "
            "SELECT * FROM new_clusters"
        )
    with arrow_view(con, "new_members", members):
        con.execute("INSERT INTO cluster_members SELECT cluster_key, record_id FROM new_members ON CONFLICT DO NOTHING")


def clustering_due(store: "Store", now: dt.datetime) -> tuple[bool, str]:
    """Whether enough changed since the last clustering to pay for it again, and why."""
    cfg = store.config.cluster
    for (report,) in store.con.execute(
        "SELECT report FROM runs WHERE status = 'completed' AND NOT dry_run ORDER BY started DESC"
    ).fetchall():
        data = json.loads(report or "{}")
        if not data.get("clustering", "").startswith("ran"):
            continue
        last_clock = dt.datetime.fromisoformat(data["clock"])
        upto = data.get("ingested_upto")
        fresh = store.con.execute(
            "SELECT count(*) FROM records WHERE ? IS NULL OR ingested_at > ?", [upto, upto]
        ).fetchall()[0][0]
        hours = (now - last_clock).total_seconds() / 3600
        if fresh >= cfg.interval_new_memories:
            return True, f"ran: {fresh} new records since the last clustering (≥ {cfg.interval_new_memories})"
        if hours >= cfg.interval_hours:
            return True, f"ran: {hours:.1f} h since the last clustering (≥ {cfg.interval_hours} h)"
        return False, (
            f"skipped: {fresh} new records (< {cfg.interval_new_memories}) and {hours:.1f} h "
            f"(< {cfg.interval_hours} h) since the last clustering"
        )
    return True, "ran: first clustering of this store"


class ClustersStep:
    """Clustering runs only when enough changed since the last one, and then only on what changed."""

    def run(self, store: "Store", ctx: "CycleContext") -> ClusterReport:
        due, why = clustering_due(store, ctx.now)
        if not due:
            return ClusterReport(skipped=why, k_rule=k_rule(store), clustering=why)
        upto = store.con.execute("SELECT max(ingested_at) FROM records").fetchall()[0][0]
        since, mode = clustering_mode(store, ctx.full)
        sweep = sweep_size(store, since) if since is not None else None
        report = prune_clusters(store, dry_run=False, run_id=ctx.run_id, now=ctx.now, since=since, sweep_rows=sweep)
        if since is None:
            set_meta(store, FULL_SIZE, str(report.records_clustered))
            set_meta(store, SINCE_FULL, "0")
        else:
            set_meta(store, SINCE_FULL, str(int(meta(store, SINCE_FULL) or 0) + report.new_records))
            far = report.new_far / report.new_records if report.new_records else 0.0
            mode = (
                f"incremental: {report.new_records} new records, {far:.0%} far from every centroid; "
                f"{report.clusters_replanned} clusters planned again; {report.partitions_drifted} partitions "
                f"drifted and {report.partitions_full} clustered afresh"
            )
        if upto is not None:
            set_meta(store, CLUSTERED_UPTO, upto.isoformat())
        report.clustering = f"{why}; {mode}"
        return report
