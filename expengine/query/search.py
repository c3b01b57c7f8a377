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

Filters: `kind` is a record kind (message, tool_call, …: memories only) or a unit kind (rule,
fact: units only); `outcome` and `goal` are memory attributes, so they exclude units; `since` /
`until` compare a memory's `ts` and a unit's `updated`.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..ingest.events import KINDS as RECORD_KINDS
from ..ingest.events import OUTCOMES, EventError, parse_ts
from ..store.db import json_ids, utcnow
from ..store.filters import lance_eq
from ..store.index import MEMORIES, UNITS
from ..store.reindex import UNIT_EMBEDDED_TEXT
from ..store.units import record_use

if TYPE_CHECKING:
    from ..store.store import Store

UNIT_KINDS = ("rule", "fact")
# With an IVF-PQ index, fetch this many times the candidates and re-rank them by exact cosine
# (PQ distances are coarse); without one the search is exact and it is not asked for.
VECTOR_REFINE_FACTOR = 4
_WORD = re.compile(r"\w+")


@dataclass
class ScoreParts:
    similarity: float
    weight: float
    recency: float
    utility: float


@dataclass
class Evidence:
    """A source record of a unit hit, shown under it: reachable even when dormant or archived.
    `quoted` means the unit's own line already carries its words, so it gets no line of its own."""

    id: str
    text: str
    state: str
    similarity: float
    quoted: bool = False


@dataclass
class Hit:
    id: str
    type: str  # "unit" | "memory"
    text: str
    score: float
    parts: ScoreParts
    source_ids: list[str]
    kind: str
    state: str
    agent: str
    category: str
    ts: dt.datetime | None
    expanded: list[Evidence] = field(default_factory=list)
    reserved: bool = False  # the rule slot (`top_with_unit_slot`): the prompt keeps room for it

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ts"] = self.ts.isoformat() if self.ts else None
        return data


@dataclass
class QueryResult:
    query: str
    hits: list[Hit]
    prompt: str
    candidates: int = 0
    budget: int | None = None
    took_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "hits": [h.to_dict() for h in self.hits],
            "prompt": self.prompt,
            "candidates": self.candidates,
            "budget": self.budget,
            "took_ms": self.took_ms,
        }


@dataclass
class Filters:
    agent: str | None = None
    category: str | None = None
    kind: str | None = None
    outcome: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    goal: str | None = None
    include_dormant: bool = False

    @property
    def search_memories(self) -> bool:
        return self.kind not in UNIT_KINDS

    @property
    def search_units(self) -> bool:
        return (self.kind is None or self.kind in UNIT_KINDS) and self.outcome is None and self.goal is None

    def memory_where(self) -> str:
        states = "('active', 'dormant')" if self.include_dormant else "('active')"
        return " AND ".join(
            [
                f"state IN {states}",
                *self._common("ts"),
                *_equals(kind=self.kind, outcome=self.outcome, goal_id=self.goal),
            ]
        )

    def unit_where(self) -> str:
        return " AND ".join(["status = 'active'", *self._common("ts"), *_equals(kind=self.kind)])

    def _common(self, ts_column: str) -> list[str]:
        clauses = _equals(agent=self.agent, category=self.category)
        if self.since:
            clauses.append(f"{ts_column} >= {_timestamp(self.since)}")
        if self.until:
            clauses.append(f"{ts_column} <= {_timestamp(self.until)}")
        return clauses


def _equals(**values: str | None) -> list[str]:
    return [lance_eq(column, value) for column, value in values.items() if value is not None]


def _timestamp(value: dt.datetime) -> str:
    return f"timestamp '{value.isoformat(sep=' ', timespec='microseconds')}'"


def as_time(value: dt.datetime | str | None, name: str) -> dt.datetime | None:
    """ISO-8601 (no zone means UTC) or a datetime, as naive UTC like everything in the store."""
    if value is None or isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value and value.tzinfo else value
    try:
        return parse_ts(value)
    except EventError as exc:
        raise InputError(f"--{name}: {exc}", hint="use ISO-8601, e.g. 2026-03-01 or 2026-03-01T09:15:00Z") from exc


