"""The LanceDB filter builder and bound DuckDB id lists keep hostile ids exact (no quoting bugs)."""

from __future__ import annotations

import pyarrow as pa

from expengine.store.filters import lance_eq, lance_in, sql_str
from expengine.store.index import Index

HOSTILE = ["it's", "back\\slash\\", "new\nline", "emoji 🚀 id", "'; DROP TABLE x; --", "\\'", 'dq"x', "x" * 10_000]


def test_builder_quotes_only_by_doubling():
    assert sql_str("it's") == "'it''s'"
    assert lance_eq("id", "a\\b") == "id = 'a\\b'"
    assert lance_in("id", ["a", "b'"]) == "id IN ('a', 'b''')"


def test_lancedb_filters_match_hostile_ids_exactly(tmp_path):
    index = Index(tmp_path / "lance")
    ids = HOSTILE + ["plain"]
    index.add("t", pa.table({"id": ids, "n": list(range(len(ids)))}), replace=False)
    table = index.table("t")
    for value in HOSTILE:
        assert table.count_rows(lance_eq("id", value)) == 1, value
    assert table.count_rows(lance_in("id", HOSTILE)) == len(HOSTILE)
    index.update("t", HOSTILE[:2], {"n": -1})
    updated = index.table("t").search().where("n = -1").to_list()
    assert sorted(r["id"] for r in updated) == sorted(HOSTILE[:2])
    index.delete("t", HOSTILE)
    assert [r["id"] for r in index.table("t").to_arrow().to_pylist()] == ["plain"]


def test_duckdb_id_lists_are_bound(tmp_path):
    import duckdb

    con = duckdb.connect(str(tmp_path / "x.duckdb"))
    con.execute("CREATE TABLE r (id VARCHAR)")
    con.executemany("INSERT INTO r VALUES (?)", [[i] for i in HOSTILE + ["plain"]])
    found = con.execute("SELECT id FROM r WHERE id IN (SELECT unnest(?))", [HOSTILE]).fetchall()
    assert sorted(r[0] for r in found) == sorted(HOSTILE)
