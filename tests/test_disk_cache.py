"""Disk: the embedding cache keeps its vectors as BLOBs, and a store made with float32 lists is converted
by a migration that a kill leaves undone."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from helpers import BOOKING, CHATTER, REFUND, Counting, ev, weather_session

from expengine.store.db import DB_FILE, close_database, open_database
from expengine.store.embeddings import INDEXED_SQL, EmbedCounts, EmbeddingCache, VectorMemo, carry_cache, text_hash
from expengine.store.index import MEMORIES
from expengine.store.scrub import rewrite_database
from expengine.store.state import set_state
from expengine.store.vector_bytes import blob_vectors


def column_type(con: duckdb.DuckDBPyConnection) -> str:
    return con.execute(
        "SELECT data_type FROM information_schema.columns WHERE table_name = 'embeddings' AND column_name = 'vector'"
    ).fetchone()[0]  # type: ignore[index]


def cache_recent(engine) -> None:
    """Put the vectors ingest left in the recent files into the cache table, where ingest wrote them
    before `store.recent_vectors` (what a store made then holds)."""
    with engine.session() as store:
        files, vectors = store.recent_vectors.everything(store.embeddings.name)
        store.embeddings._write(store.embeddings.name, vectors)
        store.recent_vectors.delete(files)


def make_float32_store(path) -> dict[str, np.ndarray]:
    """Turn a store's cache back into the float32 lists of before `m011_embeddings_blob`; its vectors."""
    con = duckdb.connect(str(path))
    rows = con.execute("SELECT text_hash, model, vector FROM embeddings").fetchall()
    vectors = dict(zip((h for h, _, _ in rows), blob_vectors([v for _, _, v in rows])))
    con.execute("DROP TABLE embeddings")
    con.execute(
        "CREATE TABLE embeddings (text_hash VARCHAR NOT NULL, model VARCHAR NOT NULL, vector FLOAT[] NOT NULL, "
        "PRIMARY KEY (text_hash, model))"
    )
    con.executemany("INSERT INTO embeddings VALUES (?, ?, ?)", [[h, m, vectors[h].tolist()] for h, m, _ in rows])
    con.execute("DELETE FROM migrations WHERE name IN ('m011_embeddings_blob', 'm012_embeddings_float16')")
    con.close()
    return vectors


def test_a_float32_cache_is_converted_to_float16_on_open_and_nothing_is_embedded_again(
    make_engine, write_jsonl, tmp_path
):
    engine = make_engine()
    first = engine.ingest([write_jsonl("a.jsonl", BOOKING)])
    cache_recent(engine)
    engine.close()
    path = tmp_path / "store" / DB_FILE
    before = make_float32_store(path)
    assert before and first.embedded == len(before)
    con = open_database(path)
    try:
        assert column_type(con) == "BLOB"
        after = dict(zip(*zip(*con.execute("SELECT text_hash, vector FROM embeddings").fetchall())))
        assert after.keys() == before.keys()
        assert all(np.array_equal(blob_vectors([after[h]])[0], before[h]) for h in before)  # already float16 values
    finally:
        close_database(con)
    again = make_engine().ingest([write_jsonl("b.jsonl", BOOKING)])
    assert again.embedded == 0


def test_a_conversion_that_fails_midway_leaves_the_float32_cache_whole(make_engine, write_jsonl, tmp_path, monkeypatch):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING)])
    cache_recent(engine)
    engine.close()
    path = tmp_path / "store" / DB_FILE
    before = make_float32_store(path)

    def failed(vectors):
        raise RuntimeError("disk full")  # uncommitted, as a kill between two pages leaves it

    monkeypatch.setattr("expengine.store.vector_bytes.vector_blobs", failed)
    with pytest.raises(RuntimeError, match="disk full"):
        open_database(path)
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert column_type(con) == "FLOAT[]"
        assert con.execute("SELECT count(*) FROM embeddings").fetchone() == (len(before),)
        assert not con.execute("SELECT count(*) FROM migrations WHERE name = 'm011_embeddings_blob'").fetchone()[0]  # type: ignore[index]
    finally:
        con.close()


