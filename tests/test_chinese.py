"""Chinese and mixed-language logs with the default install: model choice, retrieval, full text, reindex."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from expengine.cli import app
from expengine.engine import Engine
from expengine.errors import InputError

pytestmark = pytest.mark.slow

MINILM_NAME = "all-MiniLM-L6-v2+int8"  # a new store's MiniLM vectors: int8 ONNX (`[embedder] encoder = "auto"`)
ZH = [
    "我给你推荐过一部叫《星际穿越》的科幻电影。",
    "今天我去了绿禾公园散步，看到了樱花。",
    "我对花生过敏，请不要推荐含花生的菜。",
    "明天要交季度报告，我很紧张。",
    "周末我们全家去海边露营了。",
]


def write_log(path: Path, texts: list[str], prefix: str = "r") -> Path:
    rows = [
        {
            "id": f"{prefix}{i}",
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


STRANGER = "我最近去厦门旅游了，厦门我最喜欢的景点是？"  # a MemoryBank user's question, about a trip
PARAPHRASE = "你推荐的那部太空电影叫什么名字"  # about ZH[0], in other words


def test_lexical_evidence_silences_a_strangers_question_only_where_the_cosine_is_low_too(tmp_path: Path) -> None:
    """The multilingual defaults: a question about a trip this store never heard of passes the cosine
    floor, yet none of its words are in the store; the store's own paraphrase shares few words too, but
    its cosine is above `query.lexical_max_similarity`, so its words are not read."""
    log = write_log(tmp_path / "zh.jsonl", ZH)
    with Engine(store=tmp_path / "s") as engine:
        engine.ingest([str(log)])
        query = engine.config.query
        floor, words, ceiling = (
            f("use-multilingual-v3") for f in (query.similarity_floor, query.lexical_floor, query.lexical_ceiling)
        )
        own = engine.query(PARAPHRASE, k=1, touch=False)
        assert (
            own.relevant and own.hits[0].id == "r0" and own.best_similarity > ceiling and own.lexical_evidence is None
        )
        stranger = engine.query(STRANGER, k=1, touch=False)
        assert floor <= stranger.best_similarity <= ceiling  # the cosine floor alone would answer it
        assert not stranger.relevant and stranger.hits == [] and stranger.lexical_evidence < words
    words_alone = {"query.min_lexical": '{"use-multilingual-v3": 0.15}', "query.lexical_max_similarity": "1"}
    with Engine(store=tmp_path / "s", overrides=words_alone) as engine:
        own = engine.query(PARAPHRASE, k=1, touch=False)  # why both: the words alone silence the paraphrase
        assert not own.relevant and own.lexical_evidence < 0.15
        english = engine.query("the sci-fi film I recommended", k=1, touch=False)  # across languages
        assert english.lexical_evidence == 1.0 and english.relevant and english.hits[0].id == "r0"
    with Engine(store=tmp_path / "s", overrides={"query.min_lexical": "0"}) as engine:  # off: the cosine alone
        result = engine.query(STRANGER, k=1, touch=False)
        assert result.relevant and result.lexical_evidence is None


def test_a_users_words_are_weighed_as_in_a_store_of_their_own(tmp_path: Path) -> None:
    """Lexical evidence in a store of many users counts each gram's rarity over what the asking user
    may be shown: another user who talks of parks all day does not make a park common for this one."""
    own = [json.loads(line) | {"user": "u-1"} for line in write_log(tmp_path / "zh.jsonl", ZH).read_text().splitlines()]
    other = [
        {**row, "id": f"x{n}", "user": "u-2", "content": f"我常去公园跑步，公园里人很多，第{n}次了。"}
        for n, row in enumerate(own)
    ]
    words_alone = {"query.min_lexical": '{"use-multilingual-v3": 0.15}', "query.lexical_max_similarity": "1"}
    evidence = {}
    for name, rows in (("alone", own), ("together", own + other)):
        log = tmp_path / f"{name}.jsonl"
        log.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
        with Engine(store=tmp_path / name, overrides=words_alone) as engine:
            engine.ingest([str(log)])
            evidence[name] = engine.query("我在哪个公园看到了樱花", k=1, touch=False, user="u-1").lexical_evidence
    assert 0 < evidence["together"] == evidence["alone"] < 1


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
        assert result.embedder == MINILM_NAME and result.scripts["cjk"] > 0.5
        assert result.warning and "multilingual" in result.warning and "reindex" in result.warning


def test_first_ingest_picks_the_embedder_from_all_its_files_and_one_command_switches_later(tmp_path: Path) -> None:
    english = write_log(tmp_path / "en.jsonl", ["The deploy failed with a 429", "I went running in the park"], "e")
    chinese = write_log(tmp_path / "zh.jsonl", ZH, "z")
    with Engine(store=tmp_path / "a") as engine:  # English comes first, but most of the words are Chinese
        assert engine.ingest([str(english), str(chinese)]).embedder == "use-multilingual-v3"
    lines = [f"The deploy of service {i} timed out, so we retried it after a minute and it worked" for i in range(60)]
    mostly_english = write_log(tmp_path / "ops.jsonl", lines, "o")
    with Engine(store=tmp_path / "m") as engine:  # a Chinese file among many English lines: the mixed model
        result = engine.ingest([str(mostly_english), str(chinese)])
        assert result.embedder == f"{MINILM_NAME}|use-multilingual-v3" and result.scripts["cjk"] < 0.1
        assert result.warning is None
    with Engine(store=tmp_path / "b") as engine:  # Chinese arriving in an English store: MiniLM, and it says so
        engine.ingest([str(mostly_english)])
        result = engine.ingest([str(chinese)])
        assert result.embedder == MINILM_NAME
        assert result.warning and f"{chinese} 100%" in result.warning
        assert "`expengine reindex --model mixed`" in result.warning
    cli = CliRunner().invoke(app, ["--store", str(tmp_path / "b"), "reindex", "--model", "multilingual", "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout)["memories"] == 65
    assert 'model = "multilingual"' in (tmp_path / "b" / "config.toml").read_text(encoding="utf-8")
    with Engine(store=tmp_path / "b") as engine:
        assert engine.query("你推荐的那部太空电影叫什么名字", k=1, touch=False).hits[0].id == "z0"
        assert engine.ingest([str(chinese)]).warning is None
        with pytest.raises(InputError, match="unknown embedder model 'klingon'"):
            engine.reindex(model="klingon")


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
        assert models == {MINILM_NAME, "use-multilingual-v3"}
        assert engine.query("running in the park", k=1, touch=False).hits[0].id == "r0"


def test_chinese_facts_are_extracted_and_rendered_in_chinese() -> None:
    import datetime as dt

    from expengine.lifecycle.refine.facts import extract_facts
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
    from helpers import assess_event

    def category(text: str) -> str:
        return assess_event(content=text).category

    assert category("好的，谢谢！") == "chatter"
    assert category("你好") == "chatter"
    assert category("好的，请帮我订明天去上海的机票") != "chatter"


SAMPLES = Path(__file__).resolve().parents[1] / "sample_logs"


def worded_in_english(rule: str) -> bool:
    """The English phrasebook's words (quotes of English tool output may start with 'To ' themselves)."""
    return rule.startswith(("When ", "To ", "For requests like")) or any(
        phrase in rule for phrase in ("fails with", "Expected:", "Pitfall:", "(seen ", "succeeded)")
    )


