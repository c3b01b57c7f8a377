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
            units = store.unit_rows.current(store.con, store.dir, in_transaction=store.in_transaction)
            records = store.rows._rows  # columns: a few arrays, not an object per record
            assert units is not None and records is not None and len(records) == 2
            assert gc.get_freeze_count() > 0
            for memo in (units, records):
                assert not any(r is memo for r in gc.get_objects(generation=2)), (
                    "the memo is in the permanent generation"
                )
    finally:
        gc.unfreeze()  # the test process's collector as it was


def _memo_store(tmp_path, count: int):
    """A store's database with `count` records whose scoring columns vary (NULLs included)."""
    from expengine.store.db import DB_FILE, open_database

    con = open_database(tmp_path / DB_FILE)
    con.execute(
        """
        INSERT INTO records (id, content_hash, agent, ts, kind, text, importance, category, weight, state,
                             last_access, utility, merged_ids, "user", ingested_at)
        SELECT 'r' || i::VARCHAR, md5(i::VARCHAR), 'agent-' || (i % 3)::VARCHAR, TIMESTAMP '2026-01-01' + to_seconds(i),
               ['message', 'tool_call'][1 + i % 2], 'text ' || i::VARCHAR, 0.5, 'tool', 1.0 - i / 1000.0,
               ['active', 'dormant', 'archived'][1 + i % 3],
               CASE WHEN i % 4 = 0 THEN TIMESTAMP '2026-06-01 10:00:00.123456' + to_seconds(i) END,
               i / 7.0, CASE WHEN i % 5 = 0 THEN '["m' || i::VARCHAR || '"]' END,
               CASE WHEN i % 2 = 0 THEN 'user-' || (i % 9)::VARCHAR END, TIMESTAMP '2026-12-01'
        FROM range(?) t(i)
        """,
        [count],
    )
    return con


def test_the_records_memo_as_columns_gives_the_rows_duckdb_gives(tmp_path):
    """`RecordMemo` holds columns, not a tuple per row: its rows are DuckDB's, value for value and type
    for type, in the order asked, without the ids it does not hold."""
    from expengine.store.db import close_database
    from expengine.store.row_memo import RecordMemo

    con = _memo_store(tmp_path, 3000)
    try:
        con.execute("CHECKPOINT")
        memo = RecordMemo()
        assert memo.load(con, tmp_path) == 3000
        ids = ["r2999", "absent", "r0", "r5", "r1234", "r7", "also-absent", "r20"]
        rows = memo.lookup(con, tmp_path, ids, in_transaction=False)
        expected = {r.id: r for r in memo.read(con, ids)}
        assert rows == [expected[i] for i in ids if i in expected] and len(rows) == 6
        for got in rows:
            want = expected[got.id]
            assert [type(v) for v in got] == [type(v) for v in want]
        assert rows[2].last_access is None and rows[1].merged_ids == '["m0"]' and rows[2].user is None
        assert memo.lookup(con, tmp_path, [], in_transaction=False) == []
        assert memo.lookup(con, tmp_path, ids, in_transaction=True) is None
    finally:
        close_database(con, whole=False)


def test_the_records_memo_finds_a_row_among_ids_that_share_its_hash(tmp_path):
    """Ids whose hashes are equal (forced here: every held hash made one value) are told apart by the id."""
    from expengine.store.db import close_database
    from expengine.store.row_memo import RecordMemo

    con = _memo_store(tmp_path, 50)
    try:
        memo = RecordMemo()
        memo.load(con, tmp_path)
        columns = memo._rows
        r41, r3 = (memo.read(con, [i])[0] for i in ("r41", "r3"))
        columns.hashes[:] = hash("r41")  # every row in the range a lookup of r41 searches
        assert memo.lookup(con, tmp_path, ["r41"], in_transaction=False) == [r41]
        assert memo.lookup(con, tmp_path, ["r41", "r41"], in_transaction=False) == [r41, r41]
        columns.hashes[:] = hash("r3")
        assert memo.lookup(con, tmp_path, ["r41", "r3"], in_transaction=False) == [r3]
        columns.hashes[:] = hash("nope")  # an id it does not hold, whose hash every row shares
        assert memo.lookup(con, tmp_path, ["nope"], in_transaction=False) == []
    finally:
        close_database(con, whole=False)
