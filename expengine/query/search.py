"""Hybrid retrieval over knowledge units and memories, ranked by one transparent score.

How a query is answered:

1. The query text is embedded once (the model is loaded once per process).
2. Retrieval, per table (`memories`, `units`), with the filters as prefilters: a vector search
   (cosine) and a full-text search (LanceDB's own FTS index), each returning `config.query.candidates`
   rows. The vector search is exact, on the table's vectors held in memory (the units', and the
   memories' up to `query.held_memories_mb`), or LanceDB's (approximate, IVF-PQ, for a larger
   memories table). The vector lists of both tables are merged by cosine distance (same embedder, so
   comparable); the FTS lists by BM25 score.
3. Reciprocal rank fusion: `rrf = Σ 1 / (rrf_k + rank)` over the lists an item appears in
   (rank starts at 1). `similarity = rrf / (n_lists / (rrf_k + 1))`, where n_lists is the number
   of lists that ran (2, or 1 when the query has no searchable word): 1.0 means first in every
   list, 0.5 means first in one list only.
4. DuckDB (the source of truth) supplies the lifecycle columns, and each candidate is scored:

       score = alpha·similarity + beta·weight + gamma·recency + utility_weight·utility
               + named_time_weight·named_time

   weight  = W / (1 + W), W the stored weight (0.5 for a fresh memory, → 1 as it is reinforced);
   recency = recency_base ** hours from the latest of these to the query's `now` (default the wall
             clock): a memory's ts and last access; a unit's newest source ts, as_of and last use
             (not `updated`, which refinement rewrites);
   utility = tanh(U), U the stored utility (0 until feedback arrives; negative when harmful);
   named_time = 1 when the query names a day (a month, where it names no day) and the candidate is
             about it: a memory by its ts, a unit by its as_of (when.py); else 0.
5. The best `k` are kept (equal scores: units first, then the closer vector, then the id). When
   none of them is a rule, the last slot goes to the best-scored rule candidate whose cosine
   similarity to the query reaches `query.unit_slot_floor`: a rule (how to act) worded unlike the
   agent's task still reaches it, yet never displaces more than one hit.
   The token budget keeps room for that rule (or for the best rule already among the `k`), so long
   memories above it cannot push it out.
   Before that, hits that repeat a better one (near-duplicate vectors, or one text holding the other)
   are folded under it as one line, "said N times", and the next distinct hits take their slots
   (`repeats.py`).
6. They are rendered (`render.py`), cut at the token budget, and what the prompt shows is used
   (`record_shown`) unless `touch=False`: only those hits and the evidence lines under them gain
   δ_access (never the candidates below the cut), a dormant one wakes, and the query log records the
   ids for the caller's `session` and `goal_id`.

When no candidate's cosine similarity reaches `query.min_similarity` (its entry for the encoder that
ranked the query), and no sleeping turn that a live note stands for does either (`retrieve.noted_best`:
a note rewrites its turn), nothing is relevant: the answer has no hits and an empty prompt
(`relevant` false), nothing is reinforced, and the log records that the query showed nothing. Where
the encoder has a `query.min_lexical` (the multilingual one), a query whose best cosine is also at
most `query.lexical_max_similarity` is irrelevant when its nearest candidates hold too little of its
words (lexical.py: cosines alone do not tell a stranger's question from the user's own there, and a
paraphrase shares few words with the store, so only both signals low silence it).
Units-only queries (`kind` rule or fact) skip the floor, and so does a query that names a project the
store has rules for.

A query that names a project (`[django/django] …`) also gets that project's environment rules as
if they were first in every list, and no memory or rule of another project (projects.py).

The rooms: filters.py (the prefilters of 2), retrieve.py (1-3), projects.py, score.py (4-5), when.py (4), repeats.py, expand.py (the
evidence under unit hits), render.py (6), hits.py (the result types); this module runs them in
order (`query`) and records what was shown (`record_shown`).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

from ..clock import utcnow
from ..errors import InputError
from ..models.mixed import encoder_of
from ..operations import QueryArgs
from ..store import query_log
from ..store.db import in_ids
from ..store.index import UNITS
from ..store.row_memo import Rows
from ..store.state import set_state
from ..store.units import record_use
from .expand import attach_evidence, cached_vectors
from .filters import Filters, make_filters
from .hits import Hit, QueryResult, Repeat, ScoreParts
from .lexical import lexical_evidence
from .projects import other_projects_memories, project_units
from .render import render_prompt
from .repeats import fold_repeats, unit_length
from .retrieve import Retrieved, embed_query, nearest, noted_best, noted_could_reach, retrieve
from .score import attach_sources, rank, top_with_unit_slot, warm_scoring
from .when import named_periods

if TYPE_CHECKING:
    from ..store.store import Store


def warm(store: "Store") -> int:
    """Read into memory what queries read of the store: the records' and units' memos and what scoring
    derives from them, the units' vectors, the memories' (held from now on: `Index.held_memories`), and
    the cached vectors LanceDB does not hold (`expand.cached_vectors`). How many cached vectors were read."""
    if not store.in_transaction:
        store.rows.load(store.con, store.dir)
        store.unit_rows.load(store.con, store.dir)
        warm_scoring(store)
    with store.index.files.reading():
        store.index.held(UNITS)  # the units' vectors, searched in memory
        store.index.held_memories(hold=True)  # and the memories', where they fit `query.held_memories_mb`
    return cached_vectors(store)


def shown_ids(hits: list[Hit]) -> tuple[list[str], list[str]]:
    """(unit ids, memory ids) whose text the prompt holds: the hits and the evidence lines under them."""
    # a repeat is in the prompt as its line's count
    said: list[Hit | Repeat] = [*hits, *(r for h in hits for r in h.repeats)]
    unit_ids = list(dict.fromkeys(h.id for h in said if h.type == "unit"))
    memory_ids = [h.id for h in said if h.type == "memory"]
    memory_ids += [e.id for h in hits for e in h.expanded]
    return unit_ids, list(dict.fromkeys(memory_ids))


def record_shown(store: "Store", result: QueryResult, now: dt.datetime | None = None) -> None:
    """What the prompt showed was used: it gains δ_access and a fresh last access (what is used stays;
    a dormant memory or unit wakes, its history says a query showed it), and the query log records it,
    an answer that showed nothing too (outcome credit compares episodes shown a unit with those not).
    `now`: the query's clock (default: the wall clock)."""
    cfg, now = store.config.decay, now or utcnow()
    unit_ids, memory_ids = shown_ids(result.hits)
    with store.transaction():
        if memory_ids:
            shown, ids = in_ids("id", memory_ids)  # a filter on the scan, not a join over every record
            woken = [
                i
                for (i,) in store.con.execute(
                    f"SELECT id FROM records WHERE {shown} AND state = 'dormant'", ids
                ).fetchall()
            ]
            set_state(store, woken, "active", reason="shown by a query", now=now)
            store.con.execute(
                "UPDATE records SET weight = GREATEST(weight, ?) + ?, access_count = access_count + 1, "
                f"last_access = ? WHERE {shown} AND state <> 'archived'",
                [cfg.theta_dormant, cfg.delta_access, now, *ids],
            )
        record_use(store, unit_ids, delta=cfg.delta_access, now=now)
        query_log.record(
            store,
            at=now,
            query=result.query,
            session=result.session,
            goal_id=result.goal_id,
            unit_ids=unit_ids,
            memory_ids=memory_ids,
            user=result.user,
        )


