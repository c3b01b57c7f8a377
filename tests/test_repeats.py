"""A prompt says each thing once: hits that repeat a better one fold into its line with a count and
the span of days, their slots go to the next distinct hits, and every folded id stays in the answer."""

from __future__ import annotations

import datetime as dt
import json

from typer.testing import CliRunner

from expengine.query.hits import Hit, Repeat, ScoreParts
from expengine.query.render import hit_line

DAY = dt.datetime(2026, 4, 3, 10, 0)


def _event(n: int, content: str, day: int, kind: str = "outcome") -> dict:
    event = {
        "id": f"r{n}",
        "ts": (DAY + dt.timedelta(days=day)).isoformat() + "Z",
        "kind": kind,
        "agent": "support-bot",
        "session": f"s{n}",
        "content": content,
    }
    if kind == "outcome":
        event["outcome"] = "success"
    else:
        event["role"] = "user"
    return event


def _events() -> list[dict]:
    said = [
        _event(n, "Refund approved for order W100; the customer gets the money back in 5 days.", day)
        for n, day in enumerate((0, 6, 15, 24))
    ]
    others = [
        "Refunds over 500 dollars need a supervisor's approval before request_refund is called.",
        "The refund form asks for the order number and the card's last four digits.",
        "A refund for a cancelled flight goes back to the original card.",
    ]
    return said + [_event(10 + n, text, 25 + n, kind="message") for n, text in enumerate(others)]


def test_near_duplicate_hits_fold_into_one_line_with_a_count_and_keep_their_ids(make_engine, write_jsonl):
    engine = make_engine(overrides={"llm.mode": "template"})
    engine.ingest([write_jsonl("refunds.jsonl", _events())], fmt="native")
    result = engine.query("refund approved for the order", k=4, touch=False)
    lines = result.prompt.splitlines()[1:]
    repeated = [line for line in lines if "Refund approved" in line]
    assert len(repeated) == 1 and repeated[0].endswith("(said 4 times, 3–27 April 2026)"), result.prompt
    head = next(h for h in result.hits if "Refund approved" in h.text)
    assert {head.id, *(r.id for r in head.repeats)} == {"r0", "r1", "r2", "r3"}
    # the three freed slots went to the three distinct statements
    assert len(result.hits) == 4 and {h.id for h in result.hits} - {head.id} == {"r10", "r11", "r12"}
    listed = json.loads(json.dumps(result.to_dict()))
    assert sorted(r["id"] for h in listed["hits"] for r in h["repeats"]) == sorted({"r0", "r1", "r2", "r3"} - {head.id})
    from expengine.cli import app

    folded, folder = head.repeats[0].id, str(engine.store.dir)
    engine.close()  # the CLI opens the store itself
    shown = CliRunner().invoke(app, ["--store", folder, "show", folded, "--json"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["item"]["id"] == folded


def test_a_repeat_that_holds_the_kept_text_shows_its_longer_words(make_engine, write_jsonl):
    events = [
        _event(1, "I hate cilantro", 0, kind="message"),
        _event(2, "I hate cilantro, it tastes like soap to me", 3, kind="message"),
        _event(3, "My dog Biscuit loves the park by the river", 4, kind="message"),
    ]
    engine = make_engine(overrides={"llm.mode": "template"})
    engine.ingest([write_jsonl("cilantro.jsonl", events)], fmt="native")
    result = engine.query("I hate cilantro", k=2, touch=False)
    cilantro = [h for h in result.hits if "cilantro" in h.text]
    assert len(cilantro) == 1 and "soap" in cilantro[0].text and len(cilantro[0].repeats) == 1, result.prompt
    assert "(said 2 times, 3–6 April 2026)" in result.prompt


def test_the_count_line_names_the_days_across_months_and_years():
    def hit(*days: dt.datetime) -> Hit:
        parts = ScoreParts(1.0, 0.0, 0.0, 0.0)
        h = Hit("a", "memory", "same words", 1.0, parts, ["a"], "message", "active", "x", "", days[0])
        h.repeats = [Repeat(f"r{n}", "memory", d, [f"r{n}"]) for n, d in enumerate(days[1:])]
        return h

    assert hit_line(hit(DAY)) == "- [message, 3 April 2026] same words"  # the words a question says
    assert hit_line(hit(DAY, DAY)).endswith("(said 2 times, 3 April 2026)")
    assert hit_line(hit(DAY, dt.datetime(2026, 5, 2))).endswith("(said 2 times, 3 April – 2 May 2026)")
    late = dt.datetime(2025, 12, 30)
    assert hit_line(hit(late, DAY, DAY)).endswith("(said 3 times, 30 December 2025 – 3 April 2026)")


def test_hits_that_differ_only_in_an_id_or_a_path_are_one_line(make_engine, write_jsonl):
    events = [
        _event(1, "lookup_order failed: order not found W1083185, asked the user to check the number", 0),
        _event(2, "lookup_order failed: order not found W1779302, asked the user to check the number", 2),
        _event(3, "FAILED tests/test_transform.py::test_stock_never_negative - assert -1 >= 0", 3, kind="message"),
        _event(4, "FAILED tests/unit/test_models.py::test_stock_never_negative - assert -1 >= 0", 4, kind="message"),
        _event(5, "The customer wants the parcel sent to the new address on Elm Street", 5, kind="message"),
    ]
    engine = make_engine(overrides={"llm.mode": "template", "query.repeat_similarity": 0.9999})  # words, not vectors
    engine.ingest([write_jsonl("ids.jsonl", events)], fmt="native")
    result = engine.query("lookup_order order not found", k=3, touch=False)
    lines = [line for line in result.prompt.splitlines()[1:] if "order not found" in line]
    assert len(lines) == 1 and "(said 2 times" in lines[0], result.prompt
    head = next(h for h in result.hits if "order not found" in h.text)
    assert {head.id, *(r.id for r in head.repeats)} == {"r1", "r2"}
    result = engine.query("test_stock_never_negative failed", k=3, touch=False)
    assert sum("test_stock_never_negative" in line for line in result.prompt.splitlines()) == 1, result.prompt
