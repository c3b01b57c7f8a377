"""Cluster pruning: k-means per agent over active memories, then merge near-duplicates and put to sleep
only what is redundant inside each cluster.

How k is chosen: k = ceil(n / cluster.members_per_cluster), at least 1, at most cluster.max_k
(KMeans with k-means++; MiniBatchKMeans when n > cluster.minibatch_above). Fixed random_state,
so the same store gives the same clusters.

Inside each cluster, in this order:
1. merge: members with cosine ≥ merge_similarity fold into one survivor (pinned/protected first,
   then higher importance, then most recent); the survivor accumulates `merged_ids`/`merged_count`,
   the absorbed go dormant with `merged_into`. Pinned and protected records are never absorbed.
2. prune by redundancy, walking from the member nearest the centroid outwards: a member goes
   dormant only if it carries nothing (chatter; a short process message of a succeeded goal) or is
   covered by what stays (cosine ≥ merge_similarity to a kept member or an active unit, or all its
   content words already appear in kept members). Identifiers (tokens with digits: ids, dates,
   amounts) guard both steps: a member whose identifiers the survivor or the kept members lack is
   neither merged nor counted as covered by cosine. `keep_ratio` is a floor: at most
   n - ceil(keep_ratio·n) of the n members left after merging go dormant per cycle.
Every member, including those put to sleep here, stays listed in `cluster_members`, so a unit
refined from the cluster names them as sources.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..results import Result
from ..store.db import arrow_view, utcnow
from ..store.state import set_state
from .common import examples

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext

WORD = re.compile(r"[a-z0-9][a-z0-9_.:/@-]*")
STOPWORDS = frozenset(
    "a an the and or but if then else of to in on at by for with from as is are was were be been being it its "
    "this that these those i you he she we they me my your our their his her them us do does did done have has "
    "had not no so just also very can could would should will shall may might must there here what which who "
    "whom when where why how all any some user assistant system tool call returned".split()
)
SHORT_PROCESS_WORDS = 8
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


@dataclass
class _Plan:
    """What one agent's clustering decided; applied only when not a dry run."""

    merges: dict[str, list[str]] = field(default_factory=dict)  # survivor -> absorbed ids
    covered: dict[str, str] = field(default_factory=dict)  # id -> reason
    empty: dict[str, str] = field(default_factory=dict)
    clusters: list[dict[str, Any]] = field(default_factory=list)
    kept_by_floor: int = 0  # redundant members kept because the cluster was at its keep_ratio floor


def content_words(text: str | None) -> frozenset[str]:
    return frozenset(w.strip(".:/-") for w in WORD.findall((text or "").lower()) if w not in STOPWORDS and len(w) > 1)


def identifiers(words: frozenset[str]) -> frozenset[str]:
    """Tokens with digits (ids, dates, amounts, flight numbers): MiniLM barely sees them, yet they are
    often the one unique fact, so a memory is never merged or pruned into one that lacks its identifiers."""
    return frozenset(w for w in words if any(c.isdigit() for c in w))


def choose_k(n: int, store: "Store") -> int:
    cfg = store.config.cluster
    return max(1, min(cfg.max_k, math.ceil(n / max(1, cfg.members_per_cluster)), n))


def k_rule(store: "Store") -> str:
    cfg = store.config.cluster
    return (
        f"k = ceil(n / {cfg.members_per_cluster}) per agent, capped at {cfg.max_k}; "
        f"MiniBatchKMeans above {cfg.minibatch_above} records, KMeans below"
    )


