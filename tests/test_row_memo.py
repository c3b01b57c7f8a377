"""The records' scoring columns kept in memory by a warm Engine (`store.row_memo`): a query scores by
what DuckDB holds now, whoever wrote it (this Engine, or another one on the same folder between calls,
as a cron compaction in another process does)."""

from __future__ import annotations

import gc
import subprocess
import sys

from expengine.store.row_memo import files_version

EVENTS = [
    {
        "id": "m1",
        "ts": "2026-11-30T10:00:00Z",
        "agent": "a",
        "session": "s",
        "kind": "message",
        "role": "user",
        "content": "I always book an aisle seat",
    },
    {
        "id": "m2",
        "ts": "2026-11-30T10:01:00Z",
        "agent": "a",
        "session": "s",
        "kind": "message",
        "role": "user",
        "content": "My dog is a corgi",
    },
]


def _weight(engine, text: str = "I always book an aisle seat") -> float:
    hit = next(h for h in engine.query(text, touch=False, k=2).hits if h.id == "m1")
    return hit.parts.weight


def test_a_warm_engine_scores_by_another_process_write(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", EVENTS)])
    engine.warm()  # reads the records' columns into memory
    before = _weight(engine)
    with engine.session() as store:
        assert store.rows.lookup(store.con, store.dir, ["m1"], in_transaction=store.in_transaction) is not None, (
            "the warm Engine answers from memory"
        )
        version = files_version(store.dir)
    script = (
        "import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
        "con.execute(\"UPDATE records SET weight = 40 WHERE id = 'm1'\"); con.close()"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "store" / "expengine.duckdb")], check=True)
    with engine.session() as store:
        assert files_version(store.dir) != version
    after = _weight(engine)
    assert after > before and abs(after - 40 / 41) < 1e-6


def test_a_write_of_its_own_is_seen_by_the_next_query(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", EVENTS)])
    with engine.session() as store:  # held open, as a server holds it
        engine.warm()
        assert store.rows.lookup(store.con, store.dir, ["m1"], in_transaction=store.in_transaction) is not None
        before = _weight(engine)
        store.con.execute("UPDATE records SET weight = 40 WHERE id = 'm1'")
        assert store.rows.lookup(store.con, store.dir, ["m1"], in_transaction=store.in_transaction) is None, (
            "the files changed: the next query reads DuckDB"
        )
        assert abs(_weight(engine) - 40 / 41) < 1e-6 and before < 40 / 41
        with store.transaction():
            store.con.execute("UPDATE records SET weight = 0 WHERE id = 'm1'")
            assert store.rows.lookup(store.con, store.dir, ["m1"], in_transaction=store.in_transaction) is None, (
                "never inside a transaction"
            )
            assert _weight(engine) == 0.0


def test_warm_moves_what_it_read_out_of_the_cyclic_collector(make_engine, write_jsonl):
    """The memos a warm Engine keeps are frozen (`gc.freeze`): a full collection no longer walks them."""
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", EVENTS)])
    gc.unfreeze()
    try:
        engine.warm()
        with engine.session() as store:
            rows = store.rows.current(store.con, store.dir, in_transaction=store.in_transaction)
            assert rows is not None and "m1" in rows
            assert gc.get_freeze_count() > len(rows)
            assert not any(r is rows for r in gc.get_objects(generation=2)), "the memo is in the permanent generation"
    finally:
        gc.unfreeze()  # the test process's collector as it was