def test_chinese_sample_log_becomes_units_quoting_it_and_answers_chinese_questions(tmp_path: Path) -> None:
    with Engine(store=tmp_path / "s", overrides={"llm.mode": "template"}) as engine:
        result = engine.ingest([str(SAMPLES / "zh_travel_assistant.jsonl")])
        assert result.rejected == 0 and result.embedder == "use-multilingual-v3" and result.scripts["cjk"] > 0.5
        assert result.redacted_by_kind["CN_ID"] >= 1 and result.redacted_by_kind["CN_MOBILE"] == 1
        engine.compact()
        texts = [t for (t,) in engine.store.con.execute("SELECT text FROM units WHERE status = 'active'").fetchall()]
        # the lessons quote the log's Chinese verbatim: a sold-out train is rebooked after a new search,
        # a rate-limited weather call waits 60 seconds
        assert any("余票不足" in t and "search_trains" in t for t in texts)
        assert any("429 请求过于频繁，请60秒后重试" in t and "等待60秒后重试" in t for t in texts)
        # rules read as Chinese: the phrasebook words them, tool names and quotes stay as logged
        rules = [t for (t,) in engine.store.con.execute("SELECT text FROM units WHERE kind = 'rule'").fetchall()]
        assert rules and not [t for t in rules if worded_in_english(t)]
        assert any(t.startswith("当 book_train 报错“余票不足") and "重新调用 book_train" in t for t in rules)
        assert any(t.startswith("遇到类似“") and "（出现" in t for t in rules)
        # greetings and thanks sleep, never become units
        assert not any(chatter in t for t in texts for chatter in ("谢谢啦", "嗯嗯，辛苦了", "您好，请讲"))
        assert "海鲜过敏" in engine.query("我对什么过敏", k=1, touch=False).hits[0].text
        assert any("429" in h.text for h in engine.query("天气查询被限流了怎么办", k=3, touch=False).hits)
        assert "靠窗" in engine.query("坐火车喜欢什么座位", k=1, touch=False).hits[0].text