def test_a_fresh_vector_equals_the_one_read_back_from_the_cache(embedder, tmp_path):
    con = open_database(tmp_path / DB_FILE)
    try:
        texts = ["book a flight to Tokyo", "the refund window is 30 days"]
        fresh = EmbeddingCache(con, embedder).encode(texts)
        stored = con.execute("SELECT vector FROM embeddings WHERE text_hash = ?", [text_hash(texts[0])]).fetchone()
        assert len(stored[0]) == 4 * embedder.dim  # type: ignore[index]  # four bytes a number
        read = EmbeddingCache(con, embedder, VectorMemo()).encode(texts)  # a new memo: read from DuckDB
        assert read.dtype == np.float32 and np.array_equal(read, fresh)
        assert np.allclose(fresh, embedder.encode(texts), atol=1e-3)
    finally:
        close_database(con)


def test_a_cycle_leaves_the_vectors_lancedb_holds_to_it_and_archiving_puts_them_back(
    make_engine, write_jsonl, embedder
):
    counting = Counting(embedder)
    engine = make_engine(embedder=counting)
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND + CHATTER)])
    with engine.session() as store:
        before = store.con.execute("SELECT count(*) FROM embeddings").fetchone()[0]  # type: ignore[index]
        before += len(store.recent_vectors.everything(store.embeddings.name)[1])  # ingest's, out of the table
    engine.compact(refine=False)
    embedded = counting.texts
    with engine.session() as store:
        after = store.con.execute("SELECT count(*) FROM embeddings").fetchone()[0]  # type: ignore[index]
        rows = store.con.execute(f"SELECT id, text FROM records WHERE {INDEXED_SQL} ORDER BY id").fetchall()
        assert rows and after < before
        store.embeddings.memo = VectorMemo()  # nothing read before
        vectors = store.embeddings.encode([t for _, t in rows], indexed=True)
        assert counting.texts == embedded  # read from LanceDB, none embedded
        indexed = store.index.vectors(MEMORIES, [i for i, _ in rows])
        assert np.array_equal(vectors, np.stack([indexed[i] for i, _ in rows]))
        leaving = [rows[0][0]]
        set_state(store, leaving, "archived", reason="test")
        cached = store.con.execute("SELECT count(*) FROM embeddings WHERE text_hash = ?", [text_hash(rows[0][1])])
        assert cached.fetchone() == (1,)  # its vector is the cache's again, LanceDB let it go
        store.embeddings.memo = VectorMemo()
        assert np.array_equal(store.embeddings.encode([rows[0][1]])[0], vectors[0])
    assert counting.texts == embedded
    hits = engine.query("request_refund error: order W123 is past the 30 day refund window", k=3, touch=False)
    assert hits.hits and counting.texts == embedded + 1  # only the query itself was embedded


def cached_row(store, text: str) -> tuple:
    return store.con.execute(
        "SELECT octet_length(vector), float16 FROM embeddings WHERE text_hash = ?", [text_hash(text)]
    ).fetchone()


