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


def _rule(engine, key: str, condition: str, action: str, sources: list[str], successes: int) -> str:
    """A rule of its own cluster, written as refinement writes it; its id."""
    from helpers import write_refined

    from expengine.lifecycle.refine.templates import Draft

    draft = Draft(
        kind="rule",
        category="procedure",
        source_ids=sources,
        condition=condition,
        action=action,
        as_of=DAY,
        successes=successes,
        trials=len(sources),
        success_rate=successes / len(sources),
    )
    return write_refined(engine, f"cluster:support-bot:{key}", draft, DAY)


def test_rules_with_the_same_fix_for_other_errors_are_one_line_naming_both_and_keeping_both_ids(make_engine):
    engine = make_engine(overrides={"llm.mode": "template"})
    declined = "When book_flight fails with 'payment declined: {}'"
    funds = _rule(engine, "f", declined.format("insufficient funds"), "rerun book_flight", ["a1", "a2", "a3", "a4"], 2)
    honor = _rule(engine, "h", declined.format("do not honor (code 05)"), "rerun book_flight", ["b1", "b2", "b3"], 1)
    expired = _rule(engine, "e", declined.format("card expired"), "call book_flight(date=…)", ["c1", "c2"], 0)
    # the same fix, but it mostly worked there: its counts are not the others'
    secure = _rule(engine, "s", declined.format("3-D Secure required"), "rerun book_flight", ["d1", "d2"], 2)
    assert len(engine.units(kind="rule")) == 4  # other errors: refinement keeps them apart
    result = engine.query("book_flight payment declined", k=5, touch=False)
    lines = [line for line in result.prompt.splitlines()[1:] if "rerun book_flight" in line]
    assert sorted(lines) == [
        "- [rule] When book_flight fails with 'payment declined: 3-D Secure required': rerun book_flight. (seen 2 "
        "times, 2/2 succeeded)",
        "- [rule] When book_flight fails with 'payment declined: insufficient funds', or 'payment declined: do not "
        "honor (code 05)': rerun book_flight. (seen 7 times, 3/7 succeeded)",
    ], result.prompt
    head = next(h for h in result.hits if h.id == funds)
    assert [(r.id, r.kind) for r in head.repeats] == [(honor, "rule")]
    # another fix is a line of its own; every id is in --json, and `show` reaches the folded rule
    assert {expired, secure} <= {h.id for h in result.hits}
    listed = json.loads(json.dumps(result.to_dict()))
    assert [r["id"] for h in listed["hits"] for r in h["repeats"]] == [honor]
    assert engine.show(honor).source_ids == ["b1", "b2", "b3"]


def test_conditions_join_where_they_part():
    from expengine.query.like_rules import joined

    assert joined(["When T fails with 'a: b'", "When T fails with 'a: c'"]) == "When T fails with 'a: b', or 'a: c'"
    assert (
        joined(["For requests like 'commit it'", "For requests like 'ship it' / 'push it'"])
        == "For requests like 'commit it', or 'ship it' / 'push it'"
    )
    assert joined(["When get_weather fails", "When get_user fails"]) == "When get_weather fails, or get_user fails"
    assert joined(["To search (search)", "Whenever it rains"]) == "To search (search), or whenever it rains"
    assert (
        joined(["当 book_train 报错“余票不足”时", "当 book_train 报错“无座”时"])
        == "当 book_train 报错“余票不足”时，或报错“无座”时"
    )


def test_the_vector_search_brings_each_memorys_stored_vector_and_folding_reads_no_other(
    make_engine, write_jsonl, monkeypatch
):
    """The memories' vector search returns each row's stored vector (`Retrieved.vectors`), the one
    `Index.vectors` reads by id; folding repeats takes those and reads LanceDB for none of its hits
    (where the memories' vectors are not held in memory, as with an IVF-PQ index)."""
    import numpy as np

    from expengine.query.filters import Filters
    from expengine.query.retrieve import retrieve
    from expengine.store.index import MEMORIES, Index

    engine = make_engine(overrides={"llm.mode": "template"})
    engine.ingest([write_jsonl("refunds.jsonl", _events())], fmt="native")
    store, text = engine.store, "refund approved for the order"
    found = retrieve(store, text, store.embedder.encode([text])[0], Filters())
    stored = store.index.vectors(MEMORIES, list(found.vectors))
    assert set(found.vectors) == {i for t, i in found.cosines if t == "memory"} == set(stored)
    assert all(found.vectors[i].dtype == np.float32 and np.array_equal(found.vectors[i], stored[i]) for i in stored)
    reads: list[str] = []
    original, held = Index.vectors, Index.held
    # as in a store with an IVF-PQ index, whose memories' vectors are not held in memory
    monkeypatch.setattr(Index, "held", lambda self, name: None if name == MEMORIES else held(self, name))
    monkeypatch.setattr(
        Index, "vectors", lambda self, name, ids, **kw: reads.append(name) or original(self, name, ids, **kw)
    )
    result = engine.query(text, k=4, touch=False)
    assert any(h.repeats for h in result.hits) and MEMORIES not in reads
