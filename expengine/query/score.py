"""Scoring the candidates against DuckDB (the truth: state, weight, utility, provenance), and the
rule slot (see search.py for the formula and the slot)."""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..store.db import in_ids, json_ids
from ..store.index import UNITS
from ..store.row_memo import Rows
from ..store.users import visible, visible_unit
from ..store.vocabulary import LIVE_UNIT_STATUSES
from .filters import Filters
from .hits import Evidence, Hit, ScoreParts

if TYPE_CHECKING:
    from ..store.store import Store


def unit_rows(store: "Store", units: Rows | None, ids: list[str]) -> list[Any]:
    """The `unit_memo` rows of `ids` (any status): from `units` (the memo's rows this query, when it
    could answer), else from DuckDB."""
    if units is None:
        return store.unit_rows.read(store.con, ids)
    return [units[i] for i in ids if i in units]


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
    where, params = in_ids("id", list(wanted))
    ts = dict(store.con.execute(f"SELECT id, ts FROM records WHERE {where}", params).fetchall())
    return {uid: _newest(ts, ids) for uid, ids in sources.items()}


def record_texts(store: "Store", ids: list[str]) -> dict[str, str]:
    """id → text from DuckDB, for the few records whose text did not come with a LanceDB read."""
    if not ids:
        return {}
    where, params = in_ids("id", ids)
    return dict(store.con.execute(f"SELECT id, text FROM records WHERE {where}", params).fetchall())


def rank(
    store: "Store",
    fused: dict[tuple[str, str], float],
    filters: Filters,
    texts: dict[str, str] | None = None,
    cosines: dict[tuple[str, str], float] | None = None,
    units: Rows | None = None,
    *,
    now: dt.datetime,
) -> list[Hit]:
    """Join DuckDB (the truth: state, weight, utility, provenance) and score every candidate. One scan
    of `records` fetches the memory candidates and the unit candidates' sources together: each unit
    hit gets its sources (any state, archived included) in `expanded`, for `attach_evidence`. Texts
    are not read there (projecting `text` doubled the scan at 100k memories): a memory candidate's is
    in `texts` (the search returned it) or read by id; a source's (`Evidence.text`) is what `texts`
    holds, the rest filled by `attach_evidence` for the hits shown. Equal scores (the same fused rank
    from different lists, and recency ~0 for old records) go to units first, then to the closer
    vector (`cosines`; a full-text-only candidate has none), then by id: on the mixed demo store the
    reply a question is about (2nd by vector) lost its top-3 place by id to one of four copies of a
    line ranked 2nd by full text. `units`: the unit memo's rows (`unit_rows`); `now`: the moment recency
    is measured from."""
    base = store.config.query.recency_base
    live = ("active", "dormant") if filters.include_dormant else ("active",)
    texts = dict(texts or {})
    found_units = unit_rows(store, units, [i for t, i in fused if t == "unit"])
    # what the asking user may see (the prefilters already kept to it; a row read any other way is checked)
    live_units = [
        u for u in found_units if u.status in LIVE_UNIT_STATUSES and visible_unit(u.user, u.quotes, filters.user)
    ]
    sources = {u.id: u.sources for u in live_units}
    wanted = dict.fromkeys([*(i for t, i in fused if t == "memory"), *(i for ids in sources.values() for i in ids)])
    # in memory while the files are unchanged
    found = store.rows.lookup(store.con, store.dir, list(wanted), in_transaction=store.in_transaction)
    if found is None:
        found = store.rows.read(store.con, list(wanted))
    records = {r.id: r for r in found}
    texts.update(record_texts(store, [i for t, i in fused if t == "memory" and i not in texts and i in records]))
    evidence = {i: Evidence(id=i, text=texts.get(i, ""), state=r.state, similarity=0.0) for i, r in records.items()}
    hits = []
    for r in records.values():
        if ("memory", r.id) not in fused or r.state not in live or not visible(r.user, filters.user):
            continue
        score, parts = score_parts(
            store,
            similarity=fused[("memory", r.id)],
            weight=r.weight,
            utility=r.utility,
            recency_value=recency(base, now, r.ts, r.last_access),
        )
        hits.append(
            Hit(
                id=r.id,
                type="memory",
                text=texts[r.id],
                score=score,
                parts=parts,
                source_ids=memory_source_ids(r.id, r.merged_ids),
                kind=r.kind,
                state=r.state,
                agent=r.agent,
                category=r.category,
                ts=r.ts,
            )
        )
    source_ts = {i: r.ts for i, r in records.items()}
    for u in live_units:
        score, parts = score_parts(
            store,
            similarity=fused[("unit", u.id)],
            weight=u.weight,
            utility=u.utility,
            recency_value=recency(base, now, _newest(source_ts, u.sources), u.as_of, u.last_used),
        )
        hits.append(
            Hit(
                id=u.id,
                type="unit",
                text=u.text,
                score=score,
                parts=parts,
                source_ids=list(u.sources),
                kind=u.kind,
                state=u.status,
                agent=u.agent,
                category=u.category,
                ts=u.as_of if u.kind == "note" else u.updated,  # a note shows the day it is about
                expanded=[evidence[i] for i in u.sources if i in evidence and visible(records[i].user, filters.user)],
            )
        )
    cosine = cosines or {}
    # scores equal to the six places a hit shows (`search._rounded`) are a tie
    hits.sort(key=lambda h: (-round(h.score, 6), h.type != "unit", -cosine.get((h.type, h.id), -1.0), h.id))
    return hits


