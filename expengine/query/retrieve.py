"""Candidates from LanceDB: a vector search and a full-text search per table (`memories`, `units`),
run on threads, fused by reciprocal rank (see search.py for the formula)."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..store.embeddings import text_hash
from ..store.index import MEMORIES, UNITS
from ..store.lance_rows import float32_rows
from ..store.row_memo import Rows
from ..store.vocabulary import LIVE_SQL, LIVE_UNIT_STATUSES
from .filters import Filters

if TYPE_CHECKING:
    from ..store.store import Store


# the candidates closest by cosine that are read for lexical evidence (lexical.py)
NEAREST = 10
_WORD = re.compile(r"\w+")


def fts_text(text: str) -> str:
    """Only the words: the FTS parser never sees quotes, operators or brackets from the caller."""
    return " ".join(_WORD.findall(text))


# the memo's key for query texts' vectors, apart from the cache's (an archived memory's text maps to LanceDB's
# float16 vector there, and a query's fresh vector must not stand in for it)
QUERY_MEMO = "query:"


def embed_query(store: "Store", text: str) -> np.ndarray:
    """The query vector, kept in the store's memo so a process asked the same text again embeds nothing (an
    agent repeats its questions); in memory only, as writing it to the cache made DuckDB rewrite the
    cache's row group at the next checkpoint."""
    memo, key, digest = store.embeddings.memo, QUERY_MEMO + store.embeddings.name, text_hash(text)
    known = memo.get(key, [digest])
    if known:
        return known[digest]
    vector = _embed_one(store, text)
    memo.put(key, {digest: vector})
    return vector


def _embed_one(store: "Store", text: str) -> np.ndarray:
    """One text's vector, on one torch thread: as fast for one short text, and far steadier when other
    processes share the cores (measured on 2 busy cores: p95 ~30 ms vs ~800 ms)."""
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


# The columns a search returns beyond id and distance/score: a memory candidate's text comes with it, so
# the DuckDB join (`score.rank`) reads no text (at 100k memories projecting `text` doubled the join), and
# from the vector search its vector, which the refinement of IVF-PQ distances reads anyway (no CPU measured
# for it), so folding repeats (`repeats.hit_vectors`) reads LanceDB again only for full-text-only hits.
_WITH = {MEMORIES: ("text",), UNITS: ()}
_VECTOR_WITH = {MEMORIES: ("text", "vector"), UNITS: ()}


class Retrieved(NamedTuple):
    fused: dict[tuple[str, str], float]  # (type, id) → similarity in 0..1
    vector: np.ndarray
    best_cosine: float
    texts: dict[str, str]  # memory candidate id → its text, from the search results
    cosines: dict[tuple[str, str], float]  # (type, id) → cosine similarity, for the vector searches' rows
    vectors: dict[str, np.ndarray]  # memory candidate id → its stored vector, for the vector search's rows


def nearest(cosines: dict[tuple[str, str], float]) -> list[tuple[str, str]]:
    """The `NEAREST` vector candidates, closest first."""
    return sorted(cosines, key=lambda key: -cosines[key])[:NEAREST]


def _columns(rows: Any, first: str, extra: tuple[str, ...]) -> list[tuple]:
    return (
        list(zip(*(_values(rows.column(c)) for c in ("id", first, *extra))))
        if rows is not None and rows.num_rows
        else []
    )


def _values(column: Any) -> list[Any]:
    """A column's values; a vector column's as float32 rows, as `Index.vectors` reads them."""
    import pyarrow as pa

    return list(float32_rows(column)) if pa.types.is_fixed_size_list(column.type) else column.to_pylist()


def _vector_search(
    store: "Store", name: str, vector: np.ndarray, where: str, limit: int, extra: tuple[str, ...] = ()
) -> list[tuple]:
    """(id, cosine distance, *extra) of the nearest rows."""
    return _columns(store.index.nearest(name, vector, where, limit, extra), "_distance", extra)