def _rounded(hit: Hit) -> Hit:
    hit.score = round(hit.score, 6)
    hit.parts = ScoreParts(**{k: round(v, 6) for k, v in asdict(hit.parts).items()})
    for ev in hit.expanded:
        ev.similarity = round(ev.similarity, 4)
    return hit


def _shown(
    store: "Store", found: Retrieved, filters: Filters, args: QueryArgs, units: Rows | None, now: dt.datetime
) -> tuple[str, list[Hit]]:
    """The prompt and the hits it holds: the top k ranked, repeats folded (a rule kept a slot), with
    evidence lines unless `expand` is off."""
    vector = found.vector
    periods = named_periods(args.text) if store.config.query.named_time_weight else []
    ranked = rank(store, found.fused, filters, found.texts, found.cosines, units, now=now, periods=periods)
    ranked, vectors = fold_repeats(store, ranked, args.k, units, found.vectors)
    top = top_with_unit_slot(store, ranked, vector, args.k, units)
    if args.expand is None or args.expand:
        attach_sources(store, top, found.texts, filters)
        vectors.update((text, unit_length(v)) for text, v in attach_evidence(store, top, vector).items())
    cfg = store.config.query
    return render_prompt(
        top,
        budget=args.budget,
        evidence_floor=cfg.evidence_floor,
        note_evidence_floor=cfg.note_evidence_floor,
        vectors=vectors if cfg.repeat_similarity <= 1 else None,
        repeat_similarity=cfg.repeat_similarity,
        once=cfg.say_once,
        by_day=cfg.day_headings,
    )