def test_chinese_sample_store_says_nothing_relevant_to_an_absent_topic_and_still_answers_the_allergy(
    tmp_path: Path,
) -> None:
    """A question about guitar lessons (another user's, on MemoryBank) against the travel assistant's
    log: close enough by cosine to pass the floor, but none of its words are there, so "nothing
    relevant" at the defaults, before and after a cycle; the allergy question is still answered."""
    with Engine(store=tmp_path / "s", overrides={"llm.mode": "template"}) as engine:
        engine.ingest([str(SAMPLES / "zh_travel_assistant.jsonl")])
        floor = engine.config.query.similarity_floor("use-multilingual-v3")

        def judged() -> None:
            guitar = engine.query("关于如何提高吉他技巧，你给了我什么建议？", k=1, touch=False)
            assert guitar.best_similarity >= floor and not guitar.relevant and guitar.hits == [] and guitar.prompt == ""
            allergy = engine.query("我对什么过敏", k=1, touch=False)
            assert allergy.relevant and "海鲜过敏" in allergy.hits[0].text

        judged()
        engine.compact()
        judged()


def test_mixed_sample_log_is_read_in_both_languages(tmp_path: Path) -> None:
    with Engine(store=tmp_path / "s", overrides={"llm.mode": "template"}) as engine:
        result = engine.ingest([str(SAMPLES / "zh_en_dev_helper.jsonl")])
        assert result.rejected == 0 and result.warning is None
        assert result.embedder == "use-multilingual-v3" and 0.2 < result.scripts["cjk"] < 0.5
        assert result.redacted_by_kind == {"API_KEY": 1, "CN_MOBILE": 1}
        texts = [h.text for h in engine.query("跑测试缺少依赖怎么办", k=5, touch=False).hits]
        assert any("pip_install" in t or "缺少依赖" in t for t in texts)
        texts = [h.text for h in engine.query("git push rejected non-fast-forward", k=5, touch=False).hits]
        assert any("non-fast-forward" in t for t in texts)
        assert any("--rebase" in h.text for h in engine.query("pull 的时候用什么方式", k=3, touch=False).hits)
        # a Chinese-speaking agent's rules are Chinese, even about English tool output
        engine.compact()
        rules = [t for (t,) in engine.store.con.execute("SELECT text FROM units WHERE kind = 'rule'").fetchall()]
        assert rules and not [t for t in rules if worded_in_english(t)]
        assert any(t.startswith("当 git_push 报错“! [rejected]") for t in rules)


def test_chinese_chatter_sleeps_in_the_cycle_and_content_stays() -> None:
    from expengine.lifecycle.chatter import Message, detect

    texts = ["谢谢啦", "嗯嗯，辛苦了", "在的，请说。", "好的，请帮我订明天去上海的机票", "在上海", "可以退吗"]
    verdicts = detect([Message(str(i), f"s{i}", t) for i, t in enumerate(texts)], min_sessions=100, session_share=1.0)
    assert {v.id for v in verdicts} == {"0", "1", "2"}
