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
from ..store.db import arrow_view
from ..store.state import set_state
from ..store.vocabulary import LIVE_SQL
from .cluster_plan import Plan, plan_agent
from .common import examples

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext


RECORD_FIELDS = (
    "id",
    "text",
    "category",
    "kind",
    "importance",
    "ts",
    "pinned",
    "protected",
    "merged_ids",
    "goal_status",
)


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


def _agent_rows(store: "Store", agent: str, user: str | None) -> list[dict[str, Any]]:
    cursor = store.con.execute(
        """SELECT r.id, r.text, r.category, r.kind, r.importance, r.ts, r.pinned, r.protected, r.merged_ids, g.status
           FROM records r LEFT JOIN goals g ON r.goal_id = g.goal_id
           WHERE r.state = 'active' AND r.agent = ? AND r.user IS NOT DISTINCT FROM ? ORDER BY r.id""",
        [agent, user],
    )
    rows = [dict(zip(RECORD_FIELDS, r)) for r in cursor.fetchall()]
    for r in rows:
        r["agent"] = agent
    return rows


def _unit_vectors(store: "Store", agent: str, user: str | None) -> np.ndarray:
    """The vectors of the live units a member may be covered by: those its user is shown."""
    texts = [
        t
        for (t,) in store.con.execute(
            f"SELECT text FROM units WHERE agent = ? AND {LIVE_SQL} AND (user IS NULL OR user = ?)", [agent, user]
        ).fetchall()
    ]
    return store.embeddings.encode(texts) if texts else np.zeros((0, 1), dtype=np.float32)


def prune_clusters(
    store: "Store", *, dry_run: bool, run_id: str | None = None, now: dt.datetime | None = None
) -> ClusterReport:
    started = time.perf_counter()
    report = ClusterReport(k_rule=k_rule(store))
    # each user's records apart (and the shared apart from all): no cluster mixes two people's memories
    partitions = store.con.execute(
        "SELECT DISTINCT agent, user FROM records WHERE state = 'active' ORDER BY agent, user NULLS FIRST"
    ).fetchall()
    texts: dict[str, str] = {}
    for agent, user in partitions:
        rows = _agent_rows(store, agent, user)
        if not rows:
            continue
        vectors = store.embeddings.encode([r["text"] for r in rows], indexed=True)
        plan = plan_agent(store, rows, vectors, _unit_vectors(store, agent, user))
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
            _apply(store, agent, user, plan, run_id, now or utcnow())
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _apply(store: "Store", agent: str, user: str | None, plan: Plan, run_id: str | None, now: dt.datetime) -> None:
    con = store.con
    if plan.merges:
        survivors = list(plan.merges)
        absorbed_rows = [(a, s) for s, group in plan.merges.items() for a in group]
        previous = dict(
            con.execute(
                "SELECT id, merged_ids FROM records WHERE id IN (SELECT unnest(?))",
                [survivors + [a for a, _ in absorbed_rows]],
            ).fetchall()
        )
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
    _write_clusters(store, agent, user, plan, now)


def _write_clusters(store: "Store", agent: str, user: str | None, plan: Plan, now: dt.datetime) -> None:
    con = store.con
    mine = "agent = ? AND user IS NOT DISTINCT FROM ?"
    con.execute(
        f"DELETE FROM cluster_members WHERE cluster_key IN (SELECT cluster_key FROM clusters WHERE {mine})",
        [agent, user],
    )
    con.execute(f"DELETE FROM clusters WHERE {mine}", [agent, user])
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
            "INSERT INTO clusters (cluster_key, agent, user, size, signature, updated) SELECT * FROM new_clusters"
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
    """Clustering is the expensive step: it runs only when enough changed since the last one."""

    def run(self, store: "Store", ctx: "CycleContext") -> ClusterReport:
        due, why = clustering_due(store, ctx.now)
        if not due:
            return ClusterReport(skipped=why, k_rule=k_rule(store), clustering=why)
        report = prune_clusters(store, dry_run=False, run_id=ctx.run_id, now=ctx.now)
        report.clustering = why
        return report
