"""Hybrid retrieval over knowledge units and memories, ranked by one transparent score.

How a query is answered:

1. The query text is embedded once (the model is loaded once per process).
2. Retrieval in LanceDB, per table (`memories`, `units`), with the filters as prefilters:
   a vector search (cosine) and a full-text search (LanceDB's own FTS index), each returning
   `config.query.candidates` rows. The vector lists of both tables are merged by cosine distance
   (same embedder, so comparable); the FTS lists by BM25 score.
3. Reciprocal rank fusion: `rrf = Σ 1 / (rrf_k + rank)` over the lists an item appears in
   (rank starts at 1). `similarity = rrf / (n_lists / (rrf_k + 1))`, where n_lists is the number
   of lists that ran (2, or 1 when the query has no searchable word): 1.0 means first in every
   list, 0.5 means first in one list only.
4. DuckDB (the source of truth) supplies the lifecycle columns, and each candidate is scored:

       score = alpha·similarity + beta·weight + gamma·recency + utility_weight·utility

   weight  = W / (1 + W), W the stored weight (0.5 for a fresh memory, → 1 as it is reinforced);
   recency = recency_base ** hours since the latest of: a memory's ts and last access; a unit's
             newest source ts, as_of and last use (not `updated`, which refinement rewrites);
   utility = tanh(U), U the stored utility (0 until feedback arrives; negative when harmful).
5. The best `k` are kept. When none of them is a rule, the last slot goes to the best-scored rule
   candidate whose cosine similarity to the query reaches `query.unit_slot_floor`: a rule (how to
   act) worded unlike the agent's task still reaches it, yet never displaces more than one hit.
   The token budget keeps room for that rule (or for the best rule already among the `k`), so long
   memories above it cannot push it out.
6. They are rendered (`render.py`), cut at the token budget, and reinforced unless `touch=False`.

A query that names a project (`[django/django] …`) also gets that project's environment rules as
if they were first in every list (projects.py).

The rooms: filters.py (the prefilters of 2), retrieve.py (1-3), projects.py, score.py (4-5), expand.py (the
evidence under unit hits), render.py (6), hits.py (the result types); this module runs them in
order (`query`) and reinforces what was used (`reinforce`).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING

from ..errors import InputError
from ..store.db import utcnow
from ..store.units import record_use
from .args import QueryArgs
from .expand import attach_evidence
from .filters import make_filters
from .hits import Hit, QueryResult, ScoreParts
from .projects import project_units
from .render import render_prompt
from .retrieve import embed_query, retrieve
from .score import rank, top_with_unit_slot

if TYPE_CHECKING:
    from ..store.store import Store


def reinforce(store: "Store", hits: list[Hit]) -> None:
    """Used hits gain δ_access and a fresh last access: what is retrieved stays."""
    delta, now = store.config.decay.delta_access, utcnow()
    memory_ids = [h.id for h in hits if h.type == "memory"]
    unit_ids = [h.id for h in hits if h.type == "unit"]
    if memory_ids:
        store.con.execute(
            "UPDATE records SET weight = weight + ?, access_count = access_count + 1, last_access = ? "
            "WHERE id IN (SELECT unnest(?))",
            [delta, now, memory_ids],
        )
    record_use(store, unit_ids, delta=delta, now=now)


def _rounded(hit: Hit) -> Hit:
    hit.score = round(hit.score, 6)
    hit.parts = ScoreParts(**{k: round(v, 6) for k, v in asdict(hit.parts).items()})
    for ev in hit.expanded:
        ev.similarity = round(ev.similarity, 4)
    return hit


def query(store: "Store", args: QueryArgs) -> QueryResult:
    """Answer one query (its arguments checked by `QueryArgs`): retrieve, score, expand, render, and
    reinforce what was kept unless `touch` is off."""
    started = time.perf_counter()
    text, k, budget, expand = args.text, args.k, args.budget, args.expand
    if not text.strip():
        raise InputError(
            "the query text is empty", hint='say what the agent is about to do, e.g. expengine query "book a flight"'
        )
    filters = make_filters(args)
    fused, vector = retrieve(store, text, lambda: embed_query(store, text), filters)
    fused.update(project_units(store, text, filters))
    top = top_with_unit_slot(store, rank(store, fused, filters), vector, k)
    if expand is None or expand:
        attach_evidence(store, top, vector)
    else:
        for hit in top:
            hit.expanded = []
    query_cfg = store.config.query
    prompt, kept = render_prompt(
        top, budget=budget, evidence_floor=query_cfg.evidence_floor, note_evidence_floor=query_cfg.note_evidence_floor
    )
    if args.touch and kept:
        reinforce(store, kept)
    return QueryResult(
        query=text,
        hits=[_rounded(h) for h in kept],
        prompt=prompt,
        candidates=len(fused),
        budget=budget,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
    )