# Rules read from the embedding cache at a time when looking for the rule slot, best-scored first:
# the first batch usually holds one above the floor, and each is ~1 ms of DuckDB.
_SLOT_BATCH = 4


def top_with_unit_slot(
    store: "Store", ranked: list[Hit], vector: np.ndarray, k: int, units: Rows | None = None
) -> list[Hit]:
    """The best `k`; when no rule is among them, the last slot goes to the best-scored rule whose
    cosine similarity to the query is at least `query.unit_slot_floor` (if there is one). A rule's
    text vector is its LanceDB vector when that embeds its text (held in memory, `Index.held`, or one
    lookup for all), else it comes from the embedding cache. `units`: as for `rank`."""

    def is_rule(hit: Hit) -> bool:
        return hit.type == "unit" and hit.kind == "rule"

    top = ranked[:k]
    in_top = next((h for h in top if is_rule(h)), None)
    if in_top is not None:
        in_top.reserved = True
        return top
    rules = [h for h in ranked[k:] if is_rule(h)]
    if not rules:
        return top
    ids = [h.id for h in rules]
    keyed = [u.id for u in unit_rows(store, units, ids) if u.text_keyed]
    with store.index.files.reading():
        held = store.index.held(UNITS)  # the units' vectors in memory, else a LanceDB read by id
    indexed = held.by_id(keyed) if held is not None else store.index.vectors(UNITS, keyed)
    floor = store.config.query.unit_slot_floor
    known = [h for h in rules if h.id in indexed]
    cosines = dict(zip((h.id for h in known), np.stack([indexed[h.id] for h in known]) @ vector)) if known else {}
    # the best-scored rule above the floor among those with a LanceDB vector; only rules scored above it
    # are read from the cache, a few at a time, best first
    cut = next((n for n, h in enumerate(rules) if cosines.get(h.id, -1.0) >= floor), len(rules))
    unknown = [h for h in rules[:cut] if h.id not in indexed]
    for start in range(0, len(unknown), _SLOT_BATCH):
        batch = unknown[start : start + _SLOT_BATCH]
        best = next(
            (h for h, c in zip(batch, store.embeddings.encode([h.text for h in batch]) @ vector) if c >= floor), None
        )
        if best is not None:
            return _slotted(top, best, k)
    return top if cut == len(rules) else _slotted(top, rules[cut], k)


def _slotted(top: list[Hit], rule: Hit, k: int) -> list[Hit]:
    rule.reserved = True
    return [*top[: k - 1], rule]