def make_filters(
    *, agent=None, category=None, kind=None, outcome=None, since=None, until=None, goal=None, include_dormant=False
) -> Filters:
    if kind is not None and kind not in RECORD_KINDS + UNIT_KINDS:
        raise InputError(
            f"unknown kind {kind!r}", hint=f"use a record kind ({', '.join(RECORD_KINDS)}) or a unit kind (rule, fact)"
        )
    if outcome is not None and outcome not in OUTCOMES:
        raise InputError(f"unknown outcome {outcome!r}", hint=f"use one of {', '.join(OUTCOMES)}")
    return Filters(
        agent=agent,
        category=category,
        kind=kind,
        outcome=outcome,
        since=as_time(since, "since"),
        until=as_time(until, "until"),
        goal=goal,
        include_dormant=include_dormant,
    )


def fts_text(text: str) -> str:
    """Only the words: the FTS parser never sees quotes, operators or brackets from the caller."""
    return " ".join(_WORD.findall(text))


# --- retrieval ---------------------------------------------------------------------------------
def embed_query(store: "Store", text: str) -> np.ndarray:
    """The query vector, computed on one torch thread: as fast for one short text, and far steadier
    when other processes share the cores (measured on 2 busy cores: p95 ~30 ms vs ~800 ms)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return store.embedder.encode([text])[0]
    embedder = store.embedder
    embedder.dim  # load the model (a lazy one) with the default thread count
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return embedder.encode([text])[0]
    finally:
        torch.set_num_threads(previous)


def _vector_search(store: "Store", name: str, vector: np.ndarray, where: str, limit: int) -> list[tuple[str, float]]:
    table = store.index.table(name)
    if table is None:
        return []
    search = table.search(vector, query_type="vector", vector_column_name="vector").distance_type("cosine")
    if store.index.has_vector_index(name):  # an exact search has nothing to refine (and pays ~3 ms for it)
        search = search.refine_factor(VECTOR_REFINE_FACTOR)
    rows = search.where(where, prefilter=True).limit(limit).select(["id", "_distance"]).to_arrow()
    return list(zip(rows.column("id").to_pylist(), rows.column("_distance").to_pylist()))


def _text_search(table: Any, words: str, where: str, limit: int) -> list[tuple[str, float]]:
    """Full-text candidates from a table with a full-text index (`Index.ensure_text_index`)."""
    rows = table.search(words, query_type="fts").where(where, prefilter=True).limit(limit).select(["id", "_score"])
    found = rows.to_arrow()
    return list(zip(found.column("id").to_pylist(), found.column("_score").to_pylist()))


def _fuse(lists: list[list[tuple[str, str]]], rrf_k: int) -> dict[tuple[str, str], float]:
    """Reciprocal rank fusion, normalised so 1.0 = first in every list that ran."""
    fused: dict[tuple[str, str], float] = {}
    for ranked in lists:
        for rank, key in enumerate(ranked, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (rrf_k + rank)
    best = len(lists) / (rrf_k + 1)
    return {key: value / best for key, value in fused.items()}


_SEARCH_POOL: Any = None


def _search_pool() -> Any:
    """Threads for the LanceDB searches: they run in Rust without the GIL, so the four searches
    (vector and full text, memories and units) overlap instead of queueing."""
    global _SEARCH_POOL
    if _SEARCH_POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _SEARCH_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="expengine-search")
    return _SEARCH_POOL


def retrieve(
    store: "Store", text: str, vector: Any, filters: Filters
) -> tuple[dict[tuple[str, str], float], np.ndarray]:
    """(type, id) → similarity in 0..1, from vector and full-text search over both tables; and the
    query vector. `vector` is the vector or a callable that computes it: the full-text searches start
    first, so they run while the query is being embedded."""
    limit = store.config.query.candidates
    tables = [
        (t, name, where)
        for t, name, where, wanted in (
            ("memory", MEMORIES, filters.memory_where(), filters.search_memories),
            ("unit", UNITS, filters.unit_where(), filters.search_units),
        )
        if wanted
    ]
    pool = _search_pool()
    store.index.db  # connect once, before the threads share it
    words = fts_text(text)
    # indexes are built before the threads start, so a search never writes
    searchable = [(t, name, where) for t, name, where in tables if words and store.index.ensure_text_index(name)]
    text_jobs = [
        (t, pool.submit(_text_search, store.index.table(name), words, where, limit)) for t, name, where in searchable
    ]
    vector = vector() if callable(vector) else vector
    vector_jobs = [(t, pool.submit(_vector_search, store, name, vector, where, limit)) for t, name, where in tables]
    # Each table's candidates stay (no cut after merging): units ranked below fifty close memories are
    # still scored, so the rule slot (`top_with_unit_slot`) can find them.
    vector_hits = [(d, (t, i)) for t, job in vector_jobs for i, d in job.result()]
    lists = [[key for _, key in sorted(vector_hits, key=lambda x: x[0])]]
    if words:
        text_hits = [(s, (t, i)) for t, job in text_jobs for i, s in job.result()]
        lists.append([key for _, key in sorted(text_hits, key=lambda x: -x[0])])
    return _fuse(lists, store.config.query.rrf_k), vector


# --- scoring -----------------------------------------------------------------------------------
_MEMORY_COLUMNS = (
    "id",
    "kind",
    "agent",
    "category",
    "state",
    "ts",
    "last_access",
    "weight",
    "utility",
    "merged_ids",
    "text",
)
_UNIT_COLUMNS = (
    "id",
    "kind",
    "agent",
    "category",
    "status",
    "updated",
    "as_of",
    "last_used",
    "weight",
    "utility",
    "source_ids",
    "text",
)


def _lookup(store: "Store", table: str, columns: tuple[str, ...], ids: list[str], live: str) -> list[dict[str, Any]]:
    if not ids:
        return []
    rows = store.con.execute(
        f"SELECT {', '.join(columns)} FROM {table} WHERE id IN (SELECT unnest(?)) AND {live}", [ids]
    ).fetchall()
    return [dict(zip(columns, r)) for r in rows]


def memory_source_ids(record_id: str, merged_ids: str | None) -> list[str]:
    """A memory stands for itself and, when it is a merged survivor, for the ids merged into it."""
    return list(dict.fromkeys([record_id, *json_ids(merged_ids)]))


def recency(base: float, now: dt.datetime, *moments: dt.datetime | None) -> float:
    latest = max((m for m in moments if m is not None), default=None)
    if latest is None:
        return 0.0
    hours = max(0.0, (now - latest).total_seconds() / 3600.0)
    return float(base**hours)


def score_parts(
    store: "Store", *, similarity: float, weight: float, utility: float, recency_value: float
) -> tuple[float, ScoreParts]:
    q = store.config.query
    parts = ScoreParts(
        similarity=similarity,
        weight=max(weight, 0.0) / (1.0 + max(weight, 0.0)),
        recency=recency_value,
        utility=math.tanh(utility),
    )
    score = (
        q.alpha * parts.similarity + q.beta * parts.weight + q.gamma * parts.recency + q.utility_weight * parts.utility
    )
    return score, parts


def _newest(ts: dict[str, dt.datetime | None], ids: list[str]) -> dt.datetime | None:
    return max((ts[i] for i in ids if ts.get(i) is not None), default=None)  # type: ignore[type-var]


def newest_source_ts(store: "Store", units: list[dict[str, Any]]) -> dict[str, dt.datetime | None]:
    """Unit id → ts of its newest source record (any state): when the knowledge it carries is from."""
    sources = {u["id"]: json_ids(u["source_ids"]) for u in units}
    wanted = {i for ids in sources.values() for i in ids}
    if not wanted:
        return {}
    ts = dict(store.con.execute("SELECT id, ts FROM records WHERE id IN (SELECT unnest(?))", [list(wanted)]).fetchall())
    return {uid: _newest(ts, ids) for uid, ids in sources.items()}


def rank(store: "Store", fused: dict[tuple[str, str], float], filters: Filters) -> list[Hit]:
    """Join DuckDB (the truth: state, weight, utility, provenance) and score every candidate. One scan
    of `records` fetches the memory candidates and the unit candidates' sources together: each unit
    hit gets its sources (any state, archived included) in `expanded`, for `attach_evidence`."""
    now = utcnow()
    base = store.config.query.recency_base
    live = ("active", "dormant") if filters.include_dormant else ("active",)
    units = _lookup(store, "units", _UNIT_COLUMNS, [i for t, i in fused if t == "unit"], "status = 'active'")
    sources = {u["id"]: json_ids(u["source_ids"]) for u in units}
    wanted = dict.fromkeys([*(i for t, i in fused if t == "memory"), *(i for ids in sources.values() for i in ids)])
    records = {r["id"]: r for r in _lookup(store, "records", _MEMORY_COLUMNS, list(wanted), "TRUE")}
    evidence = {i: Evidence(id=i, text=r["text"], state=r["state"], similarity=0.0) for i, r in records.items()}
    hits = []
    for r in records.values():
        if ("memory", r["id"]) not in fused or r["state"] not in live:
            continue
        score, parts = score_parts(
            store,
            similarity=fused[("memory", r["id"])],
            weight=r["weight"],
            utility=r["utility"],
            recency_value=recency(base, now, r["ts"], r["last_access"]),
        )
        hits.append(
            Hit(
                id=r["id"],
                type="memory",
                text=r["text"],
                score=score,
                parts=parts,
                source_ids=memory_source_ids(r["id"], r["merged_ids"]),
                kind=r["kind"],
                state=r["state"],
                agent=r["agent"],
                category=r["category"],
                ts=r["ts"],
            )
        )
    source_ts = {i: r["ts"] for i, r in records.items()}
    for u in units:
        score, parts = score_parts(
            store,
            similarity=fused[("unit", u["id"])],
            weight=u["weight"],
            utility=u["utility"],
            recency_value=recency(base, now, _newest(source_ts, sources[u["id"]]), u["as_of"], u["last_used"]),
        )
        hits.append(
            Hit(
                id=u["id"],
                type="unit",
                text=u["text"],
                score=score,
                parts=parts,
                source_ids=sources[u["id"]],
                kind=u["kind"],
                state=u["status"],
                agent=u["agent"],
                category=u["category"],
                ts=u["updated"],
                expanded=[evidence[i] for i in sources[u["id"]] if i in evidence],
            )
        )
    hits.sort(key=lambda h: (-h.score, h.type != "unit", h.id))
    return hits


# Rules read from the embedding cache at a time when looking for the rule slot, best-scored first:
# the first batch usually holds one above the floor, and each is ~1 ms of DuckDB.
_SLOT_BATCH = 4


def top_with_unit_slot(store: "Store", ranked: list[Hit], vector: np.ndarray, k: int) -> list[Hit]:
    """The best `k`; when no rule is among them, the last slot goes to the best-scored rule whose
    cosine similarity to the query is at least `query.unit_slot_floor` (if there is one). A rule's
    text vector is its LanceDB vector when that embeds its text (one lookup for all), else it comes
    from the embedding cache."""

    def is_rule(hit: Hit) -> bool:
        return hit.type == "unit" and hit.kind == "rule"

    top = ranked[:k]
    in_top = next((h for h in top if is_rule(h)), None)
    if in_top is not None:
        in_top.reserved = True
        return top
    units = [h for h in ranked[k:] if is_rule(h)]
    if not units:
        return top
    ids = [h.id for h in units]
    text_keyed = store.con.execute(
        f"SELECT id FROM units WHERE id IN (SELECT unnest(?)) AND ({UNIT_EMBEDDED_TEXT}) = text", [ids]
    ).fetchall()
    indexed = store.index.vectors(UNITS, [i for (i,) in text_keyed])
    floor = store.config.query.unit_slot_floor
    known = [h for h in units if h.id in indexed]
    cosines = dict(zip((h.id for h in known), np.stack([indexed[h.id] for h in known]) @ vector)) if known else {}
    # the best-scored rule above the floor among those with a LanceDB vector; only rules scored above it
    # are read from the cache, a few at a time, best first
    cut = next((n for n, h in enumerate(units) if cosines.get(h.id, -1.0) >= floor), len(units))
    unknown = [h for h in units[:cut] if h.id not in indexed]
    for start in range(0, len(unknown), _SLOT_BATCH):
        batch = unknown[start : start + _SLOT_BATCH]
        best = next(
            (h for h, c in zip(batch, store.embeddings.encode([h.text for h in batch]) @ vector) if c >= floor), None
        )
        if best is not None:
            return _slotted(top, best, k)
    return top if cut == len(units) else _slotted(top, units[cut], k)


def _slotted(top: list[Hit], rule: Hit, k: int) -> list[Hit]:
    rule.reserved = True
    return [*top[: k - 1], rule]


# --- expansion and reinforcement ---------------------------------------------------------------
def warm(store: "Store") -> int:
    """Read into memory the cached vectors queries compare but LanceDB does not hold: the texts of
    active rules whose LanceDB vector embeds their condition (the rule slot), and the archived sources
    of active units (expansion). Each first read would cost a query 45-65 ms at 100k memories (see
    `VectorMemo`); a server does them all at start. How many were read."""
    rules = store.con.execute(
        f"SELECT text FROM units WHERE status = 'active' AND kind = 'rule' AND ({UNIT_EMBEDDED_TEXT}) <> text"
    ).fetchall()
    sources = {
        i
        for (ids,) in store.con.execute("SELECT source_ids FROM units WHERE status = 'active'").fetchall()
        for i in json_ids(ids)
    }
    archived = store.con.execute(
        "SELECT text FROM records WHERE state = 'archived' AND id IN (SELECT unnest(?))", [sorted(sources)]
    ).fetchall()
    return store.embeddings.preload([t for (t,) in rules + archived])


def text_vectors(store: "Store", evidence: list[Evidence]) -> dict[str, np.ndarray]:
    """Each distinct source text's vector: LanceDB holds those of active and dormant records (a lookup
    by id); the embedding cache those of archived ones (reading vectors from DuckDB costs ~1 ms a row)."""
    indexed = store.index.vectors(MEMORIES, [e.id for e in evidence if e.state in ("active", "dormant")])
    vectors = {e.text: indexed[e.id] for e in evidence if e.id in indexed}
    rest = list(dict.fromkeys(e.text for e in evidence if e.text not in vectors))
    if rest:
        vectors.update(zip(rest, store.embeddings.encode(rest)))
    return vectors


def attach_evidence(store: "Store", hits: list[Hit], vector: np.ndarray) -> None:
    """Order each unit hit's sources (attached by `rank`) by similarity to the query, most similar
    first (one similarity per distinct text, so equal texts keep their source order); the renderer
    picks the lines worth showing."""
    evidence = [e for h in hits if h.type == "unit" for e in h.expanded]
    if not evidence:
        return
    vectors = text_vectors(store, evidence)
    similarity = dict(zip(vectors, np.stack(list(vectors.values())) @ vector))
    for ev in evidence:
        ev.similarity = float(similarity[ev.text])
    for hit in hits:
        if hit.type == "unit":
            hit.expanded = sorted(hit.expanded, key=lambda e: -e.similarity)


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


def query(
    store: "Store",
    text: str,
    *,
    k: int = 5,
    touch: bool = True,
    budget: int | None = None,
    expand: bool | None = None,
    **filter_args: Any,
) -> QueryResult:
    from .render import render_prompt

    started = time.perf_counter()
    if not isinstance(text, str) or not text.strip():
        raise InputError(
            "the query text is empty", hint='say what the agent is about to do, e.g. expengine query "book a flight"'
        )
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}")
    if budget is not None and budget < 1:
        raise InputError(f"the token budget must be at least 1, got {budget}")
    filters = make_filters(**filter_args)
    fused, vector = retrieve(store, text, lambda: embed_query(store, text), filters)
    top = top_with_unit_slot(store, rank(store, fused, filters), vector, k)
    if expand is None or expand:
        attach_evidence(store, top, vector)
    else:
        for hit in top:
            hit.expanded = []
    prompt, kept = render_prompt(top, budget=budget, evidence_floor=store.config.query.evidence_floor)
    if touch and kept:
        reinforce(store, kept)
    return QueryResult(
        query=text,
        hits=[_rounded(h) for h in kept],
        prompt=prompt,
        candidates=len(fused),
        budget=budget,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
    )


# --- indexes -----------------------------------------------------------------------------------
def refresh_indexes(store: "Store") -> dict[str, dict[str, bool]]:
    """Compact the tables' fragments, rebuild the scalar and FTS indexes and, once a table has
    `query.index_above` rows, its IVF-PQ vector index (below that, exact search is fast enough). Compaction calls this
    after it changes tables."""
    report = {}
    for name in (MEMORIES, UNITS):
        store.index.compact_files(name)
        store.index.refresh_scalar_indexes(name)
        vector_index = store.index.ensure_vector_index(name, min_rows=store.config.query.index_above)
        store.index.refresh_text_index(name)
        report[name] = {"vector_index": vector_index, "text_index": store.index.count(name) > 0}
    return report
