"""Procedure rules of different intents that differ only in the value the user gives (a city, an order
id) are one rule whose condition names the slot, with the sources and counts of all; rules that give
the same fix in other words (the note a run wrote, an id, an argument's value) are one rule too."""

from __future__ import annotations

import datetime as dt

from helpers import write_refined

from expengine.lifecycle.refine.templates import Draft

WEATHER = "get_weather(city ← from the user, date ← chosen by the agent)"
RATE_LIMITED = "When get_weather fails with '429 Too Many Requests'"
NOW = dt.datetime(2026, 4, 30, 12, 0)


def _procedure(condition: str, sources: list[str], action: str = WEATHER, subject: str | None = None) -> Draft:
    return Draft(
        kind="rule",
        category="procedure",
        source_ids=sources,
        condition=condition,
        action=action,
        expected_outcome="get_weather succeeds and the request is done",
        subject=subject,
        as_of=NOW,
        successes=len(sources),
        trials=len(sources),
        success_rate=1.0,
    )


def _write(engine, key: str, draft: Draft) -> None:
    write_refined(engine, f"intent:support-bot:{key}", draft, NOW)


def _live_rules(engine) -> list[dict]:
    return [u for u in engine.units(kind="rule") if u["status"] == "active"]


def test_city_variant_rules_merge_into_one_rule_naming_the_slot(make_engine):
    engine = make_engine(overrides={"llm.mode": "template"})
    _write(
        engine,
        "g1",
        _procedure("For requests like 'weather Chicago tomorrow?' / 'weather Chicago next week?'", ["a1", "a2"]),
    )
    _write(
        engine,
        "g2",
        _procedure("For requests like 'Do I need an umbrella in Boston this weekend?'", ["b1", "b2", "b3"]),
    )
    _write(engine, "g3", _procedure("For requests like 'How cold will it be in Rome on Friday?'", ["c1"]))
    (rule,) = _live_rules(engine)
    # examples taken in turn from the merged rule's and the newcomer's: each city has its turn
    assert rule["condition"] == (
        "For a weather request for a city (e.g. 'weather Chicago tomorrow?' / "
        "'How cold will it be in Rome on Friday?' / 'Do I need an umbrella in Boston this weekend?')"
    )
    assert rule["support"] == 6 and sorted(rule["source_ids"]) == ["a1", "a2", "b1", "b2", "b3", "c1"]
    assert (
        rule["text"].startswith("For a weather request for a city") and "(seen 6 times, 6/6 succeeded)" in rule["text"]
    )


def test_rules_without_a_slot_from_the_user_and_lessons_stay_apart(make_engine):
    engine = make_engine(overrides={"llm.mode": "template"})
    chosen = "get_weather(city ← chosen by the agent)"
    _write(engine, "g1", _procedure("For requests like 'weather here?'", ["a1"], action=chosen))
    _write(engine, "g2", _procedure("For requests like 'weather at home?'", ["b1"], action=chosen))
    _write(engine, "g3", _procedure("For requests like 'weather Oslo?'", ["c1"], subject="city"))
    _write(engine, "g4", _procedure("For requests like 'weather Lima?'", ["d1"], subject="city"))
    assert len(_live_rules(engine)) == 4


def test_the_slot_condition_names_the_topic_and_the_slot_with_their_articles():
    from expengine.lifecycle.refine.slots import slot_condition

    draft = _procedure("", ["a1"], action="get_user_details(user_id ← from the user)")
    assert slot_condition(draft, ["For requests like 'cancel my flight'"]) == (
        "For a user details request for a user id (e.g. 'cancel my flight')"
    )
    order = _procedure("", ["a1"], action="lookup_order(order_id ← from the user)")
    assert slot_condition(order, ["For requests like 'where is W1?'"]).startswith(
        "For an order request for an order id"
    )


