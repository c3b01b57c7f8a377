"""The retrieval benchmarks stay runnable: their helpers on hand-made input, and each benchmark end to
end on a tiny slice of the real data (skipped when ../shared/data is not there)."""

from __future__ import annotations

import datetime as dt
import json
from types import ModuleType

import numpy as np
import pytest
from helpers import REPO, load, shared_data


@pytest.fixture(scope="module")
def locomo() -> ModuleType:
    return load("locomo")


@pytest.fixture(scope="module")
def tau() -> ModuleType:
    return load("tau")


# --- helpers, no data needed ---------------------------------------------------------------------------
def test_session_time_is_parsed_and_bad_one_names_the_expected_form(locomo):
    assert locomo.parse_session_time("1:56 pm on 8 May, 2023") == dt.datetime(2023, 5, 8, 13, 56)
    assert locomo.parse_session_time("12:09 am  on 13 September, 2023") == dt.datetime(2023, 9, 13, 0, 9)
    with pytest.raises(ValueError, match="1:56 pm on 8 May, 2023"):
        locomo.parse_session_time("yesterday evening")


def test_malformed_evidence_ids_are_normalised_or_reported(locomo):
    known = {"D8:6", "D9:17", "D11:26", "D1:3"}
    ids, malformed = locomo.normalise_evidence(["D8:6; D9:17", "D:11:26", "D", "D10:19", "D1:3", "D1:3"], known)
    assert ids == ["D8:6", "D9:17", "D11:26", "D1:3"]
    assert malformed == ["D", "D10:19"]


