"""The LanceDB indexes take new rows in without a rebuild, and IVF-PQ is trained again only when the
table has grown by `query.index_retrain_growth` since its last training (`store.index`, `store.reindex`)."""

from __future__ import annotations

import numpy as np
from test_lance_reads import DIM, rows

from expengine.store.index import MEMORIES, Index
from expengine.store.lance_rows import memory_rows

LIVE = "state IN ('active', 'dormant')"


def add(index: Index, n: int, prefix: str, seed: int) -> np.ndarray:
    records, vectors = rows(n, seed=seed)
    for r in records:
        r["id"] = prefix + r["id"]
    index.add(MEMORIES, memory_rows(records, vectors, DIM))
    return vectors


def stats(index: Index):
    table = index.table(MEMORIES)
    return table.index_stats(next(i.name for i in table.list_indices() if "vector" in i.columns))


def nearest_id(index: Index, vector: np.ndarray) -> str:
    hits = index.nearest(MEMORIES, vector, LIVE, 1)
    assert hits is not None
    return hits.column("id").to_pylist()[0]


def test_rows_added_after_training_are_found_at_once_and_join_the_index_without_retraining(tmp_path):
    index = Index(tmp_path / "lance")
    add(index, 600, "a-", seed=1)
    assert index.ensure_vector_index(MEMORIES, min_rows=700, trained=None, growth=2.0) is None  # too few rows
    add(index, 200, "b-", seed=2)
    assert index.ensure_vector_index(MEMORIES, min_rows=700, trained=None, growth=2.0) == 800
    vectors = add(index, 300, "c-", seed=3)
    assert stats(index).num_unindexed_rows == 300
    before = [nearest_id(index, v) for v in vectors[:20]]
    assert before == [f"c-m{i:05d}" for i in range(20)]  # scanned exactly until the index takes them
    assert index.ensure_vector_index(MEMORIES, min_rows=700, trained=800, growth=2.0) == 800  # 1,100 < 2 × 800
    index.update_indexes(MEMORIES)
    after = stats(index)
    assert (after.num_indexed_rows, after.num_unindexed_rows, after.num_indices) == (1100, 0, 1)
    # indexed, they are found by the approximate search (its own vector's row among the 10 nearest)
    for row, vector in zip(before, vectors[:20]):
        hits = index.nearest(MEMORIES, vector, LIVE, 10)
        assert hits is not None and row in hits.column("id").to_pylist()


def test_the_index_is_trained_again_exactly_at_the_growth_factor(tmp_path):
    index = Index(tmp_path / "lance")
    add(index, 500, "a-", seed=1)
    assert index.ensure_vector_index(MEMORIES, min_rows=500, trained=None, growth=1.5) == 500
    add(index, 249, "b-", seed=2)
    assert index.ensure_vector_index(MEMORIES, min_rows=500, trained=500, growth=1.5) == 500
    assert stats(index).num_unindexed_rows == 249  # left to `update_indexes`
    vectors = add(index, 1, "c-", seed=3)
    assert index.ensure_vector_index(MEMORIES, min_rows=500, trained=500, growth=1.5) == 750
    assert (stats(index).num_indexed_rows, stats(index).num_unindexed_rows) == (750, 0)
    hits = index.nearest(MEMORIES, vectors[0], LIVE, 10)  # approximate: among its own vector's 10 nearest
    assert hits is not None and "c-m00000" in hits.column("id").to_pylist()
    # a store indexed before the trained count was kept: its index's rows stand in for it
    assert index.ensure_vector_index(MEMORIES, min_rows=500, trained=None, growth=1.5) == 750


def test_the_text_index_takes_new_rows_in_and_a_rebuild_still_builds_it_afresh(tmp_path):
    index = Index(tmp_path / "lance")
    add(index, 300, "a-", seed=1)
    index.refresh_text_index(MEMORIES)
    add(index, 50, "b-", seed=2)
    index.refresh_text_index(MEMORIES)
    table = index.table(MEMORIES)
    text = next(i.name for i in table.list_indices() if i.columns == ["text"])
    assert (table.index_stats(text).num_indexed_rows, table.index_stats(text).num_unindexed_rows) == (350, 0)
    hits = index.text_search(MEMORIES, "number 42", LIVE, 50)
    assert hits is not None and {"a-m00042", "b-m00042"} <= set(hits.column("id").to_pylist())
    index.delete(MEMORIES, ["a-m00042"])
    index.refresh_text_index(MEMORIES, rebuild=True)
    hits = index.text_search(MEMORIES, "number 42", LIVE, 50)
    assert hits is not None and "a-m00042" not in hits.column("id").to_pylist()


def test_refresh_indexes_keeps_the_trained_row_count_in_the_store(engine_on):
    from expengine.store.reindex import TRAINED_KEY, refresh_indexes

    engine = engine_on(overrides={"query.index_above": 1})
    store = engine.store
    key = TRAINED_KEY.format(MEMORIES)

    def trained():
        return store.con.execute("SELECT value FROM store_meta WHERE key = ?", [key]).fetchone()

    assert trained() is None
    rows_now = store.index.count(MEMORIES)
    assert refresh_indexes(store)["memories"]["vector_index"] is True
    assert trained() == (str(rows_now),)