def test_an_archived_memory_keeps_lancedbs_float16_vector_and_why_and_revive_use_it(make_engine, write_jsonl, embedder):
    counting = Counting(embedder)
    engine = make_engine(embedder=counting)
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND + CHATTER)])
    embedded = counting.texts
    with engine.session() as store:
        rows = store.con.execute(f"SELECT id, text FROM records WHERE {INDEXED_SQL} ORDER BY id").fetchall()
        (fresh_id, fresh_text), (dropped_id, dropped_text) = rows[0], rows[1]
        assert cached_row(store, fresh_text) is None  # float32 as ingest cached it, in the recent files
        assert store.recent_vectors.get(store.embeddings.name, [text_hash(fresh_text)])
        store.embeddings.drop_indexed()
        assert not store.recent_vectors.files(store.embeddings.name)
        assert cached_row(store, dropped_text) is None  # LanceDB holds it
        held = store.index.vectors(MEMORIES, [fresh_id, dropped_id])
        set_state(store, [fresh_id, dropped_id], "archived", reason="test")
        for text in (fresh_text, dropped_text):  # float16 bytes, in place of the float32 row
            assert cached_row(store, text) == (2 * embedder.dim, True)
        assert not store.index.vectors(MEMORIES, [fresh_id, dropped_id])
        memo_vector = store.embeddings.encode([fresh_text])[0]
        store.embeddings.memo = VectorMemo()  # as a later process reads it
        read = store.embeddings.encode([fresh_text, dropped_text])
        assert np.array_equal(read, np.stack([held[fresh_id], held[dropped_id]]))
        assert np.array_equal(memo_vector, read[0])  # the memo was given the same vector
        assert store.embeddings.dim == embedder.dim
    assert counting.texts == embedded
    found = engine.why(dropped_text, limit=1, revive=True)
    assert [(i.id, i.status, i.revived) for i in found.items] == [(dropped_id, "archived", True)]
    assert found.items[0].similarity > 0.999
    assert counting.texts == embedded  # the question is its text: the cached float16 vector
    with engine.session() as store:
        assert store.con.execute("SELECT state FROM records WHERE id = ?", [dropped_id]).fetchone() == ("active",)
        indexed = store.index.vectors(MEMORIES, [dropped_id])
        assert np.array_equal(indexed[dropped_id], held[dropped_id])  # indexed again from the cache, not embedded
    assert counting.texts == embedded


def test_a_text_that_a_memory_out_of_lancedb_shares_keeps_its_cached_vector(make_engine, write_jsonl, embedder):
    """A cycle dropped the cached vector of a text when any memory in LanceDB held it, also when an archived
    one held it too: a query showing that archived memory embedded its text again, and the one row appended
    made DuckDB rewrite the cache's whole row group at the next checkpoint (+1.2 MB on the sample
    logs' store after 3 cycles). A cycle also puts back what a store lost so (from LanceDB, embedding none)."""
    said = "I need a flight from DEN to Tokyo NRT on 2026-03-20"
    again = ev("d01", 40, "message", session="s4", role="user", content=said)  # b02's text, another session
    counting = Counting(embedder)
    engine = make_engine(embedder=counting)
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND + CHATTER + [again])])
    embedded = counting.texts
    with engine.session() as store:
        ids = [i for (i,) in store.con.execute("SELECT id FROM records WHERE text = ? ORDER BY id", [said]).fetchall()]
        assert len(ids) == 2
        held = store.index.vectors(MEMORIES, ids[:1])[ids[0]]
        set_state(store, ids[1:], "archived", reason="test")
        store.embeddings.drop_indexed()  # the other memory with that text is still in LanceDB
        assert cached_row(store, said) == (2 * embedder.dim, True)
        store.con.execute("DELETE FROM embeddings WHERE text_hash = ?", [text_hash(said)])  # as a cycle before left it
        store.embeddings.drop_indexed()
        assert cached_row(store, said) == (2 * embedder.dim, True)  # LanceDB's vector, put back
        store.embeddings.memo = VectorMemo()  # as a later process reads it
        assert np.array_equal(store.embeddings.encode([said])[0], held)
    assert counting.texts == embedded


def test_a_cycle_caches_every_vector_queries_read_from_the_cache(make_engine, write_jsonl, embedder):
    """What a query reads from the cache (rules' texts, archived sources) is cached by the cycle, so a query
    appends nothing to the cache (one appended row rewrote the whole table at the next checkpoint)."""
    from expengine.query.expand import cached_texts

    engine = make_engine()
    weather = [e for n in range(4) for e in weather_session(n, rate_limited=n < 3)]  # refined into a rule
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND + CHATTER + weather)])
    engine.compact()
    with engine.session() as store:
        texts = cached_texts(store)
        assert texts
        store.con.execute(
            "DELETE FROM embeddings WHERE text_hash IN (SELECT unnest(?))", [[text_hash(t) for t in texts]]
        )
    engine.compact()
    with engine.session() as store:
        texts = cached_texts(store)
        assert all(cached_row(store, t) for t in texts)
        cached = store.con.execute("SELECT count(*) FROM embeddings").fetchone()
    engine.close()
    for question in ("book a flight to Tokyo", "refund order W123", "aisle seat"):
        engine.query(question, k=5, touch=False)
    with engine.session() as store:
        assert store.con.execute("SELECT count(*) FROM embeddings").fetchone() == cached


