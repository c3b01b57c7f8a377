"""`[embedder] encoder = "auto"`: int8 ONNX for a new store, and for an existing one the encoder its
vectors were written with (an fp32 store stays fp32, with no reindex; `warm`, a fleet worker and the
benches' `load_embedder` too); an explicit encoder is still
refused by another's vectors; the record commits with the first batch, so a kill after it never
leaves int8 vectors that a later open reads as fp32."""

from __future__ import annotations

import signal

import pytest
from helpers import BOOKING, CHATTER, REFUND, paused_cli

from expengine import Engine
from expengine.errors import ModelError
from expengine.store.pause import PAUSE_MARKER

pytestmark = pytest.mark.slow

INT8, FP32 = "all-MiniLM-L6-v2+int8", "all-MiniLM-L6-v2"
QUESTION = "refund past the window"


def recorded(engine: Engine) -> tuple | None:
    return engine.store.con.execute("SELECT value FROM store_meta WHERE key = 'vectors'").fetchone()


def cached_models(engine: Engine) -> set[str]:
    """The models of the cached vectors: the cache table's and ingest's recent files' (`RecentVectors`)."""
    table = {m for (m,) in engine.store.con.execute("SELECT DISTINCT model FROM embeddings").fetchall()}
    return table | set(engine.store.recent_vectors.models())


def hit_ids(engine: Engine) -> list[str]:
    return [h.id for h in engine.query(QUESTION, k=3, touch=False).hits]


def test_a_new_store_on_auto_writes_int8_vectors_and_records_them(write_jsonl, tmp_path):
    from expengine.models.embedder import get_embedder

    with Engine(store=tmp_path / "s") as engine:
        assert engine.config.embedder.encoder == "auto"
        engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)])
        assert engine.embedder.name == INT8 == get_embedder(encoder="onnx-int8").name
        assert recorded(engine) == (INT8,) and cached_models(engine) == {INT8}
        assert hit_ids(engine)


def test_an_fp32_store_opened_on_auto_stays_fp32_with_no_reindex(write_jsonl, tmp_path):
    store = tmp_path / "s"
    with Engine(store=store, overrides={"embedder.encoder": "onnx"}) as engine:
        engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND)])
        fp32_hits = hit_ids(engine)
    with Engine(store=store) as engine:
        assert hit_ids(engine) == fp32_hits and engine.embedder.name == FP32
        engine.ingest([write_jsonl("more.jsonl", CHATTER)])  # new records get fp32 vectors too
        assert recorded(engine) == (FP32,) and cached_models(engine) == {FP32}
    with Engine(store=store) as engine:
        engine.warm()
        assert engine.embedder.name == FP32 and engine.embedder.loaded  # warm loaded the store's encoder
        assert hit_ids(engine) == fp32_hits


def test_a_store_with_records_and_no_record_reads_as_fp32(write_jsonl, tmp_path):
    """A store from before the record (the only encoder then was fp32) stays fp32 on auto, and gets its record."""
    store = tmp_path / "s"
    with Engine(store=store, overrides={"embedder.encoder": "onnx"}) as engine:
        engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND)])
        engine.store.con.execute("DELETE FROM store_meta WHERE key = 'vectors'")
    with Engine(store=store) as engine:
        assert hit_ids(engine) and engine.embedder.name == FP32
    with Engine(store=store) as engine:
        assert recorded(engine) == (FP32,)


def test_an_explicit_encoder_is_still_refused_by_another_encoders_vectors(write_jsonl, tmp_path):
    log = write_jsonl("log.jsonl", BOOKING + REFUND)
    int8_store, fp32_store = tmp_path / "int8", tmp_path / "fp32"
    with Engine(store=int8_store) as engine:
        engine.ingest([log])
    with Engine(store=fp32_store, overrides={"embedder.encoder": "onnx"}) as engine:
        engine.ingest([log])
    for store, encoder in ((int8_store, "onnx"), (int8_store, "torch"), (fp32_store, "onnx-int8")):
        with Engine(store=store, overrides={"embedder.encoder": encoder}) as engine:
            with pytest.raises(ModelError, match="until|reindex"):
                engine.query(QUESTION, touch=False)


def test_a_kill_after_the_first_batch_leaves_the_int8_record(write_jsonl, tmp_path):
    """The record commits in the first batch's transaction: the ingest is killed right after that batch
    (before the Engine lets the store go, where the record was once written), and the store still
    opens as int8, not as a store without a record (fp32)."""
    store = tmp_path / "s"
    log = write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)
    child = paused_cli(store, "ingest-batch", "ingest", log, timeout=300)  # after its first batch
    child.send_signal(signal.SIGKILL)
    child.wait()
    (store / (PAUSE_MARKER + "ingest-batch")).unlink()
    with Engine(store=store) as engine:
        assert recorded(engine) == (INT8,) and engine.embedder.name == INT8
        assert engine.store.con.execute("SELECT count(*) FROM records").fetchone()[0] > 0
        assert hit_ids(engine)


def test_a_fleet_worker_and_a_bench_take_an_existing_stores_encoder(write_jsonl, tmp_path):
    from helpers import load

    from expengine.config import Config
    from expengine.fleet.runtime import cached_embedder, store_engine

    store = tmp_path / "s"
    with Engine(store=store, overrides={"embedder.encoder": "onnx"}) as engine:
        engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND)])
        fp32_hits = hit_ids(engine)
    with store_engine(store) as engine:
        assert hit_ids(engine) == fp32_hits and engine.embedder.name == FP32
    assert cached_embedder(Config.load(store).embedder).name == INT8  # left as it is for the worker's new stores
    common = load("common")
    assert common.load_embedder(store).name == FP32 and common.load_embedder(tmp_path / "new").name == INT8
