"""Lexical evidence that a store holds what a query asks about, beside the best cosine.

The multilingual encoder's cosines do not tell a stranger's question from the user's own (on
MemoryBank a question borrowed from another user is as close to the store as an own one), yet the
words tell: what an own question is about is written in the store, while a stranger's topic, place or
title is not. The evidence is the best share of the query's grams that one of its nearest candidates
holds, each gram weighted by its rarity in the store (idf over the active records and units), so a
gram every record has ("我们", "什么") counts little and one no record has counts fully against it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..store.db import in_ids
from ..store.users import visible_sql
from ..store.vocabulary import LIVE_SQL
from ..textutil import HAN, grams

if TYPE_CHECKING:
    from ..store.store import Store


def _texts(user: str | None) -> str:
    """What the idf is counted over: the live rows a query for `user` may be shown (one user's store
    within a store of many, so a gram every other user says still counts as rare for this one)."""
    mine = "" if user is None else f" AND {visible_sql(user)}"
    return (
        f"SELECT text FROM records WHERE state = 'active'{mine} UNION ALL SELECT text FROM units WHERE {LIVE_SQL}{mine}"
    )


def lexical_evidence(store: "Store", text: str, nearest: list[tuple[str, str]], user: str | None = None) -> float:
    """0..1: the idf-weighted share of the query's grams that its best `nearest` candidate ((type, id)
    pairs) holds; 1.0 (nothing to judge it by) unless the query and one of those candidates are written
    in Han characters: across languages the model, not the words, says what matches."""
    wanted = sorted(grams(text))
    if not wanted or not HAN.search(text):
        return 1.0
    counts = ", ".join("count_if(contains(lower(text), ?))" for _ in wanted)
    total, *frequency = store.con.execute(f"SELECT count(*), {counts} FROM ({_texts(user)})", wanted).fetchone()  # type: ignore[misc]
    idf = {g: math.log((total + 1) / (df + 0.5)) for g, df in zip(wanted, frequency)}
    whole = sum(idf.values())
    if whole <= 0:
        return 1.0
    ids = {t: [i for kind, i in nearest if kind == t] for t in ("memory", "unit")}
    memories, memory_ids = in_ids("id", ids["memory"])
    unit_rows, unit_ids = in_ids("id", ids["unit"])
    candidates = store.con.execute(
        f"SELECT text FROM records WHERE {memories} UNION ALL SELECT text FROM units WHERE {unit_rows}",
        [*memory_ids, *unit_ids],
    ).fetchall()
    if not any(HAN.search(t or "") for (t,) in candidates):
        return 1.0
    return max((sum(idf[g] for g in grams(t) & idf.keys()) / whole for (t,) in candidates), default=0.0)