def test_a_snapshot_from_before_the_float16_flag_takes_only_the_float32_vectors(embedder, tmp_path):
    live, old = tmp_path / "live.duckdb", tmp_path / "old.duckdb"
    for path in (live, old):
        close_database(open_database(path))
    con = open_database(live)
    try:
        cache = EmbeddingCache(con, embedder)
        vectors = cache.encode(["book a flight to Tokyo", "the refund window is 30 days"])
        cache._write(embedder.name, {text_hash("an archived memory"): vectors[0]}, archived=True)
    finally:
        close_database(con)
    con = duckdb.connect(str(old))
    con.execute("ALTER TABLE embeddings DROP COLUMN float16")  # as m012 had not run on it
    con.close()
    carry_cache(live, old)
    con = duckdb.connect(str(old), read_only=True)
    try:
        carried = dict(con.execute("SELECT text_hash, octet_length(vector) FROM embeddings").fetchall())
    finally:
        con.close()
    assert carried == {
        text_hash("book a flight to Tokyo"): 4 * embedder.dim,
        text_hash("the refund window is 30 days"): 4 * embedder.dim,
    }


def test_ingest_keeps_its_vectors_out_of_the_cache_table_until_the_cycle(make_engine, write_jsonl, embedder):
    """Ingest's vectors go to the recent files (each call's into the table rewrote its whole row group at
    the call's checkpoint); a later process reads the same float32 vectors from them, and the cycle moves
    those LanceDB does not hold into the table and deletes the files."""
    counting = Counting(embedder)
    engine = make_engine(embedder=counting)
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND + CHATTER)])
    embedded = counting.texts
    with engine.session() as store:
        model = store.embeddings.name
        assert store.con.execute("SELECT count(*) FROM embeddings").fetchone() == (0,)
        _, recent = store.recent_vectors.everything(model)
        texts = [t for (t,) in store.con.execute("SELECT DISTINCT text FROM records ORDER BY text").fetchall()]
        assert {text_hash(t) for t in texts} <= recent.keys()
        store.embeddings.memo = VectorMemo()  # as a later process reads it
        assert np.array_equal(store.embeddings.encode(texts), np.stack([recent[text_hash(t)] for t in texts]))
        archived = store.con.execute(f"SELECT id, text FROM records WHERE {INDEXED_SQL} ORDER BY id LIMIT 1").fetchone()
        store.con.execute("INSERT INTO pending_index VALUES (?, 'memory')", [archived[0]])  # as a kill leaves it
        store.embeddings.drop_indexed()
        assert not store.recent_vectors.files(model)
        assert cached_row(store, archived[1]) == (4 * embedder.dim, False)  # not in LanceDB: kept, as ingest made it
        kept = store.con.execute("SELECT count(*) FROM embeddings").fetchone()[0]  # type: ignore[index]
        assert 0 < kept < len(texts)
    assert counting.texts == embedded


def test_forget_drops_the_forgotten_texts_vectors_from_the_recent_files(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND)])
    with engine.session() as store:
        gone_id, gone_text = store.con.execute("SELECT id, text FROM records ORDER BY id LIMIT 1").fetchone()
        left = store.con.execute("SELECT text FROM records WHERE text != ? LIMIT 1", [gone_text]).fetchone()[0]
    engine.forget(ids=[gone_id])
    with engine.session() as store:
        _, recent = store.recent_vectors.everything(store.embeddings.name)
        assert text_hash(gone_text) not in recent and text_hash(left) in recent