def _text_search(
    store: "Store", name: str, words: str, where: str, limit: int, extra: tuple[str, ...] = ()
) -> list[tuple]:
    """(id, BM25 score, *extra) from a table with a full-text index (`Index.ensure_text_index`)."""
    return _columns(store.index.text_search(name, words, where, limit, extra), "_score", extra)


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


def _held_search(
    store: "Store", name: str, vector: np.ndarray, filters: Filters, limit: int, states: tuple[str, ...] = ()
) -> list[tuple] | None:
    """A table's vector search on its rows held in memory (exact, as LanceDB's search of a table without
    a vector index): the units' (`Index.held`), or the memories' in `states` or the filters' states
    (`Index.held_memories`, with `_VECTOR_WITH`'s text and vector); None when they are not held (an
    indexed units table, or memories above `query.held_memories_mb`)."""
    if name == UNITS:
        units = store.index.held(UNITS)
        return None if units is None else units.nearest(vector, filters.unit_mask(units.columns), limit)
    memories = store.index.held_memories()
    if memories is None:
        return None
    return list(memories.nearest(vector, states or filters.memory_states, filters.memory_mask, limit))


def _vector_job(
    store: "Store", pool: Any, name: str, vector: np.ndarray, where: str, limit: int, filters: Filters
) -> Any:
    """What gives a table's vector search rows: the held search, done now, or LanceDB's on a thread."""
    rows = _held_search(store, name, vector, filters, limit)
    if rows is not None:
        return lambda: rows
    return pool.submit(_vector_search, store, name, vector, where, limit, _VECTOR_WITH[name]).result


def _results(
    jobs: list[tuple[str, Any]], texts: dict[str, str], vectors: dict[str, np.ndarray]
) -> list[tuple[float, tuple[str, str]]]:
    """(distance or score, (type, id)) of each search's rows (a job is called for them); the texts and
    vectors that came with them go to `texts` and `vectors`."""
    found = []
    for t, job in jobs:
        for i, value, *rest in job():
            found.append((value, (t, i)))
            if rest:
                texts[i] = rest[0]
            if len(rest) > 1:
                vectors[i] = rest[1]
    return found


def retrieve(store: "Store", text: str, vector: Any, filters: Filters) -> Retrieved:
    """(type, id) → similarity in 0..1, from vector and full-text search over both tables; the query
    vector; the best cosine similarity of any candidate (what `query.min_similarity` judges: fused
    ranks say which is best, never whether anything is close); the memory candidates' texts; and the
    vector candidates' cosines (what breaks a tie of fused ranks, `score.rank`).
    `vector` is the vector or a callable that computes it: the full-text searches start first, so they
    run while the query is being embedded."""
    with store.index.files.reading():  # a cycle in the server's writer thread waits to delete old files
        return _retrieve(store, text, vector, filters)


def _retrieve(store: "Store", text: str, vector: Any, filters: Filters) -> Retrieved:
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
    for _, name, _ in tables:  # opened once, before the threads share them
        store.index.dataset(name)
    words = fts_text(text)
    # indexes are built before the threads start, so a search never writes
    searchable = [(t, name, where) for t, name, where in tables if words and store.index.ensure_text_index(name)]
    text_jobs = [
        (t, pool.submit(_text_search, store, name, words, where, limit, _WITH[name]).result)
        for t, name, where in searchable
    ]
    vector = vector() if callable(vector) else vector
    # a held table is searched here, while the full-text searches run; one not held on a thread (the
    # memories' first, so the units' held search runs meanwhile)
    vector_jobs = [(t, _vector_job(store, pool, name, vector, where, limit, filters)) for t, name, where in tables]
    # Each table's candidates stay (no cut after merging): units ranked below fifty close memories are
    # still scored, so the rule slot (`top_with_unit_slot`) can find them.
    texts: dict[str, str] = {}
    vectors: dict[str, np.ndarray] = {}
    vector_hits = _results(vector_jobs, texts, vectors)
    lists = [[key for _, key in sorted(vector_hits, key=lambda x: x[0])]]
    if words:
        lists.append([key for _, key in sorted(_results(text_jobs, texts, vectors), key=lambda x: -x[0])])
    best_cosine = 1.0 - min((d for d, _ in vector_hits), default=2.0)
    cosines = {key: 1.0 - d for d, key in vector_hits}
    return Retrieved(_fuse(lists, store.config.query.rrf_k), vector, best_cosine, texts, cosines, vectors)