def test_turns_become_native_messages_with_captions(locomo):
    sample = {
        "sample_id": "s1",
        "conversation": {
            "session_2_date_time": "9:00 am on 2 June, 2023",
            "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "Look!", "blip_caption": "a photo of a cat"}],
            "session_1_date_time": "8:00 pm on 1 June, 2023",
            "session_1": [
                {"speaker": "Al", "dia_id": "D1:1", "text": "Hi"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Yo"},
            ],
        },
        "qa": [],
    }
    events = locomo.native_events(locomo.conversation_turns(sample), "s1")
    assert [e["id"] for e in events] == ["s1:D1:1", "s1:D1:2", "s1:D2:1"]
    assert events[1]["ts"] == "2023-06-01T20:00:01" and events[1]["session"] == "s1:session_1"
    assert events[2]["content"] == "Bo: Look! (shared image: a photo of a cat)"
    assert {e["kind"] for e in events} == {"message"} and {e["role"] for e in events} == {"user"}
    assert len(locomo.conversation_turns(sample, max_sessions=1)) == 2


def test_recall_counts_gold_turns_and_answer_words(locomo):
    question = locomo.Question(text="q", answer="7 May 2023", category=2, evidence=["D1:3", "D1:4"])
    row = locomo.score_prompt(
        question, "- [message, 2023-05-08] user: went on 7 May", {"c:D1:3", "c:D9:9", "x:D1:4"}, set(), "c"
    )
    assert row["evidence_recall"] == 0.5  # D1:4 of another conversation does not count
    assert row["evidence_recall_shown"] == 0.0
    assert row["answer_recall"] == 1.0  # 7, may, 2023 all appear (case-insensitive)


def test_runs_are_sliced_by_task_and_trials_are_grouped(tau):
    runs = [{"task_id": t, "trial": n} for n in range(3) for t in range(4)]
    kept = tau.select_runs(runs, tasks=2, trials=2)
    assert sorted((r["task_id"], r["trial"]) for r in kept) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    groups = [["task1/trial0/step3", "task1/trial2/step3"], ["task2/trial0/step1", "task3/trial0/step1"], ["x"]]
    assert tau.cross_trial_groups(groups) == {"groups": 3, "spanning_trials": 1, "tasks": 1, "task_ids": [1]}
    assert tau.names_tool("call book_reservation({})", {"book_reservation"})
    assert not tau.names_tool("call book_reservations_report()", {"book_reservation"})


def test_doc_sections_are_replaced_in_place_and_others_kept(tmp_path):
    update_doc_section = load("common").update_doc_section
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nintro\n", encoding="utf-8")
    update_doc_section(page, "locomo", "first")
    update_doc_section(page, "tau", "tau table")
    update_doc_section(page, "locomo", "second")
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n\nintro\n")
    assert "second" in text and "first" not in text and "tau table" in text
    assert text.index("<!-- locomo:start -->") < text.index("<!-- tau:start -->")


def test_bad_override_is_a_clear_error(locomo):
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        locomo.engine_overrides(locomo.parse_args(["--set", "query.gamma"]))
    assert locomo.engine_overrides(locomo.parse_args(["--set", "query.gamma=0"])) == {
        "llm.mode": "template",
        "query.gamma": "0",
    }
    assert locomo.engine_overrides(locomo.parse_args(["--llm"])) == {"llm.mode": "model"}


def test_missing_data_is_a_clear_error(locomo, tau, tmp_path):
    with pytest.raises(SystemExit, match="--data"):
        locomo.run(locomo.parse_args(["--data", str(tmp_path / "nope.json")]), echo=False)
    with pytest.raises(SystemExit, match="--data"):
        tau.run(tau.parse_args(["--data", str(tmp_path / "nope.json")]), echo=False)


# --- end to end on a tiny slice ------------------------------------------------------------------------
def test_locomo_runs_end_to_end_on_a_slice(locomo, embedder, tmp_path):
    data = shared_data("locomo/locomo_dev.json")
    out = tmp_path / "locomo.json"
    args = locomo.parse_args(
        [
            "--data",
            str(data),
            "--conversations",
            "1",
            "--sessions",
            "3",
            "--questions",
            "10",
            "--out",
            str(out),
            "--docs",
            str(tmp_path / "b.md"),
        ]
    )
    report = locomo.run(args, embedder=embedder, echo=False)
    saved = json.loads(out.read_text(encoding="utf-8"))
    assert saved["summary"].keys() == report["summary"].keys()
    methods = list(report["summary"])
    assert methods[0] == "BM25 over raw turns" and methods[1] == "expengine before compaction"
    assert methods[-1] == locomo.AFTER_LABEL and len(methods) == 2 + len(locomo.ABLATIONS) + 1
    conversation = report["conversations"][0]
    assert conversation["questions"] == 10 and conversation["stored"] == conversation["turns"]
    for entry in report["summary"].values():
        overall = entry["overall"]
        assert overall["questions"] == 10
        assert 0.0 <= overall["evidence_recall"] <= 1.0 and 0.0 <= overall["answer_recall"] <= 1.0
        assert overall["prompt_tokens"] <= args.budget
    after = report["summary"][locomo.AFTER_LABEL]["size"]
    assert after["raw"] == conversation["turns"] and after["active_plus_units"] == after["active"] + after["units"]
    assert len(conversation["cycles"]) == 3
    assert conversation["methods"][methods[0]] == report["summary"][methods[0]]["overall"]  # one conversation
    assert set(report["targets"]) == {
        "hot_text_share_of_raw",
        "answer_recall_vs_before",
        "evidence_recall_kept",
        "temporal_answer_recall_gain",
        "notes_unusable_of_20",
        "evidence_recall_over_bm25",
    }
    audit = report["note_audit"]
    assert 0 < audit["sampled"] <= 20 and audit["unusable"] == sum(bool(n["problems"]) for n in audit["sample"])
    assert all(n["sources"] and n["as_of"] for n in audit["sample"])  # every note cites its turns and has a day
    assert conversation["compaction_seconds"] >= conversation["notes_seconds"] > 0
    assert after["hot_tokens"] > 0 and after["hot_share"] == round(after["hot_tokens"] / after["raw_tokens"], 4)
    page = (tmp_path / "b.md").read_text(encoding="utf-8")
    assert "<!-- locomo:start -->" in page and "### Overall" in page and "--conversations 1" in page


def test_tau_runs_end_to_end_on_a_slice(tau, embedder, tmp_path):
    data = shared_data("tau_bench_airline/gpt-4o-airline_tasks00-39.json")
    out = tmp_path / "tau.json"
    args = tau.parse_args(["--data", str(data), "--tasks", "2", "--trials", "3", "--out", str(out)])
    report = tau.run(args, embedder=embedder, echo=False)
    assert json.loads(out.read_text(encoding="utf-8"))["runs"] == 6
    assert report["tasks"] == 2
    sizes = report["sizes"]
    assert sizes["after ingest"]["raw"] == report["stored"] == sizes["after compaction"]["raw"]
    assert sizes["after compaction"]["active"] < sizes["after ingest"]["active"]
    assert len(report["cycles"]) == 3
    queries = report["failed_run_queries"]
    assert (
        queries["after compaction"]["failed_runs"] == sum(1 for c in queries["per_run_after"]) == report["failed_runs"]
    )
    assert report["merged_trials"]["merges"]["tasks"] <= 2
    assert 0 < len(report["sample_units"]) <= 10
    assert all(u["text"] for u in report["sample_units"])
    assert "### Store size" in tau.render(report)


def test_swe_runs_end_to_end_on_a_slice(embedder, tmp_path):
    shared_data("swe_bench_verified_mini")  # bench/swe.py reads it from there
    swe = load("swe")
    out = tmp_path / "swe.json"
    args = swe.parse_args(["--runs", "8", "--cycles", "1", "--hold-back", "3", "--short-names", "--out", str(out)])
    report = swe.run(args, embedder=embedder, echo=False)
    saved = json.loads(out.read_text(encoding="utf-8"))
    assert saved["train_runs"] + saved["held_out_runs"] == 8
    sizes = report["sizes"]
    assert sizes["after ingest"]["raw"] == report["stored"] == sizes["after compaction"]["raw"]
    for measure in ("first_step", "error_recovery"):
        assert set(report[measure]) >= {"memory", "BM25 over raw training runs", "memory, short name"}
    assert (
        report["error_recovery"]["memory"]["steps"] == report["error_recovery"]["BM25 over raw training runs"]["steps"]
    )
    assert "first-step prompts naming the test runner" in swe.render(report)


def test_mixed_questions_name_answer_lines_that_are_in_their_logs():
    """bench/mixed.py's 10 Chinese and 10 English questions: each answer string is in its own log (and,
    for the Chinese ones, in no English log), so a hit that contains it is one of the answer lines."""
    questions = json.loads((REPO / "bench" / "mixed_questions.json").read_text(encoding="utf-8"))
    assert [len(questions["chinese"]), len(questions["english"])] == [10, 10]
    logs = {p.name: p.read_text(encoding="utf-8").lower() for p in (REPO / "sample_logs").glob("*.jsonl")}
    for language, asked in questions.items():
        for q in asked:
            assert any(a.lower() in logs[q["log"]] for a in q["answers"]), q
            if language == "chinese":
                english = [text for name, text in logs.items() if not name.startswith("zh_")]
                assert not any(a.lower() in text for a in q["answers"] for text in english), q


def test_memorybank_relevance_marks_absent_topics_and_silences_only_where_both_signals_are_low():
    """bench/relevance_memorybank.py's summary on hand-made answers: a borrowed question is absent
    only when none of its topic terms is in the user's talk, and the combined decision silences a
    low-cosine, low-evidence answer but not a high-cosine one whose words are missing."""
    bench = load("relevance_memorybank")
    user = {"cn": {"history": {"2023-05-01": [{"query": "我今天去绿禾公园散步了", "response": "听起来很好"}]}}}
    topics = {"park": ["绿禾公园"], "guitar": ["吉他"], "mood": []}
    borrowed = [
        {"question_key": "park", "best_similarity": 0.3, "lexical_evidence": 0.5},
        {"question_key": "guitar", "best_similarity": 0.3, "lexical_evidence": 0.05},
        {"question_key": "mood", "best_similarity": 0.5, "lexical_evidence": 0.0},
    ]
    own = [{"best_similarity": 0.6, "lexical_evidence": 0.0, "agrees": True}]
    store = {stage: {"own": own, "irrelevant": [dict(r) for r in borrowed]} for stage in ("before", "after")}
    bench.mark_absent([user], [store], topics)
    assert [r["absent"] for r in store["before"]["irrelevant"]] == [False, True, False]  # a date is never absent
    both = bench.shares([store["before"]], 0.22, 0.12, 0.32)
    assert both["irrelevant_share"] == 0.333 and both["absent_share"] == 1.0 and both["agreement_cost_points"] == 0
    words_alone = bench.shares([store["before"]], 0.22, 0.12, 1.0)  # the own paraphrase is silenced too
    assert words_alone["irrelevant_share"] == 0.667 and words_alone["agreement_cost_points"] == 100.0


def test_redundancy_counts_prompt_lines_that_repeat_another():
    redundancy = load("redundancy")
    prompt = "\n".join(
        [
            "Relevant experience (from past runs; verify before relying on it):",
            "- [outcome, 2026-04-03] refund approved (said 2 times, 3–9 April 2026)",
            "  - evidence (dormant): refund approved",
            "- [message, 2026-04-05] my dog is called Biscuit",
            "7 May 2023:",
            "- Caroline went to a support group",
        ]
    )
    texts = redundancy.line_texts(prompt)
    assert texts == [
        "refund approved",
        "refund approved",
        "my dog is called Biscuit",
        "Caroline went to a support group",
    ]
    vectors = {"refund approved": [1.0, 0.0], "my dog is called Biscuit": [0.0, 1.0]}
    vectors["Caroline went to a support group"] = [0.6, 0.8]
    assert redundancy.redundant_lines(texts, {t: np.array(v) for t, v in vectors.items()}) == 2
    assert len(redundancy.SAMPLE_QUESTIONS) == 50


def test_the_budget_sweep_averages_each_budget_before_and_after(locomo):
    rows = [{"answer_recall": 0.5, "evidence_recall": 1.0, "category": 4, "tokens": 200}]
    conversation = {"sample_id": "c", "sweep": {"before 250": rows, "after 250": rows + rows}}
    sweep = locomo.sweep_summary([conversation], [250])
    assert sweep["after 250"]["questions"] == 2 and sweep["before 250"]["single_hop_answer_recall"] == 0.5
    assert "| all           | 250    | 0.5 → 0.5" in locomo.render_sweep(sweep, [conversation])
