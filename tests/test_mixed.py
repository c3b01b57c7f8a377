"""Stores of English and Chinese logs together: each text embedded by the encoder that reads its script
(MiniLM for English, the multilingual model for Chinese), answering questions in both languages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import run_offline_python
from typer.testing import CliRunner

from expengine.cli import app
from expengine.engine import Engine
from expengine.errors import ModelError
from expengine.models.embedder import get_embedder
from expengine.models.mixed import encoder_of, reads_multilingual

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_logs"
MINILM_NAME = "all-MiniLM-L6-v2+int8"  # a new store's MiniLM vectors: int8 ONNX (`[embedder] encoder = "auto"`)
MIXED_NAME = f"{MINILM_NAME}|use-multilingual-v3"
ENGLISH = [
    "I live in Portland, Oregon, not Maine",
    "I really hate cilantro, it tastes like soap",
    "The deploy of billing-service failed with a 429 from the registry",
    "Book me an aisle seat on the flight to Denver",
] + [f"The nightly job {i} finished without errors and uploaded its report" for i in range(40)]
CHINESE = [
    "对了，我对海鲜过敏，订酒店早餐的时候注意一下",
    "坐高铁我喜欢靠窗的座位，记住哦",
    "我上个月搬到上海了，现在住在上海。",
    "永远不要给我订无座票，宁可换车次",
]


def write_log(path: Path, texts: list[str], prefix: str) -> str:
    rows = [
        {
            "id": f"{prefix}{i}",
            "kind": "message",
            "role": "user",
            "content": t,
            "agent": prefix,
            "ts": f"2024-01-01T00:{i:02d}:00",
        }
        for i, t in enumerate(texts)
    ]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    return str(path)


def test_each_text_gets_the_vector_of_the_encoder_that_reads_its_script():
    mixed = get_embedder(model="mixed")
    texts = ["I hate cilantro", "我对海鲜过敏", "git push 被拒绝了，用 --rebase 再试"]
    vectors = mixed.encode(texts)
    assert mixed.name == MIXED_NAME and vectors.shape == (3, 384 + 512)
    assert [reads_multilingual(t) for t in texts] == [False, True, True]
    english, multilingual = get_embedder(), get_embedder(model="multilingual")
    # the English text is MiniLM's vector in the first half, the Chinese ones USE's in the second
    assert np.allclose(vectors[0, :384], english.encode(texts[:1])[0], atol=1e-5) and not vectors[0, 384:].any()
    assert np.allclose(vectors[1:, 384:], multilingual.encode(texts[1:]), atol=1e-5) and not vectors[1:, :384].any()
    assert float(vectors[0] @ vectors[1]) == 0.0  # the two sets never meet
    # the encoder a query's cosines come from (what a per-encoder similarity floor is keyed by)
    assert [encoder_of(MIXED_NAME, t) for t in texts] == [MINILM_NAME] + ["use-multilingual-v3"] * 2
    assert encoder_of("all-MiniLM-L6-v2", "我对海鲜过敏") == "all-MiniLM-L6-v2"


def test_a_mixed_store_answers_chinese_from_the_chinese_log_and_english_from_the_english_one(tmp_path: Path):
    english = write_log(tmp_path / "en.jsonl", ENGLISH, "e")
    chinese = write_log(tmp_path / "zh.jsonl", CHINESE, "z")
    store = tmp_path / "s"
    with Engine(store=store, overrides={"query.min_similarity": 0}) as engine:
        result = engine.ingest([english, chinese])  # a Chinese file among English lines: the mixed model
        assert result.embedder == MIXED_NAME and result.warning is None and result.scripts["cjk"] < 0.2
        assert engine.query("用户对什么过敏", k=3, touch=False).hits[0].id == "z0"
        assert engine.query("用户搬家以后住在哪里", k=3, touch=False).hits[0].id == "z2"
        assert engine.query("which herb does the user hate", k=3, touch=False).hits[0].id == "e1"
        assert engine.query("what seat does the user want on planes", k=3, touch=False).hits[0].id == "e3"
    assert 'model = "mixed"' in (store / "config.toml").read_text(encoding="utf-8")
    with Engine(store=store) as engine:  # reopened: the same encoders, recorded in the store
        assert engine.embedder.name == MIXED_NAME
        assert engine.store.con.execute("SELECT value FROM store_meta WHERE key = 'vectors'").fetchone() == (
            MIXED_NAME,
        )
        assert engine.ingest([chinese]).warning is None
        assert engine.query("哪种车票不能订", k=3, touch=False).hits[0].id == "z3"
    (store / "config.toml").write_text('[embedder]\nmodel = "minilm"\n', encoding="utf-8")
    with Engine(store=store) as engine, pytest.raises(ModelError, match=re.escape(f"written by {MIXED_NAME}")):
        engine.query("which herb does the user hate", touch=False)


def test_a_store_that_picks_the_mixed_model_leaves_a_shared_embedder_to_the_next_new_store(tmp_path: Path):
    """A fleet worker shares one embedder between its stores (`fleet.runtime.cached_embedder`): a new
    store's pick gives that store an embedder of its own, and the next new store starts from `auto`."""
    from expengine.models.embedder import LazyEmbedder

    shared = LazyEmbedder()
    english = write_log(tmp_path / "en.jsonl", ENGLISH, "e")
    chinese = write_log(tmp_path / "zh.jsonl", CHINESE, "z")
    with Engine(store=tmp_path / "mixed", embedder=shared, overrides={"query.min_similarity": 0}) as engine:
        assert engine.ingest([english, chinese]).embedder == MIXED_NAME
        assert engine.embedder is not shared and engine.embedder.name == MIXED_NAME  # adopted when let go
        assert engine.query("用户对什么过敏", k=3, touch=False).hits[0].id == "z0"
    assert shared.name == MINILM_NAME
    with Engine(store=tmp_path / "english", embedder=shared) as engine:
        assert engine.ingest([english]).embedder == MINILM_NAME


