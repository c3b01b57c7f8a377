"""Chinese and mixed-language logs with the default install: model choice, retrieval, full text, reindex."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from expengine.engine import Engine

pytestmark = pytest.mark.slow

ZH = [
    "我给你推荐过一部叫《星际穿越》的科幻电影。",
    "今天我去了绿禾公园散步，看到了樱花。",
    "我对花生过敏，请不要推荐含花生的菜。",
    "明天要交季度报告，我很紧张。",
    "周末我们全家去海边露营了。",
]


def write_log(path: Path, texts: list[str]) -> Path:
    rows = [
        {
            "id": f"r{i}",
            "kind": "message",
            "role": "user",
            "content": t,
            "agent": "a",
            "ts": f"2024-01-01T00:00:{i:02d}",
        }
        for i, t in enumerate(texts)
    ]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    return path


def test_chinese_store_takes_multilingual_embedder_and_finds_paraphrase(tmp_path: Path) -> None:
    log = write_log(tmp_path / "zh.jsonl", ZH)
    with Engine(store=tmp_path / "s") as engine:
        result = engine.ingest([str(log)])
        assert result.scripts["cjk"] == 1.0 and result.embedder == "use-multilingual-v3"
        hits = engine.query("你推荐的那部太空电影叫什么名字", k=1, touch=False).hits
        assert hits[0].id == "r0"
        assert engine.stats().scripts["cjk"] == 1.0
    assert 'model = "multilingual"' in (tmp_path / "s" / "config.toml").read_text(encoding="utf-8")
    with Engine(store=tmp_path / "s") as engine:  # the choice sticks
        assert engine.embedder.name == "use-multilingual-v3"


def test_chinese_full_text_search_finds_a_word_inside_a_clause(tmp_path: Path) -> None:
    log = write_log(tmp_path / "zh.jsonl", ZH)
    with Engine(store=tmp_path / "s") as engine:
        engine.ingest([str(log)])
        table = engine.store.index.table("memories")
        ids = table.search("樱花", query_type="fts").limit(3).select(["id"]).to_arrow().column("id").to_pylist()
        assert ids == ["r1"]


def test_english_store_warns_on_chinese_ingest_with_the_fix(tmp_path: Path, embedder) -> None:
    english = write_log(tmp_path / "en.jsonl", ["I went running in the park", "The deploy failed with a 429"])
    mixed = write_log(tmp_path / "zh.jsonl", ZH + ["OK, deploy again with retries"])
    with Engine(store=tmp_path / "s") as engine:
        assert engine.ingest([str(english)]).warning is None
        result = engine.ingest([str(mixed)])
        assert result.embedder == "all-MiniLM-L6-v2" and result.scripts["cjk"] > 0.5
        assert result.warning and "multilingual" in result.warning and "reindex" in result.warning


def test_reindex_after_embedder_change_re_embeds_with_the_new_model(tmp_path: Path) -> None:
    log = write_log(tmp_path / "en.jsonl", ["I went running in the park", "The deploy failed with a 429"])
    with Engine(store=tmp_path / "s") as engine:
        engine.ingest([str(log)])
        assert len(engine.store.index.table("memories").to_arrow().column("vector")[0]) == 384
    (tmp_path / "s" / "config.toml").write_text('[embedder]\nmodel = "multilingual"\n', encoding="utf-8")
    with Engine(store=tmp_path / "s") as engine:
        assert engine.reindex()["memories"] == 2
        assert len(engine.store.index.table("memories").to_arrow().column("vector")[0]) == 512
        models = {m for (m,) in engine.store.con.execute("SELECT DISTINCT model FROM embeddings").fetchall()}
        assert models == {"all-MiniLM-L6-v2", "use-multilingual-v3"}
        assert engine.query("running in the park", k=1, touch=False).hits[0].id == "r0"


def test_chinese_facts_are_extracted_and_rendered_in_chinese() -> None:
    import datetime as dt

    from expengine.lifecycle.refine.mine import extract_facts
    from expengine.lifecycle.refine.templates import Draft, render_text

    def facts(text: str) -> list[str]:
        record = {"kind": "message", "role": "user", "content": text, "ts": dt.datetime(2024, 5, 1), "id": "x"}
        return [f.statement for f in extract_facts(record)]

    assert facts("我叫张曼婷，很高兴认识你。") == ["用户叫张曼婷"]
    assert facts("我现在住在杭州。") == ["用户住在杭州"]
    assert facts("我对花生过敏，请注意。") == ["用户对花生过敏"]
    assert facts("我不喜欢香菜") == ["用户不喜欢香菜"]
    draft = Draft(
        kind="fact",
        category="fact",
        source_ids=["a", "b"],
        statement="用户住在杭州",
        as_of=dt.datetime(2024, 5, 1),
        previous_values=["上海"],
        agreeing=2,
    )
    text = render_text(draft)
    assert text.startswith("截至2024-05-01，用户住在杭州（此前：上海") and text.endswith("。")
    assert not any(word in text for word in ("As of", "previously", "stated"))


def test_chinese_chatter_gets_low_importance() -> None:
    from test_ingest_units import assess_event

    def category(text: str) -> str:
        return assess_event(content=text).category

    assert category("好的，谢谢！") == "chatter"
    assert category("你好") == "chatter"
    assert category("好的，请帮我订明天去上海的机票") != "chatter"
