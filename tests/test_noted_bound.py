"""The bound that skips the search of sleeping turns (`retrieve.noted_could_reach`): a query below the
relevance floor searched the dormant memories a second time to see whether a turn a note stands for
comes closer; the bound answers "none can" from the noted turns' vectors in memory, and the answers
stay what they were without it. Real DuckDB and LanceDB in a temp folder."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest
from test_notes import TURNS  # noqa: E402

from expengine.query import retrieve, search

QUESTIONS = [
    "I went to a support group yesterday and it was so powerful",  # worded like a sleeping turn
    "Where does Caroline live now?",
    "What class did Melanie sign up for?",
    "How do I reset a router password?",
    "book a flight to Boston next week",
    "What did Melanie paint last year?",
    "swimming with the kids",
    "quarterly tax filing deadline",
]


@pytest.fixture(scope="module")
def compacted(tmp_path_factory, embedder):
    from expengine import Engine

    folder = tmp_path_factory.mktemp("noted-bound")
    log = folder / "conv.jsonl"
    log.write_text("\n".join(json.dumps(t) for t in TURNS) + "\n", encoding="utf-8")
    engine = Engine(store=folder / "store", embedder=embedder, overrides={"llm.mode": "template"})
    engine.ingest([str(log)])
    engine.compact(now=dt.datetime(2023, 5, 26))
    yield engine
    engine.close()


def _answers(engine) -> list[tuple]:
    out = []
    for q in QUESTIONS:
        r = engine.query(q, k=5, touch=False)
        out.append((r.relevant, r.best_similarity, [(h.id, h.score) for h in r.hits], r.prompt))
    return out


def test_the_bound_skips_searches_and_leaves_every_answer_unchanged(compacted, monkeypatch):
    engine = compacted
    assert engine.units(kind="note"), "the fixture's turns must give notes, or nothing is tested"
    searches = []
    real = retrieve.noted_best

    def counted(*args, **kwargs):
        searches.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(search, "noted_best", counted)
    # a floor every question is below, so each one asks about the sleeping turns
    monkeypatch.setattr(engine.store.config.query, "min_similarity", {"*": 0.99})
    with_bound = _answers(engine)
    bounded = len(searches)
    searches.clear()
    monkeypatch.setattr(search, "noted_could_reach", lambda *args: True)
    without = _answers(engine)
    assert with_bound == without
    assert len(searches) == len(QUESTIONS)  # without the bound, every question searched
    assert bounded < len(QUESTIONS)  # the bound skipped some


def test_the_bound_keeps_the_search_where_a_noted_turn_is_close(compacted):
    """A question in a sleeping turn's own words is within reach: the search runs (and finds the turn)."""
    engine = compacted
    store = engine.store
    units = store.unit_rows.current(store.con, store.dir, in_transaction=store.in_transaction)
    assert units is not None
    turn = "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."
    vector = store.embedder.encode([turn])[0]
    assert retrieve.noted_could_reach(store, vector, 0.9, units)
    far = store.embedder.encode(["quarterly tax filing deadline for a small business"])[0]
    best_far = max(float(np.dot(v, far)) for v in retrieve._noted_vectors(store, units))
    assert not retrieve.noted_could_reach(store, far, best_far + 2 * retrieve.NOTED_MARGIN, units)
    assert retrieve.noted_could_reach(store, far, -0.5, units)  # below 0, "none found" (0.0) would count
    assert retrieve.noted_could_reach(store, far, best_far, None)  # without the memo: always search
