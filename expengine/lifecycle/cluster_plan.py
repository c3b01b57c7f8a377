"""What cluster pruning decides, per agent, before anything is written: k-means over the active
memories, then the merges and the members that are redundant inside each cluster.

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

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..store.vocabulary import LIVE_SQL

if TYPE_CHECKING:
    from ..store.store import Store


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
class Plan:
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
    return frozenset(w for w in words if not w.isalpha() and any(c.isdigit() for c in w))  # a letter is no digit


def choose_k(n: int, store: "Store") -> int:
    cfg = store.config.cluster
    return max(1, min(cfg.max_k, math.ceil(n / max(1, cfg.members_per_cluster)), n))


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


def plan_agent(store: "Store", rows: list[dict[str, Any]], vectors: np.ndarray, unit_vectors: np.ndarray) -> Plan:
    """k-means over all of an agent's active memories, then each cluster planned."""
    cfg = store.config.cluster
    labels, centroids = run_kmeans(vectors, choose_k(len(rows), store), minibatch_above=cfg.minibatch_above)
    order = np.argsort(labels, kind="stable")
    groups = [
        (members, centroids[int(labels[members[0]])])
        for members in np.split(order, np.flatnonzero(np.diff(labels[order])) + 1)
        if members.size
    ]
    return plan_groups(store, rows, vectors, unit_vectors, groups)


def plan_groups(
    store: "Store",
    rows: list[dict[str, Any]],
    vectors: np.ndarray,
    unit_vectors: np.ndarray,
    groups: list[tuple[np.ndarray, np.ndarray]],
) -> Plan:
    """Plan each group (positions into `rows`, and its centroid) as one cluster."""
    cfg = store.config.cluster
    plan = Plan()
    words = [content_words(r["text"]) for r in rows]
    marks = [identifiers(w) for w in words]  # once a row: a cluster compares every pair of its members
    fixed = np.array([bool(r["pinned"] or r["protected"]) for r in rows], dtype=bool)
    unit_best = (
        (vectors @ unit_vectors.T).max(axis=1) if len(unit_vectors) else np.full(len(rows), -1.0, dtype=np.float32)
    )
    for members, centroid in groups:
        _plan_cluster(plan, cfg, rows, members, vectors, centroid, words, marks, fixed, unit_best)
    return plan


def _plan_cluster(
    plan: Plan,
    cfg: Any,
    rows: list[dict[str, Any]],
    members: np.ndarray,
    vectors: np.ndarray,
    centroid: np.ndarray,
    words: list[frozenset[str]],
    marks: list[frozenset[str]],
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
        survivor_ids = marks[members[a]]
        group = np.array([j for j in group if j != a and marks[members[j]] <= survivor_ids], dtype=np.int64)
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
            unique_identifiers = not marks[i] <= kept_words
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
            "signature": hashlib.sha1("\n".join(ids).encode()).hexdigest()[:16],
            "members": ids,
            "centroid": centroid,
        }
    )


def agent_rows(
    store: "Store", agent: str, user: str | None, where: str = "TRUE", params: list[Any] | None = None
) -> list[dict[str, Any]]:
    cursor = store.con.execute(
        f"""SELECT r.id, r.text, r.category, r.kind, r.importance, r.ts, r.pinned, r.protected, r.merged_ids, g.status
           FROM records r LEFT JOIN goals g ON r.goal_id = g.goal_id
           WHERE r.state = 'active' AND r.agent = ? AND r.user IS NOT DISTINCT FROM ? AND {where} ORDER BY r.id""",
        [agent, user, *(params or [])],
    )
    rows = [dict(zip(RECORD_FIELDS, r)) for r in cursor.fetchall()]
    for r in rows:
        r["agent"] = agent
    return rows


def unit_vectors(store: "Store", agent: str, user: str | None) -> np.ndarray:
    """The vectors of the live units a member may be covered by: those its user is shown."""
    texts = [
        t
        for (t,) in store.con.execute(
            f"SELECT text FROM units WHERE agent = ? AND {LIVE_SQL} AND (user IS NULL OR user = ?)", [agent, user]
        ).fetchall()
    ]
    return store.embeddings.encode(texts) if texts else np.zeros((0, 1), dtype=np.float32)
