"""Procedure rules of different intents that differ only in the value the user gives (a city, an order
id) are one rule whose condition names the slot, with the sources and counts of all."""

from __future__ import annotations

import datetime as dt

from expengine.lifecycle.refine.inputs import ClusterInput
from expengine.lifecycle.refine.report import RefineReport
from expengine.lifecycle.refine.templates import Draft
from expengine.lifecycle.refine.write import unit_row, write_units

WEATHER = "get_weather(city ← from the user, date ← chosen by the agent)"
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
    cluster = ClusterInput(f"intent:support-bot:{key}", "support-bot", f"sig-{key}", draft.source_ids)
    report = RefineReport(run_id=None, dry_run=False)
    write_units(engine.store, cluster, [(draft, unit_row(draft, cluster, NOW))], report, None, False, NOW)


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
