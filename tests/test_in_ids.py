"""`db.in_ids`: a short id list spelled out as parameters selects the same rows as `IN (SELECT unnest(?))`
(real DuckDB), for none, a few, duplicates and a list past `IN_LIST_MAX`."""

from __future__ import annotations

import duckdb
import pytest

from expengine.store import db


@pytest.fixture
def con():
    con = duckdb.connect()
    con.execute("CREATE TABLE records (id VARCHAR PRIMARY KEY, text VARCHAR)")
    con.execute("INSERT INTO records SELECT 'r' || i::VARCHAR, 'text ' || i::VARCHAR FROM range(3000) t(i)")
    yield con
    con.close()


@pytest.mark.parametrize(
    "ids",
    [[], ["r1"], ["r5", "r7", "missing", "r5"], [f"r{i}" for i in range(0, 2600, 2)]],
    ids=["none", "one", "few with a duplicate and a missing id", "past the list limit"],
)
def test_in_ids_selects_what_unnest_selects(con, ids):
    where, params = db.in_ids("id", ids)
    spelled = sorted(con.execute(f"SELECT id, text FROM records WHERE {where}", params).fetchall())
    joined = sorted(con.execute("SELECT id, text FROM records WHERE id IN (SELECT unnest(?))", [ids]).fetchall())
    assert spelled == joined
    assert (len(ids) > db.IN_LIST_MAX) == ("unnest" in where)


def test_in_ids_in_an_update_with_parameters_before_it(con):
    where, params = db.in_ids("id", ["r1", "r2"])
    con.execute(f"UPDATE records SET text = ? WHERE {where}", ["shown", *params])
    assert con.execute("SELECT count(*) FROM records WHERE text = 'shown'").fetchone() == (2,)