def test_ingest_calls_past_fan_in_merge_their_files_and_keep_every_vector_out_of_the_table(
    make_engine, write_jsonl, monkeypatch
):
    """An agent that ingests each turn leaves a file per call: `FAN_IN` files of a level merge into one of
    the next, so a lookup asks few files, and nothing is embedded twice, lost, or written to the table."""
    import expengine.store.recent_vectors as recent_vectors

    monkeypatch.setattr(recent_vectors, "FAN_IN", 2)
    engine = make_engine()
    events = BOOKING + REFUND
    for n, event in enumerate(events):
        engine.ingest([write_jsonl(f"{n}.jsonl", [event])])
    with engine.session() as store:
        model = store.embeddings.name
        files, recent = store.recent_vectors.everything(model)
        in_table = store.con.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        texts = {text_hash(t) for (t,) in store.con.execute("SELECT DISTINCT text FROM records").fetchall()}
        assert texts <= recent.keys() and in_table == 0
        assert len(files) <= len(bin(len(events))) and len({recent_vectors._level(f) for f in files}) == len(files)
        counts = EmbedCounts()
        store.embeddings.encode([t for (t,) in store.con.execute("SELECT text FROM records").fetchall()], counts)
        assert counts.embedded == 0


def vector_compression(con: duckdb.DuckDBPyConnection) -> set[str]:
    """How DuckDB stores the cache's vector column, its constant segments left out."""
    return {
        c
        for (c,) in con.execute(
            "SELECT DISTINCT compression FROM pragma_storage_info('embeddings') WHERE column_name = 'vector'"
        ).fetchall()
    } - {"Constant"}


def test_the_cache_vectors_move_to_an_uncompressed_column_and_stay_there_through_a_rewrite(
    make_engine, write_jsonl, tmp_path
):
    """`m021_embeddings_uncompressed`: a cache made before it keeps every vector, now stored uncompressed
    (a checkpoint no longer compresses the row group's vectors again), also after the file is rewritten."""
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING + REFUND)])
    cache_recent(engine)
    engine.close()
    path = tmp_path / "store" / DB_FILE
    con = duckdb.connect(str(path))
    before = sorted(con.execute("SELECT * FROM embeddings").fetchall())
    con.execute(  # as m011 and m012 left it
        "CREATE TABLE compressed (text_hash VARCHAR NOT NULL, model VARCHAR NOT NULL, vector BLOB NOT NULL, "
        "float16 BOOLEAN NOT NULL DEFAULT false, PRIMARY KEY (text_hash, model))"
    )
    con.execute("INSERT INTO compressed SELECT * FROM embeddings")
    con.execute("DROP TABLE embeddings")
    con.execute("ALTER TABLE compressed RENAME TO embeddings")
    con.execute("DELETE FROM migrations WHERE name = 'm021_embeddings_uncompressed'")
    con.execute("CHECKPOINT")
    assert before and vector_compression(con) != {"Uncompressed"}
    con.close()
    con = open_database(path)
    try:
        con.execute("CHECKPOINT")
        assert vector_compression(con) == {"Uncompressed"}
        assert sorted(con.execute("SELECT * FROM embeddings").fetchall()) == before
    finally:
        close_database(con)
    rewrite_database(path)
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert vector_compression(con) == {"Uncompressed"}
        assert sorted(con.execute("SELECT * FROM embeddings").fetchall()) == before
    finally:
        con.close()
    assert make_engine().ingest([write_jsonl("b.jsonl", BOOKING)]).embedded == 0


def test_a_restored_store_keeps_its_cache_uncompressed(make_engine, write_jsonl, tmp_path):
    """A snapshot's schema carries the column's storage, so a restore does not bring compression back."""
    engine = make_engine()
    engine.ingest([write_jsonl("a.jsonl", BOOKING)])
    cache_recent(engine)
    taken = engine.snapshot()
    engine.ingest([write_jsonl("b.jsonl", REFUND)])
    engine.restore(taken.id)
    with engine.session() as store:
        store.con.execute("CHECKPOINT")
        assert store.con.execute("SELECT count(*) FROM embeddings").fetchone()[0]  # type: ignore[index]
        assert vector_compression(store.con) == {"Uncompressed"}