def test_an_english_store_switches_to_mixed_with_one_command_and_keeps_its_english_vectors(tmp_path: Path):
    english = write_log(tmp_path / "en.jsonl", ENGLISH, "e")
    chinese = write_log(tmp_path / "zh.jsonl", CHINESE, "z")
    store = tmp_path / "s"
    with Engine(store=store) as engine:
        assert engine.ingest([english]).embedder == MINILM_NAME
        warning = engine.ingest([chinese]).warning
        assert warning and "`expengine reindex --model mixed`" in warning
    cli = CliRunner().invoke(app, ["--store", str(store), "reindex", "--model", "mixed", "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout)["memories"] == len(ENGLISH) + len(CHINESE)
    with Engine(store=store, overrides={"query.min_similarity": 0}) as engine:
        assert engine.query("用户对什么过敏", k=3, touch=False).hits[0].id == "z0"
        assert engine.query("which herb does the user hate", k=3, touch=False).hits[0].id == "e1"
        assert engine.store.text_tokenizer == "icu"
        # each half's vectors are cached under its own model: the English ones MiniLM wrote before
        cached = dict(engine.store.con.execute("SELECT model, count(*) FROM embeddings GROUP BY model").fetchall())
        assert cached == {MINILM_NAME: len(ENGLISH) + len(CHINESE), "use-multilingual-v3": len(CHINESE)}


def test_the_demo_store_of_all_sample_logs_takes_the_mixed_model(tmp_path: Path):
    """README's set-up command ingests every sample log into one store: English and Chinese."""
    with Engine(store=tmp_path / "demo", overrides={"llm.mode": "template", "query.min_similarity": 0}) as engine:
        result = engine.ingest([str(SAMPLES)])
        assert result.embedder == MIXED_NAME and result.warning is None
        assert any("海鲜过敏" in h.text for h in engine.query("用户对什么过敏", k=3, touch=False).hits)
        assert any("cilantro" in h.text for h in engine.query("which herb does the user hate", k=3, touch=False).hits)


QUERY_WITHOUT_TORCH = """
import sys
from expengine.engine import Engine
with Engine(store=sys.argv[1]) as engine:
    engine.ingest(sys.argv[2:])
with Engine(store=sys.argv[1], overrides={"query.min_similarity": 0}) as engine:
    hits = [engine.query(q, k=1, touch=False).hits[0].id for q in ("用户对什么过敏", "which herb does the user hate")]
heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers", "tensorflow") if m in sys.modules)
assert not heavy, heavy
print(" ".join(hits))
"""


def test_a_mixed_store_ingests_and_answers_without_torch(tmp_path: Path):
    logs = [write_log(tmp_path / "en.jsonl", ENGLISH, "e"), write_log(tmp_path / "zh.jsonl", CHINESE, "z")]
    done = run_offline_python("-c", QUERY_WITHOUT_TORCH, str(tmp_path / "store"), *logs)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["z0", "e1"]


def test_count_scripts_counts_ascii_text_as_the_word_by_word_count_does():
    from collections import Counter

    from expengine.textutil import count_scripts

    texts = ["Please help with order 42, refund_order ok", "我对海鲜过敏 but fine", "naïve café", "", "123 _ ..."]
    # the ASCII text's words are latin; the others still go word by word (and add to the same counter)
    assert count_scripts(texts[:1]) == Counter(latin=7)  # refund_order is two words
    assert count_scripts(texts) == Counter(latin=11, cjk=6)  # as word by word (the code before, on main)