# sleeping turns looked at when no candidate reaches `query.min_similarity` (`noted_best`)
NOTED_CANDIDATES = 5


def _noted(units: Rows) -> frozenset[str]:
    return frozenset(
        i for u in units.values() if u.kind == "note" and u.status in LIVE_UNIT_STATUSES for i in u.sources
    )


# what the bound (`noted_could_reach`) leaves for the stored numbers and the search's own arithmetic
NOTED_MARGIN = 0.01


def _noted_vectors(store: "Store", units: Rows) -> np.ndarray:
    """The stored vectors of the turns live notes stand for, unit length, one row each (any state: a
    superset of what `noted_best` searches), read once per version of the unit memo."""

    noted = units.derived("noted turns", _noted)  # not inside `read`: `derived` holds the memo's lock

    def read(_: Rows) -> np.ndarray:
        found = store.index.vectors(MEMORIES, sorted(noted))
        if not found:
            return np.zeros((0, 0), dtype=np.float32)
        matrix = np.stack(list(found.values()))
        return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)

    return units.derived("noted vectors", read)


def noted_could_reach(store: "Store", vector: np.ndarray, best: float, units: Rows | None) -> bool:
    """Whether `noted_best` could raise `best`: False when no noted turn at all (whatever its state or
    filters) comes within `NOTED_MARGIN` of it, so the search of the sleeping turns (an ANN search as
    costly as the query's own, at 100k memories) is skipped and the answer is the same. The bound is
    the exact cosine to every noted turn's stored vector, in memory; the search's cosines are at most
    that. Only with the unit memo (`units`) and a best at or above 0 (below, `noted_best`'s 0.0 for
    "none found" counts)."""
    if units is None or best < 0:
        return True
    vectors = _noted_vectors(store, units)
    if not len(vectors):
        return False
    query = np.asarray(vector, dtype=np.float32)
    query = query / max(float(np.linalg.norm(query)), 1e-12)
    # einsum, not `@`: a matrix-vector product on BLAS threads spins on busy cores (held_vectors.py)
    return float(np.einsum("ij,j->i", vectors, query).max()) >= best - NOTED_MARGIN


def noted_best(store: "Store", vector: np.ndarray, filters: Filters, units: Rows | None = None) -> float:
    """The best cosine similarity of a sleeping turn that a live note stands for (0 when none). A note
    rewrites its turn ("我喜欢爵士乐" → "用户喜欢爵士乐"), so a question worded like the turn can sit below
    the relevance floor against the note and above it against the turn: what the turn said still counts
    as stored. Asked only when the candidates stay below the floor. `units`: the unit memo's rows this
    query (`score.unit_rows`): a store without live notes is not searched."""
    if units is not None and not units.derived("noted turns", _noted):
        return 0.0
    with store.index.files.reading():
        found = _held_search(store, MEMORIES, vector, filters, NOTED_CANDIDATES, states=("dormant",))
    if found is None:
        found = _vector_search(store, MEMORIES, vector, filters.memory_where(("dormant",)), NOTED_CANDIDATES)
    if not found:
        return 0.0
    if units is None:
        notes = store.unit_rows.read_where(
            store.con,
            f"kind = 'note' AND {LIVE_SQL} AND list_has_any(CAST(from_json(source_ids, '[\"VARCHAR\"]') AS VARCHAR[]), ?)",
            [[i for i, *_ in found]],
        )
        noted = _noted(Rows((u.id, u) for u in notes))
    else:
        noted = units.derived("noted turns", _noted)
    return max((1.0 - d for i, d, *_ in found if i in noted), default=0.0)
