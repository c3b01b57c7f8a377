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
from .when import Period, within

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
    store: "Store",
    *,
    similarity: float,
    weight: float,
    utility: float,
    recency_value: float,
    named_time: bool = False,
) -> tuple[float, ScoreParts]:
    q = store.config.query
    parts = ScoreParts(
        similarity=similarity,
        weight=max(weight, 0.0) / (1.0 + max(weight, 0.0)),
        recency=recency_value,
        utility=math.tanh(utility),
        named_time=float(named_time),
    )
    score = (
        q.alpha * parts.similarity
        + q.beta * parts.weight
        + q.gamma * parts.recency
        + q.utility_weight * parts.utility
        + q.named_time_weight * parts.named_time
    )
    return score, parts


def _newest(ts: dict[str, dt.datetime | None], ids: list[str]) -> dt.datetime | None:
    return max((ts[i] for i in ids if ts.get(i) is not None), default=None)  # type: ignore[type-var]


def newest_source_ts(store: "Store", sources: dict[str, list[str]]) -> dict[str, dt.datetime | None]:
    """Unit id → ts of its newest source record (any state): when the knowledge it carries is from.
    `sources`: unit id → its source ids."""
    wanted = list(dict.fromkeys(i for ids in sources.values() for i in ids))
    if not wanted:
        return {}
    where, params = in_ids("id", wanted)
    ts = dict(store.con.execute(f"SELECT id, ts FROM records WHERE {where}", params).fetchall())
    return {uid: _newest(ts, ids) for uid, ids in sources.items()}


def units_newest_source_ts(store: "Store", units: Rows | None, live_units: list[Any]) -> dict[str, dt.datetime | None]:
    """`newest_source_ts` of `live_units`: from the unit memo's rows (`units`), computed once for every unit
    of that version (a query's ~100 unit candidates have up to ~3,600 sources at 100k memories, whose rows
    were most of its scoring), else read for these."""
    if units is None:
        return newest_source_ts(store, {u.id: u.sources for u in live_units})
    return units.derived(
        "newest source ts", lambda rows: newest_source_ts(store, {u.id: u.sources for u in rows.values()})
    )


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
    periods: list[Period] | None = None,
) -> list[Hit]:
    """Join DuckDB (the truth: state, weight, utility, provenance) and score every candidate. Texts
    are not read there (projecting `text` doubled the scan at 100k memories): a memory candidate's is
    in `texts` (the search returned it) or read by id. A unit's recency takes its newest source's ts
    (`units_newest_source_ts`); its sources as evidence are attached to the hits shown only
    (`attach_sources`). Equal scores (the same fused rank
    from different lists, and recency ~0 for old records) go to units first, then to the closer
    vector (`cosines`; a full-text-only candidate has none), then by id: on the mixed demo store the
    reply a question is about (2nd by vector) lost its top-3 place by id to one of four copies of a
    line ranked 2nd by full text. `units`: the unit memo's rows (`unit_rows`); `now`: the moment recency
    is measured from; `periods`: the times the query names (`when.named_periods`), whose hits (a memory by
    its ts, a unit by the day it is as of) gain the `named_time` part."""
    base = store.config.query.recency_base
    periods = periods or []
    live = ("active", "dormant") if filters.include_dormant else ("active",)
    texts = dict(texts or {})
    found_units = unit_rows(store, units, [i for t, i in fused if t == "unit"])
    # what the asking user may see (the prefilters already kept to it; a row read any other way is checked)
    live_units = [
        u for u in found_units if u.status in LIVE_UNIT_STATUSES and visible_unit(u.user, u.quotes, filters.user)
    ]
    records = record_rows(store, [i for t, i in fused if t == "memory"])
    texts.update(record_texts(store, [i for t, i in fused if t == "memory" and i not in texts and i in records]))
    hits = []
    for r in records.values():
        if r.state not in live or not visible(r.user, filters.user):
            continue
        score, parts = score_parts(
            store,
            similarity=fused[("memory", r.id)],
            weight=r.weight,
            utility=r.utility,
            recency_value=recency(base, now, r.ts, r.last_access),
            named_time=within(r.ts and r.ts.date(), periods),
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
    newest = units_newest_source_ts(store, units, live_units)
    for u in live_units:
        score, parts = score_parts(
            store,
            similarity=fused[("unit", u.id)],
            weight=u.weight,
            utility=u.utility,
            recency_value=recency(base, now, newest.get(u.id), u.as_of, u.last_used),
            named_time=within(u.as_of and u.as_of.date(), periods),
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
            )
        )
    cosine = cosines or {}
    # scores equal to the six places a hit shows (`search._rounded`) are a tie
    hits.sort(key=lambda h: (-round(h.score, 6), h.type != "unit", -cosine.get((h.type, h.id), -1.0), h.id))
    return hits


def warm_scoring(store: "Store") -> None:
    """Derive from the unit memo now what scoring derives from it (`units_newest_source_ts`: ~0.1 s at 100k
    memories), so a long-lived process's first query does not."""
    units = store.unit_rows.current(store.con, store.dir, in_transaction=store.in_transaction)
    if units is not None:
        units_newest_source_ts(store, units, [])


def record_rows(store: "Store", ids: list[str]) -> dict[str, Any]:
    """id → the records' memo row of each of `ids` it holds (any state), or DuckDB's when it cannot answer now."""
    found = store.rows.lookup(store.con, store.dir, ids, in_transaction=store.in_transaction)
    return {r.id: r for r in (store.rows.read(store.con, ids) if found is None else found)}


def attach_sources(store: "Store", hits: list[Hit], texts: dict[str, str], filters: Filters) -> None:
    """Each unit hit's sources (any state, archived included) that the asking user may see, in source
    order, as its `expanded` (for `expand.attach_evidence`), with their texts where `texts` holds them
    (`Evidence.text`). A source of two hits is one `Evidence`. For the hits shown only: every unit
    candidate's sources were ~3,600 rows read a query at 100k memories."""
    unit_hits = [h for h in hits if h.type == "unit"]
    records = record_rows(store, list(dict.fromkeys(i for h in unit_hits for i in h.source_ids)))
    evidence = {
        i: Evidence(id=i, text=texts.get(i, ""), state=r.state, similarity=0.0)
        for i, r in records.items()
        if visible(r.user, filters.user)
    }
    for hit in unit_hits:
        hit.expanded = [evidence[i] for i in hit.source_ids if i in evidence]


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
