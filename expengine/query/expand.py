"""Evidence under unit hits: their source records ordered by similarity to the query, with the
vectors that takes (LanceDB for indexed records, the embedding cache for archived ones)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..store.db import in_ids, json_ids
from ..store.index import MEMORIES
from ..store.vocabulary import INDEXED_RECORDS_SQL, LIVE_SQL, UNIT_EMBEDDED_TEXT
from .hits import Evidence, Hit
from .score import record_texts

if TYPE_CHECKING:
    from ..store.store import Store


def cached_vectors(store: "Store") -> int:
    """Read into memory the cached vectors queries compare but LanceDB does not hold (`cached_texts`). Each
    first read would cost a query 45-65 ms at 100k memories (see `VectorMemo`); a server does them all at
    start. How many were read."""
    return store.embeddings.preload(cached_texts(store))


def cached_texts(store: "Store") -> list[str]:
    """The texts whose vectors queries read from the embedding cache, as LanceDB does not hold them: those of
    active rules whose LanceDB vector embeds their condition (the rule slot), and the sources of live units
    it does not hold (archived, or waiting out the observation window; expansion)."""
    rules = store.con.execute(
        f"SELECT text FROM units WHERE {LIVE_SQL} AND kind = 'rule' AND ({UNIT_EMBEDDED_TEXT}) <> text"
    ).fetchall()
    sources = {
        i
        for (ids,) in store.con.execute(f"SELECT source_ids FROM units WHERE {LIVE_SQL}").fetchall()
        for i in json_ids(ids)
    }
    where, params = in_ids("id", sorted(sources))
    archived = store.con.execute(
        f"SELECT text FROM records WHERE NOT {INDEXED_RECORDS_SQL} AND {where}", params
    ).fetchall()
    return [t for (t,) in rules + archived]


def text_vectors(store: "Store", evidence: list[Evidence]) -> dict[str, np.ndarray]:
    """Each distinct source text's vector, with the texts `rank` left unread filled in: LanceDB holds
    both for active and dormant records (one lookup by id); DuckDB the text and the embedding cache the
    vector of archived ones (reading vectors from DuckDB costs ~1 ms a row)."""
    texts: dict[str, str] = {}
    indexed = store.index.vectors(MEMORIES, [e.id for e in evidence if e.state in ("active", "dormant")], texts=texts)
    unread = [e for e in evidence if not e.text]
    texts.update(record_texts(store, [e.id for e in unread if e.id not in texts]))
    for e in unread:
        e.text = texts.get(e.id, "")
    vectors = {e.text: indexed[e.id] for e in evidence if e.id in indexed}
    rest = list(dict.fromkeys(e.text for e in evidence if e.text not in vectors))
    if rest:
        vectors.update(zip(rest, store.embeddings.encode(rest)))
    return vectors


def attach_evidence(store: "Store", hits: list[Hit], vector: np.ndarray) -> dict[str, np.ndarray]:
    """Order each unit hit's sources (attached by `score.attach_sources`) by similarity to the query,
    most similar first (one similarity per distinct text, so equal texts keep their source order); the
    renderer picks the lines worth showing. Returns the sources' vectors by text (for its check of repeats)."""
    evidence = [e for h in hits if h.type == "unit" for e in h.expanded]
    if not evidence:
        return {}
    vectors = text_vectors(store, evidence)
    similarity = dict(zip(vectors, np.stack(list(vectors.values())) @ vector))
    for ev in evidence:
        ev.similarity = float(similarity[ev.text])
    for hit in hits:
        if hit.type == "unit":
            hit.expanded = sorted(hit.expanded, key=lambda e: -e.similarity)
    return vectors
