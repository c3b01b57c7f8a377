"""The Index reads through pylance datasets and writes through lancedb (`store.index`): a read sees
every write made through the Index, and the searches give lancedb's own hits, with and without an
IVF-PQ index."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from expengine.store.index import MEMORIES, VECTOR_REFINE_FACTOR, Index
from expengine.store.lance_rows import memory_rows

DIM = 16
WORDS = ["refund", "window", "flight", "seat", "weather", "retry", "hotel", "allergy"]


def rows(n: int, seed: int = 0) -> tuple[list[dict], np.ndarray]:
    rng = np.random.default_rng(seed)
    when = dt.datetime(2026, 11, 1)
    records = [
        {
            "id": f"m{i:05d}",
            "agent": "a",
            "kind": "message",
            "category": "general",
            "ts": when + dt.timedelta(minutes=i),
            "state": "dormant" if i % 4 == 0 else "active",
            "text": " ".join(rng.choice(WORDS, size=4)) + f" number {i}",
        }
        for i in range(n)
    ]
    return records, rng.normal(size=(n, DIM)).astype(np.float32)


@pytest.fixture
def index(tmp_path):
    index = Index(tmp_path / "lance")
    records, vectors = rows(600)
    index.add(MEMORIES, memory_rows(records, vectors, DIM))
    index.refresh_text_index(MEMORIES)
    return index


def test_a_read_sees_every_write_made_through_the_index(index):
    assert index.count(MEMORIES) == 600
    assert index.count(MEMORIES, "state = 'dormant'") == 150
    kept = index.dataset(MEMORIES)
    index.update(MEMORIES, ["m00001", "m00002"], {"state": "archived"})
    assert index.dataset(MEMORIES) is not kept
    assert index.count(MEMORIES, "state = 'archived'") == 2
    index.delete(MEMORIES, ["m00001"])
    assert index.count(MEMORIES) == 599
    assert set(index.vectors(MEMORIES, ["m00001", "m00002", "missing"])) == {"m00002"}
    records, vectors = rows(3, seed=1)
    for r in records:
        r["id"] = "new-" + r["id"]
    index.add(MEMORIES, memory_rows(records, vectors, DIM))
    hits = index.nearest(MEMORIES, vectors[0], "state IN ('active', 'dormant')", 1)
    assert hits is not None and hits.column("id").to_pylist() == ["new-m00000"]
    assert (
        index.dataset("units") is None
        and index.count("units") == 0
        and index.nearest("units", vectors[0], "", 3) is None
    )


def lancedb_vector_ids(index: Index, vector: np.ndarray, where: str, limit: int, refine: bool) -> list[str]:
    search = index.table(MEMORIES).search(vector, query_type="vector", vector_column_name="vector")
    search = search.distance_type("cosine")
    if refine:
        search = search.refine_factor(VECTOR_REFINE_FACTOR)
    return search.where(where, prefilter=True).limit(limit).select(["id"]).to_arrow().column("id").to_pylist()


@pytest.mark.parametrize("with_vector_index", [False, True])
def test_the_vector_search_gives_lancedb_s_hits(index, with_vector_index):
    if with_vector_index:
        records, vectors = rows(2400, seed=2)
        for r in records:
            r["id"] = "x-" + r["id"]
        index.add(MEMORIES, memory_rows(records, vectors, DIM))
        assert index.ensure_vector_index(MEMORIES, min_rows=1000, trained=None, growth=2.0) == 3000
    assert index.has_vector_index(MEMORIES) is with_vector_index
    rng = np.random.default_rng(9)
    for where in ("state IN ('active', 'dormant')", "state = 'dormant'"):
        for _ in range(5):
            vector = rng.normal(size=DIM).astype(np.float32)
            ours = index.nearest(MEMORIES, vector, where, 20)
            assert ours is not None and ours.column_names == ["id", "_distance"]
            assert ours.column("id").to_pylist() == lancedb_vector_ids(index, vector, where, 20, with_vector_index)


def test_the_full_text_search_gives_lancedb_s_hits_and_scores(index):
    for words, where in (("refund window", "state IN ('active', 'dormant')"), ("allergy seat", "state = 'dormant'")):
        ours = index.text_search(MEMORIES, words, where, 15, ("text",))
        theirs = (
            (index.table(MEMORIES).search(words, query_type="fts").where(where, prefilter=True).limit(15))
            .select(["id", "_score"])
            .to_arrow()
        )
        assert ours is not None and ours.num_rows == 15
        assert ours.column("id").to_pylist() == theirs.column("id").to_pylist()
        assert ours.column("_score").to_pylist() == pytest.approx(theirs.column("_score").to_pylist())
        assert all(set(words.split()) & set(text.split()) for text in ours.column("text").to_pylist())


def test_a_missing_full_text_index_is_built_on_the_first_search_and_seen(tmp_path):
    index = Index(tmp_path / "lance")
    records, vectors = rows(50)
    index.add(MEMORIES, memory_rows(records, vectors, DIM))
    with index.files.reading():  # as a query holds it: building the index must not wait on it
        assert index.ensure_text_index(MEMORIES)
        found = index.text_search(MEMORIES, "hotel", "state IN ('active', 'dormant')", 5)
    assert found is not None and found.num_rows > 0