def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def test_429_rules_that_differ_only_in_the_note_they_quote_merge_into_one_with_every_source(make_engine):
    engine = make_engine(overrides={"llm.mode": "template"})
    notes = [
        ("a", 14, "Rate limit hit on get_weather, sleeping 60s then retrying once."),
        ("b", 16, "Weather API returned 429 Too Many Requests. Backing off 60 seconds."),
        ("c", 6, "get_weather rate limited (429); waiting 60 s before retrying."),
        ("d", 4, "Immediate retry of get_weather after a 429 failed again; the API needs a 60 seco"),
    ]
    for prefix, n, note in notes:
        _write(
            engine, prefix, _procedure(RATE_LIMITED, _ids(prefix, n), action=f"note {note!r}, then rerun get_weather")
        )
    (rule,) = _live_rules(engine)
    assert rule["support"] == 40 and sorted(rule["source_ids"]) == sorted(i for p, n, _ in notes for i in _ids(p, n))
    assert sorted(engine.show(rule["id"]).source_ids) == sorted(rule["source_ids"])
    # worded as the best supported of them, with the counts of all
    assert (
        rule["action"]
        == "note 'Weather API returned 429 Too Many Requests. Backing off 60 seconds.', then rerun get_weather"
    )
    assert "(seen 40 times, 40/40 succeeded)" in rule["text"]


def test_an_error_that_differs_in_an_id_is_the_same_error_and_is_named_so(make_engine):
    engine = make_engine(overrides={"llm.mode": "template"})
    failed = "When lookup_order fails with 'order not found: {}'"
    _write(engine, "o1", _procedure(failed.format("W1083185"), ["a1", "a2", "a3"], action="rerun lookup_order"))
    _write(engine, "o2", _procedure(failed.format("W1779302"), ["b1", "b2"], action="rerun lookup_order"))
    (rule,) = _live_rules(engine)
    assert rule["condition"] == failed.format("…") and rule["support"] == 5


def test_a_tool_rule_that_differs_only_in_an_arguments_value_merges(make_engine):
    engine = make_engine(overrides={"llm.mode": "template"})
    to_use = "To get weather (get_weather)"
    _write(engine, "t1", _procedure(to_use, _ids("a", 6), action="call get_weather(city=…, date=…, units=metric)"))
    _write(engine, "t2", _procedure(to_use, ["b1"], action="call get_weather(city=Dublin, date=…, units=metric)"))
    (rule,) = _live_rules(engine)
    assert rule["action"] == "call get_weather(city=…, date=…, units=metric)" and rule["support"] == 7
    # a value the two do not share is no one's: the merged rule names it "…"
    _write(engine, "t3", _procedure(to_use, ["c1"], action="call get_weather(city=…, date=…, units=imperial)"))
    (rule,) = _live_rules(engine)
    assert rule["action"] == "call get_weather(city=…, date=…, units=…)" and rule["support"] == 8


def test_other_fixes_other_errors_other_tools_and_lessons_stay_apart(make_engine):
    engine = make_engine(overrides={"llm.mode": "template"})
    _write(engine, "f1", _procedure(RATE_LIMITED, ["a1"], action="note 'backing off', then rerun get_weather"))
    _write(engine, "f2", _procedure(RATE_LIMITED, ["b1"], action="rerun get_weather"))  # another fix
    not_found = "When get_weather fails with '404 city not found'"
    _write(engine, "f3", _procedure(not_found, ["c1"], action="note 'wrong city', then rerun get_weather"))
    forecast = "When get_forecast fails with '429 Too Many Requests'"
    _write(engine, "f4", _procedure(forecast, ["d1"], action="note 'slow down', then rerun get_forecast"))
    _write(engine, "f5", _procedure(RATE_LIMITED, ["e1"], action="note 'waiting', then rerun get_weather", subject="x"))
    # each stays its own unit (the other fix for the same error may lose the conflict, conflicts.py)
    assert sorted(u["source_ids"] for u in engine.units(kind="rule")) == [["a1"], ["b1"], ["c1"], ["d1"], ["e1"]]
