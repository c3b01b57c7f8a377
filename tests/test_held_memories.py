"""The memories' vector search on their rows held in memory (`Index.held_memories`): LanceDB's exact hits
under every memory filter, the next search sees every write (reading only the fragments it has not held),
and a table over `query.held_memories_mb` is searched by LanceDB."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import numpy as np
import pytest

from expengine.query.filters import Filters
from expengine.query.retrieve import _held_search, noted_best
from expengine.store import held_vectors
from expengine.store.index import MEMORIES, Index
from expengine.store.lance_rows import memory_rows

DIM = 16
WHEN = dt.datetime(2026, 11, 1)


def rows(n: int, seed: int = 0, prefix: str = "m") -> tuple[list[dict], np.ndarray]:
    rng = np.random.default_rng(seed)
    records = [
        {
            "id": f"{prefix}{i:05d}",
            "agent": ["a", "b"][i % 2],
            "kind": ["message", "tool_call", "observation"][i % 3],
            "category": ["general", "booking", None][i % 3 - (i % 5 == 0)],
            "outcome": ["success", "failure", None][i % 3],
            "goal_id": f"g{i % 7}" if i % 4 else None,
            "ts": WHEN + dt.timedelta(hours=i),
            "state": ["active", "active", "dormant", "archived"][i % 4],
            "user": [None, "ann", "bob"][i % 3],
            "text": f"memory number {i}",
        }
        for i in range(n)
    ]
    return records, rng.normal(size=(n, DIM)).astype(np.float32)


FILTERS = [
    Filters(),
    Filters(include_dormant=True),
    Filters(agent="b"),
    Filters(user="ann", include_dormant=True),
    Filters(category="booking"),
    Filters(kind="tool_call", outcome="success"),
    Filters(goal="g3", include_dormant=True),
    Filters(since=WHEN + dt.timedelta(hours=100), until=WHEN + dt.timedelta(hours=500)),
]


@pytest.fixture
def index(tmp_path):
    index = Index(tmp_path / "lance", held_mb=1)
    records, vectors = rows(900)
    index.add(MEMORIES, memory_rows(records, vectors, DIM))
    assert index.held_memories() is None, "held only by a process that warmed up"
    assert index.held_memories(hold=True) is not None
    return index


def assert_lancedb_s_exact_hits(index: Index, seed: int, limit: int = 20) -> None:
    """The held search gives the ids, in order, and the distances of LanceDB's exact search, with the
    texts and stored vectors a LanceDB read gives."""
    store = SimpleNamespace(index=index)
    rng = np.random.default_rng(seed)
    for filters in FILTERS:
        vector = rng.normal(size=DIM).astype(np.float32)
        held = _held_search(store, MEMORIES, vector, filters, limit)  # type: ignore[arg-type]
        exact = index.dataset(MEMORIES).to_table(
            nearest={"column": "vector", "q": vector, "k": limit, "metric": "cosine", "use_index": False},
            filter=filters.memory_where(),
            prefilter=True,
            columns=["id", "_distance"],
        )
        assert held is not None
        assert [i for i, *_ in held] == exact.column("id").to_pylist(), filters
        assert [d for _, d, *_ in held] == pytest.approx(exact.column("_distance").to_pylist(), abs=1e-5)
        texts: dict[str, str] = {}
        stored = index.vectors(MEMORIES, [i for i, *_ in held], texts=texts)
        assert all(text == texts[i] and (v == stored[i]).all() for i, _, text, v in held)


def test_the_held_search_gives_lancedb_s_exact_hits_under_every_filter(index):
    assert index.held_memories() is index.held_memories(), "held once per version"
    assert_lancedb_s_exact_hits(index, seed=1)


def test_it_is_exact_where_lancedb_s_index_is_approximate(index):
    records, vectors = rows(2400, seed=2, prefix="x")
    index.add(MEMORIES, memory_rows(records, vectors, DIM))
    assert index.ensure_vector_index(MEMORIES, min_rows=1000, trained=None, growth=2.0) == 3300
    assert_lancedb_s_exact_hits(index, seed=3)


def test_every_write_is_seen_and_only_new_fragments_are_read(index):
    held = index.held_memories()
    assert held is not None
    first = held.fragments[0]
    records, vectors = rows(40, seed=4, prefix="new")
    index.add(MEMORIES, memory_rows(records, vectors, DIM))
    grown = index.held_memories()
    assert grown is not held and grown is not None and grown.fragments[0] is first, "an append reads its fragment"
    assert_lancedb_s_exact_hits(index, seed=5)
    index.update(MEMORIES, ["m00001", "m00004", "new00002"], {"state": "dormant"})
    index.delete(MEMORIES, ["m00005", "new00001"])
    changed = index.held_memories()
    assert changed is not None and changed.fragments[0] is not first
    assert changed.fragments[0].vectors is first.vectors, "a fragment's deletions read only its row addresses"
    assert_lancedb_s_exact_hits(index, seed=6)
    index.compact_files(MEMORIES)
    assert_lancedb_s_exact_hits(index, seed=7)


def test_the_sleeping_turns_search_reads_the_held_rows(index, monkeypatch):
    vector = index.vectors(MEMORIES, ["m00002"])["m00002"]  # dormant
    units = SimpleNamespace(derived=lambda name, make: frozenset({"m00002"}))
    store = SimpleNamespace(index=index)
    monkeypatch.setattr(Index, "nearest", lambda *a, **k: pytest.fail("LanceDB searched"))
    assert noted_best(store, vector, Filters(), units) == pytest.approx(1.0, abs=1e-3)  # type: ignore[arg-type]


def test_a_table_over_the_budget_is_searched_by_lancedb(index, tmp_path, monkeypatch):
    store = SimpleNamespace(index=index)
    records, vectors = rows(800, seed=8, prefix="more")
    index.add(MEMORIES, memory_rows(records, vectors, DIM))
    # 1,700 rows of 16 floats counted ten times: 1.1 MB, over the 1 MB budget
    monkeypatch.setattr(held_vectors, "estimated_bytes", lambda rows, dim: rows * dim * 4 * 10)
    assert index.held_memories() is None
    assert _held_search(store, MEMORIES, np.ones(DIM, dtype=np.float32), Filters(), 5) is None  # type: ignore[arg-type]
    assert Index(tmp_path / "lance").held_memories(hold=True) is None, "no budget: never held"


def test_a_table_lacking_a_filter_column_is_searched_by_lancedb(index):
    index.table(MEMORIES).drop_columns(["user"])  # a read-only store's table made before `user` was added
    index._written(MEMORIES)
    assert index.held_memories() is None


def test_a_warm_engine_holds_the_memories_again_after_the_store_is_reopened(engine_on):
    """A restore reopens the store's index; a warmed server keeps searching the memories in memory."""
    engine = engine_on()
    engine.warm()
    with engine.session() as store:
        assert store.index.held_memories() is not None
        store.reopen()
        assert store.index.holds_memories()
        assert store.index.held_memories() is not None