def run_kmeans(vectors: np.ndarray, k: int, *, minibatch_above: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels and L2-normalised centroids; deterministic.

    BLAS runs single-threaded here: with many small products, threads that wait for each other made
    k-means++ 10x slower on a busy two-core machine. Large stores use MiniBatchKMeans with random
    initialisation (k-means++ over thousands of centroids costs more than the whole fit)."""
    from threadpoolctl import threadpool_limits

    if k == 1:
        centroids = vectors.mean(axis=0, keepdims=True)
        labels = np.zeros(len(vectors), dtype=np.int64)
    else:
        with threadpool_limits(1):
            if len(vectors) > minibatch_above:
                from sklearn.cluster import MiniBatchKMeans

                model = MiniBatchKMeans(
                    n_clusters=k,
                    random_state=0,
                    batch_size=1024,
                    n_init=1,
                    max_iter=10,
                    init="random",
                    max_no_improvement=3,
                    reassignment_ratio=0.0,
                )
            else:
                from sklearn.cluster import KMeans

                model = KMeans(n_clusters=k, random_state=0, n_init=1)
            labels = model.fit_predict(vectors)
        centroids = model.cluster_centers_
    norms = np.linalg.norm(centroids, axis=1, keepdims=True)
    return labels, (centroids / np.maximum(norms, 1e-12)).astype(np.float32)


def _survivor_order(rows: list[dict[str, Any]], members: np.ndarray) -> list[int]:
    """Local positions, best survivor first: pinned/protected, then higher importance, then most recent."""
    return sorted(
        range(len(members)),
        key=lambda j: (
            not (rows[members[j]]["pinned"] or rows[members[j]]["protected"]),
            -rows[members[j]]["importance"],
            -rows[members[j]]["ts"].timestamp(),
            rows[members[j]]["id"],
        ),
    )


def _carries_nothing(row: dict[str, Any], words: frozenset[str]) -> str | None:
    if row["category"] == "chatter":
        return "carries nothing: chatter"
    if (
        row["goal_status"] == "succeeded"
        and row["kind"] == "message"
        and row["category"] in ("process", "conversation")
        and len(words) <= SHORT_PROCESS_WORDS
    ):
        return "carries nothing: short process message of a succeeded goal"
    return None


def plan_agent(store: "Store", rows: list[dict[str, Any]], vectors: np.ndarray, unit_vectors: np.ndarray) -> _Plan:
    cfg = store.config.cluster
    plan = _Plan()
    labels, centroids = run_kmeans(vectors, choose_k(len(rows), store), minibatch_above=cfg.minibatch_above)
    words = [content_words(r["text"]) for r in rows]
    fixed = np.array([bool(r["pinned"] or r["protected"]) for r in rows], dtype=bool)
    unit_best = (
        (vectors @ unit_vectors.T).max(axis=1) if len(unit_vectors) else np.full(len(rows), -1.0, dtype=np.float32)
    )
    order = np.argsort(labels, kind="stable")
    for members in np.split(order, np.flatnonzero(np.diff(labels[order])) + 1):
        if members.size:
            _plan_cluster(
                plan, cfg, rows, members, vectors, centroids[int(labels[members[0]])], words, fixed, unit_best
            )
    return plan


def _plan_cluster(
    plan: _Plan,
    cfg: Any,
    rows: list[dict[str, Any]],
    members: np.ndarray,
    vectors: np.ndarray,
    centroid: np.ndarray,
    words: list[frozenset[str]],
    fixed: np.ndarray,
    unit_best: np.ndarray,
) -> None:
    """Merge, then prune by redundancy, inside one cluster (positions below are local to the cluster)."""
    threshold = cfg.merge_similarity
    local = vectors[members]
    sims = local @ local.T
    by_nearness = np.argsort(-(local @ centroid), kind="stable")
    absorbed = np.zeros(len(members), dtype=bool)
    local_fixed = fixed[members]
    for a in _survivor_order(rows, members):
        if absorbed[a]:
            continue
        group = np.flatnonzero((sims[a] >= threshold) & ~absorbed & ~local_fixed)
        survivor_ids = identifiers(words[members[a]])
        group = np.array(
            [j for j in group if j != a and identifiers(words[members[j]]) <= survivor_ids], dtype=np.int64
        )
        if group.size:
            absorbed[group] = True
            plan.merges[rows[members[a]]["id"]] = [rows[members[j]]["id"] for j in group]
    distinct = [int(j) for j in by_nearness if not absorbed[j]]
    if len(distinct) >= cfg.min_cluster_size:
        budget = len(distinct) - math.ceil(cfg.keep_ratio * len(distinct))
        best_kept = np.full(len(members), -np.inf, dtype=np.float32)
        kept_words: set[str] = set()
        for j in distinct:
            row, i = rows[members[j]], int(members[j])
            unique_identifiers = not identifiers(words[i]) <= kept_words
            stands_for_others = row["id"] in plan.merges or row["merged_ids"] not in (None, "[]")
            reason = None
            if not (local_fixed[j] or stands_for_others):
                reason = _carries_nothing(row, words[i])
                if reason is None and best_kept[j] >= threshold and not unique_identifiers:
                    reason = f"covered: cosine >= {threshold} to a kept member"
                if reason is None and unit_best[i] >= threshold and not unique_identifiers:
                    reason = f"covered: cosine >= {threshold} to a knowledge unit"
                if reason is None and kept_words and words[i] and words[i] <= kept_words:
                    reason = "covered: every content word is in kept members"
            if reason and budget > 0:
                budget -= 1
                (plan.empty if reason.startswith("carries nothing") else plan.covered)[row["id"]] = reason
                continue
            plan.kept_by_floor += bool(reason)
            np.maximum(best_kept, sims[j], out=best_kept)
            kept_words |= words[i]
    ids = sorted(rows[int(m)]["id"] for m in members)
    medoid = rows[int(members[by_nearness[0]])]["id"]
    plan.clusters.append(
        {
            "cluster_key": "c" + hashlib.sha1(f"{rows[0]['agent']}|{medoid}".encode()).hexdigest()[:15],
            "size": len(ids),
            "centroid": centroid.tolist(),
            "signature": hashlib.sha1("\n".join(ids).encode()).hexdigest()[:16],
            "members": ids,
        }
    )


def _agent_rows(store: "Store", agent: str) -> list[dict[str, Any]]:
    cursor = store.con.execute(
        """SELECT r.id, r.text, r.category, r.kind, r.importance, r.ts, r.pinned, r.protected, r.merged_ids, g.status
           FROM records r LEFT JOIN goals g ON r.goal_id = g.goal_id
           WHERE r.state = 'active' AND r.agent = ? ORDER BY r.id""",
        [agent],
    )
    rows = [dict(zip(RECORD_FIELDS, r)) for r in cursor.fetchall()]
    for r in rows:
        r["agent"] = agent
    return rows


def _unit_vectors(store: "Store", agent: str) -> np.ndarray:
    texts = [
        t
        for (t,) in store.con.execute(
            "SELECT text FROM units WHERE agent = ? AND status = 'active'", [agent]
        ).fetchall()
    ]
    return store.embeddings.encode(texts) if texts else np.zeros((0, 1), dtype=np.float32)


def prune_clusters(
    store: "Store", *, dry_run: bool, run_id: str | None = None, now: dt.datetime | None = None
) -> ClusterReport:
    started = time.perf_counter()
    report = ClusterReport(k_rule=k_rule(store))
    agents = [
        a
        for (a,) in store.con.execute(
            "SELECT DISTINCT agent FROM records WHERE state = 'active' ORDER BY agent"
        ).fetchall()
    ]
    texts: dict[str, str] = {}
    for agent in agents:
        rows = _agent_rows(store, agent)
        if not rows:
            continue
        vectors = store.embeddings.encode([r["text"] for r in rows])
        plan = plan_agent(store, rows, vectors, _unit_vectors(store, agent))
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
            _apply(store, agent, plan, run_id, now or utcnow())
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _apply(store: "Store", agent: str, plan: _Plan, run_id: str | None, now: dt.datetime) -> None:
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
    _write_clusters(store, agent, plan, now)


def _write_clusters(store: "Store", agent: str, plan: _Plan, now: dt.datetime) -> None:
    con = store.con
    con.execute(
        "DELETE FROM cluster_members WHERE cluster_key IN (SELECT cluster_key FROM clusters WHERE agent = ?)", [agent]
    )
    con.execute("DELETE FROM clusters WHERE agent = ?", [agent])
    if not plan.clusters:
        return
    clusters = pa.table(
        {
            "cluster_key": [c["cluster_key"] for c in plan.clusters],
            "agent": [agent] * len(plan.clusters),
            "size": [c["size"] for c in plan.clusters],
            "centroid": [c["centroid"] for c in plan.clusters],
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
            "INSERT INTO clusters SELECT cluster_key, agent, size, centroid::FLOAT[], signature, updated FROM new_clusters"
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
