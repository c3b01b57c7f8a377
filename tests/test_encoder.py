"""The encoders: ONNX and torch MiniLM agree on real text; a store refuses another encoder's vectors
until reindex re-embeds them; the query, ingest and compaction path imports no torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import BOOKING, CHATTER, REFUND, run_offline_python

from expengine.errors import ModelError
from expengine.models.onnx import weights_file

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def sample_texts(n: int = 120) -> list[str]:
    """Real lines of the English sample logs, short and long (a few pass the 256-token cut)."""
    texts = []
    for name in ("support_bot.jsonl", "coding_assistant.jsonl", "companion.jsonl"):
        for line in (REPO / "sample_logs" / name).read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            texts.append(event.get("content") or json.dumps(event))
    return texts[:: max(1, len(texts) // n)][:n] + ["ok", " ".join(texts[:40])]


def test_onnx_and_torch_minilm_vectors_agree_on_real_text():
    from expengine.models.embedder import get_embedder

    texts = sample_texts()
    onnx, torch = get_embedder(encoder="onnx"), get_embedder(encoder="torch")
    assert type(onnx).__name__ == "OnnxEmbedder" and onnx.name == torch.name
    a, b = onnx.encode(texts), torch.encode(texts)
    cosine = (a * b).sum(axis=1)
    assert cosine.min() >= 0.99, cosine.min()
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    # a text alone (no padding) gets the vector it got inside a padded batch
    assert float(onnx.encode([texts[3]])[0] @ a[3]) > 0.9999


def test_each_encoder_runs_its_measured_batch_size_unless_one_is_set():
    from expengine.config import EmbedderConfig
    from expengine.models.embedder import ONNX_BATCH, TORCH_BATCH, get_embedder

    assert EmbedderConfig().batch_size == 0  # the default: the encoder's own size
    onnx = get_embedder(batch_size=EmbedderConfig().batch_size, encoder="onnx")
    assert onnx.batch_size == ONNX_BATCH == 16
    assert get_embedder(batch_size=ONNX_BATCH, encoder="onnx") is onnx  # one model for the same size
    assert get_embedder(encoder="torch").batch_size == TORCH_BATCH == 64
    assert get_embedder(batch_size=8, encoder="onnx").batch_size == 8  # a size set in the config wins


def test_a_long_text_runs_alone_and_short_ones_a_batch_at_a_time():
    """Each concurrent run holds its own activations: long texts together took 263 MB over the model."""
    from expengine.models.onnx import _batches

    runs = _batches(["x" * 20_000] * 3 + ["short text"] * 40, 16)
    assert [len(r) for r in runs] == [1, 1, 1, 16, 16, 8]


def test_int8_vectors_have_a_name_of_their_own():
    from expengine.models.embedder import get_embedder

    texts = sample_texts(40)
    int8, fp32 = get_embedder(encoder="onnx-int8"), get_embedder(encoder="onnx")
    assert int8.name != fp32.name
    cosine = (int8.encode(texts) * fp32.encode(texts)).sum(axis=1)
    assert 0.9 < cosine.mean() < 0.9999  # close, but not the same vectors


def test_a_store_refuses_another_encoders_vectors_until_reindexed(write_jsonl, tmp_path):
    from expengine import Engine

    store = tmp_path / "store"
    log = write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)
    with Engine(store=store, overrides={"embedder.encoder": "torch"}) as engine:
        engine.ingest([log])
        torch_hits = [h.id for h in engine.query("refund past the window", k=3, touch=False).hits]
    # fp32 ONNX writes the same vectors (measured above), so it opens the torch store as it is
    with Engine(store=store, overrides={"embedder.encoder": "onnx"}) as engine:
        assert [h.id for h in engine.query("refund past the window", k=3, touch=False).hits] == torch_hits
    with Engine(store=store, overrides={"embedder.encoder": "onnx-int8"}) as engine:
        with pytest.raises(ModelError, match="reindex"):
            engine.query("refund past the window", touch=False)
        with pytest.raises(ModelError, match="not interchangeable"):
            engine.ingest([log])
        assert engine.reindex()["memories"] > 0
        assert engine.query("refund past the window", k=3, touch=False).hits
    with Engine(store=store, overrides={"embedder.encoder": "torch"}) as engine:
        with pytest.raises(ModelError, match="all-MiniLM-L6-v2\\+int8"):
            engine.stats()


QUERY_WITHOUT_TORCH = """
import sys
from expengine import Engine
with Engine(store=sys.argv[1], overrides={"llm.mode": "template"}) as engine:
    engine.ingest([sys.argv[2]])
    engine.compact(refine=False)
    hits = engine.query("refund past the window", k=3, touch=False).hits
assert hits, "no hits"
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)
assert not heavy, heavy
print(len(hits))
"""


def test_ingest_compaction_and_query_import_no_torch(write_jsonl, tmp_path):
    log = write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)
    done = run_offline_python("-c", QUERY_WITHOUT_TORCH, str(tmp_path / "store"), log)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.strip()) > 0


def test_models_prepare_exports_once_into_the_cache_dir(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO), "EXPENGINE_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "expengine", "--store", str(tmp_path / "store"), "models", "prepare", "--json"]
    first = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    # on `auto`: fp32 (the source, and an older store's encoder) and int8 (a new store's)
    fp32, int8 = paths = json.loads(first.stdout)["onnx"]
    assert [Path(p).name for p in paths] == ["model.onnx", "model-int8.onnx"]
    assert Path(fp32).is_relative_to(tmp_path / "cache") and Path(fp32).stat().st_size > 10_000_000
    assert 0 < Path(int8).stat().st_size < Path(fp32).stat().st_size  # int8 MatMul weights; the embeddings stay fp32
    # the int8 weights lie beside the graph, so ONNX Runtime maps them (only the word embeddings used are held)
    assert weights_file(Path(int8)).stat().st_size > 10 * Path(int8).stat().st_size
    written = [Path(p).stat().st_mtime_ns for p in paths]
    again = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert json.loads(again.stdout)["onnx"] == paths and [Path(p).stat().st_mtime_ns for p in paths] == written
    assert not list(Path(fp32).parent.glob("*.part"))  # no half-written file left behind
    fp32_only = [*command[:5], "--set", "embedder.encoder=onnx", *command[5:]]
    done = subprocess.run(fp32_only, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert json.loads(done.stdout)["onnx"] == [fp32], done.stderr[-2000:]
    with_int8 = subprocess.run([*fp32_only, "--int8"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert json.loads(with_int8.stdout)["onnx"] == paths, with_int8.stderr[-2000:]


def test_an_int8_model_cached_whole_is_made_again_with_its_weights_beside_it(tmp_path, monkeypatch):
    """A cache from before the weights moved out: the next use quantises again, to the same weights."""
    import onnx

    from expengine.models.embedder import default_embedder_path
    from expengine.models.onnx import export

    monkeypatch.setenv("EXPENGINE_CACHE_DIR", str(tmp_path / "cache"))
    folder = Path(default_embedder_path())
    int8 = export(folder, int8=True)
    graph = onnx.load(str(int8))
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in graph.graph.initializer}
    onnx.save_model(graph, str(int8))  # the weights inside the graph, as cached before
    weights_file(int8).unlink()
    assert export(folder, int8=True) == int8 and weights_file(int8).exists()
    again = onnx.load(str(int8))
    assert all(np.array_equal(onnx.numpy_helper.to_array(t), weights[t.name]) for t in again.graph.initializer)
