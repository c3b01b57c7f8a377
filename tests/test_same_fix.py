"""Error rules that give the same fix in other words (the note a run wrote, an id) are one rule, with
the sources and counts of all, and the prompt shows it once."""

from __future__ import annotations

import datetime as dt

from expengine.lifecycle.refine.inputs import ClusterInput
from expengine.lifecycle.refine.report import RefineReport
from expengine.lifecycle.refine.templates import Draft
from expengine.lifecycle.refine.write import unit_row, write_units

NOW = dt.datetime(2026, 4, 30, 12, 0)
RATE_LIMITED = "When get_weather fails with '429 Too Many Requests'"


def _error_rule(sources: list[str], action: str, condition: str = RATE_LIMITED, subject: str | None = None) -> Draft:
    return Draft(
        kind="rule",
        category="error",
        source_ids=sources,
        condition=condition,
        action=action,
        pitfall="error '429 Too Many Requests' (2x)",
        subject=subject,
        as_of=NOW,
        successes=len(sources) // 2,
        trials=len(sources) // 2,
        success_rate=1.0,
    )


def _write(engine, key: str, draft: Draft) -> None:
    cluster = ClusterInput(key, "support-bot", f"sig-{key}", draft.source_ids)
    report = RefineReport(run_id=None, dry_run=False)
    write_units(engine.store, cluster, [(draft, unit_row(draft, cluster, NOW))], report, None, False, NOW)


def _live_rules(engine) -> list[dict]:
    return [u for u in engine.units(kind="rule") if u["status"] == "active"]


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
        _write(engine, f"c-{prefix}", _error_rule(_ids(prefix, n), f"note {note!r}, then rerun get_weather"))
    (rule,) = _live_rules(engine)
    assert rule["support"] == 40 and sorted(rule["source_ids"]) == sorted(i for p, n, _ in notes for i in _ids(p, n))
    # worded as the best supported of them, with the counts of all
    assert (
        rule["action"]
        == "note 'Weather API returned 429 Too Many Requests. Backing off 60 seconds.', then rerun get_weather"
    )
    assert "(seen 40 times, 20/20 succeeded)" in rule["text"]
    assert sorted(engine.show(rule["id"]).source_ids) == sorted(rule["source_ids"])


def test_an_error_that_differs_in_an_id_is_the_same_error_and_is_named_so(make_engine):
    engine = make_engine(overrides={"llm.mode": "template"})
    _write(
        engine,
        "c1",
        _error_rule(
            ["a1", "a2", "a3"], "rerun lookup_order", "When lookup_order fails with 'order not found: W1083185'"
        ),
    )
    _write(
        engine,
        "c2",
        _error_rule(["b1", "b2"], "rerun lookup_order", "When lookup_order fails with 'order not found: W1779302'"),
    )
    (rule,) = _live_rules(engine)
    assert rule["condition"] == "When lookup_order fails with 'order not found: …'"
    assert rule["support"] == 5


def test_other_fixes_other_errors_other_tools_and_lessons_stay_apart(make_engine):
    engine = make_engine(overrides={"llm.mode": "template"})
    _write(engine, "c1", _error_rule(["a1"], "note 'backing off', then rerun get_weather"))
    _write(engine, "c2", _error_rule(["b1"], "rerun get_weather"))  # a different fix
    _write(
        engine,
        "c3",
        _error_rule(
            ["c1"], "note 'wrong city', then rerun get_weather", "When get_weather fails with '404 city not found'"
        ),
    )
    _write(
        engine,
        "c4",
        _error_rule(
            ["d1"], "note 'slow down', then rerun get_forecast", "When get_forecast fails with '429 Too Many Requests'"
        ),
    )
    _write(engine, "c5", _error_rule(["e1"], "note 'waiting', then rerun get_weather", subject="get_weather"))
    # each stays its own unit (the other fix for the same error may lose the conflict, conflicts.py)
    assert sorted(u["source_ids"] for u in engine.units(kind="rule")) == [["a1"], ["b1"], ["c1"], ["d1"], ["e1"]]