def query(store: "Store", args: QueryArgs, now: dt.datetime | None = None) -> QueryResult:
    """Answer one query (its arguments checked by `QueryArgs`): retrieve, score, expand, render, and
    record what was shown unless `touch` is off. `now` (naive UTC, default the wall clock) is the moment
    recency is measured from and what was shown is stamped with: a replay on the clock its cycles ran on
    ranks the same whenever it runs."""
    started = time.perf_counter()
    now = now or utcnow()
    text, budget = args.text, args.budget
    if not text.strip():
        raise InputError(
            "the query text is empty", hint='say what the agent is about to do, e.g. expengine query "book a flight"'
        )
    if store.config.query.require_user and not args.user:
        raise InputError(
            "this store answers only queries for a user ([query] require_user = true)",
            hint='name the user served: --user U (Python: user=U, HTTP and MCP: "user")',
        )
    filters = make_filters(args)
    # the units' columns this query reads, in memory while the files are unchanged (read once: one version)
    units = store.unit_rows.current(store.con, store.dir, in_transaction=store.in_transaction)
    found = retrieve(store, text, lambda: embed_query(store, text), filters)
    fused, vector, best = found.fused, found.vector, found.best_cosine
    projected = project_units(store, text, filters, units, project=args.project)
    for other in [*projected.others, *other_projects_memories(store, fused, projected.only)]:
        fused.pop(other, None)
    fused.update(projected.units)
    # in a mixed store, the floors of the encoder that ranked this query (the half its script routes to)
    encoder = encoder_of(store.embeddings.name, text)
    floor, lexical_floor = store.config.query.similarity_floor(encoder), store.config.query.lexical_floor(encoder)
    # units-only queries skip the floor: an intent rule's vector is its condition, not its text (on
    # tau-bench the floor cost `--kind rule` queries 28 points of gold tools); so does a query naming a
    # project the store has rules for (a short task title is far from every record, yet about that project)
    judged = floor > 0 and filters.search_memories and not projected.units
    if judged and best < floor and noted_could_reach(store, vector, best, units):
        best = max(best, noted_best(store, vector, filters, units))
    # the words are read only where the cosine is low too: either signal alone silenced own questions
    words_judge = lexical_floor > 0 and best <= store.config.query.lexical_ceiling(encoder)
    lexical = lexical_evidence(store, text, nearest(found.cosines), filters.user) if words_judge else None
    relevant = not (judged and (best < floor or (lexical is not None and lexical < lexical_floor)))
    prompt, kept = _shown(store, found, filters, args, units, now) if relevant else ("", [])
    result = QueryResult(
        query=text,
        hits=[_rounded(h) for h in kept],
        prompt=prompt,
        candidates=len(fused),
        budget=budget,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
        relevant=relevant,
        best_similarity=round(best, 4) if fused else None,
        lexical_evidence=None if lexical is None else round(lexical, 4),
        session=args.session,
        goal_id=args.goal_id,
        user=args.user,
    )
    if args.touch:
        record_shown(store, result, now)
    return result
