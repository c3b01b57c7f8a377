"""The learning loop on a real store: what a query shows is what is reinforced and logged (never the
candidates below the cut), a query with nothing close answers "nothing relevant", unused units go
dormant and wake when a query shows them, and what woke says why in its history."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from helpers import add_unit, cli, dump

from expengine.clock import utcnow
from expengine.store import query_log, units
from expengine.store.index import UNITS
from expengine.store.state import set_state

WEATHER = "get_weather 429 Too Many Requests retry"


def _weights(engine, ids: list[str]) -> dict[str, float]:
    rows = engine.store.con.execute("SELECT id, weight FROM records WHERE id IN (SELECT unnest(?))", [ids])
    return dict(rows.fetchall())


def _history(engine, item_id: str) -> list[tuple[str, str]]:
    return engine.store.con.execute(
        "SELECT action, detail FROM history WHERE item_id = ? ORDER BY happened_at, action", [item_id]
    ).fetchall()


def test_the_query_log_records_only_what_the_prompt_showed(engine_on):  # noqa: F811
    engine = engine_on()
    candidates = engine.query(WEATHER, k=10, touch=False)
    before = _weights(engine, [h.id for h in candidates.hits if h.type == "memory"])
    result = engine.query(WEATHER, k=10, budget=45, session="run-7", goal_id="goal-7")
    assert 0 < len(result.hits) < len(candidates.hits)  # the budget cut some candidates
    shown_memories = {h.id for h in result.hits if h.type == "memory"} | {e.id for h in result.hits for e in h.expanded}
    (entry,) = query_log.entries(engine.store, session="run-7")
    assert entry["goal_id"] == "goal-7" and entry["query"] == WEATHER
    assert set(entry["unit_ids"]) == {h.id for h in result.hits if h.type == "unit"}
    assert set(entry["memory_ids"]) == shown_memories
    after = _weights(engine, list(before))
    delta = engine.config.decay.delta_access
    for record_id, weight in before.items():
        expected = weight + delta if record_id in shown_memories else weight
        assert after[record_id] == pytest.approx(expected), record_id  # below the cut: untouched


def test_a_query_below_the_similarity_floor_answers_nothing_relevant(engine_on, store):  # noqa: F811
    engine = engine_on()
    before = dump(engine)
    engine.close()
    floor = ["--set", "query.min_similarity=0.5"]
    answer = cli(store, *floor, "query", "what is the capital of France", "--session", "run-1", "--json")
    assert answer.exit_code == 0
    data = json.loads(answer.stdout)
    assert data["relevant"] is False and data["hits"] == [] and data["prompt"] == ""
    assert data["best_similarity"] < 0.5
    prompt = cli(store, *floor, "query", "what is the capital of France", "--format", "prompt")
    assert prompt.exit_code == 0 and prompt.stdout == ""
    again = engine_on()
    assert dump(again) == before  # nothing reinforced
    entries = query_log.entries(again.store)  # but both answers are logged: they showed nothing
    assert [e["session"] for e in entries] == ["run-1", None]
    assert all(e["unit_ids"] == [] and e["memory_ids"] == [] for e in entries)
    again.close()
    relevant = json.loads(cli(store, *floor, "query", WEATHER, "--no-touch", "--json").stdout)
    assert relevant["relevant"] is True and relevant["hits"] and relevant["best_similarity"] >= 0.5


def test_the_floor_is_the_one_of_the_store_encoder(engine_on):  # noqa: F811
    def answer(floors: dict[str, float]):
        engine = engine_on(overrides={"query.min_similarity": json.dumps(floors)})
        result = engine.query(WEATHER, touch=False)
        engine.close()
        return result

    strict = answer({"all-MiniLM-L6-v2": 0.99, "*": 0.0})  # this store's encoder: nothing reaches 0.99
    assert strict.relevant is False and strict.hits == [] and strict.best_similarity > 0.5
    assert answer({"use-multilingual-v3": 0.99, "*": 0.0}).hits  # another encoder's floor does not apply


def test_forget_removes_the_query_log_of_a_forgotten_session_and_forgotten_ids(engine_on):  # noqa: F811
    engine = engine_on()
    shown = engine.query(WEATHER, k=5, session="elsewhere")
    forgotten = next(h.id for h in shown.hits if h.type == "memory")
    engine.query(WEATHER, k=5, session="s1")
    engine.forget(ids=[forgotten])
    (entry,) = query_log.entries(engine.store, session="elsewhere")
    assert forgotten not in entry["memory_ids"] and entry["unit_ids"]
    assert query_log.entries(engine.store, session="s1")  # s1 still has records
    engine.query("import dotenv failed", k=5, session="other")  # words session c1 holds too
    engine.forget(sessions=["s1"])
    assert query_log.entries(engine.store, session="s1") == []
    # a query asked elsewhere whose words only s1's records held would keep them: it goes too
    assert query_log.entries(engine.store, session="elsewhere") == []
    assert query_log.entries(engine.store, session="other")


def test_an_unused_unit_goes_dormant_and_wakes_when_a_query_shows_it(engine_on):  # noqa: F811
    engine = engine_on()
    add_unit(engine, "u-pinned", "Always confirm the flight date with the user before search_flights.", ["f1"])
    engine.pin("f1")
    cfg = engine.config.decay
    cycles, now = 0, utcnow()
    engine.store.con.execute("UPDATE units SET created = ? WHERE id = 'u-weather'", [now])
    fresh = engine.decay(dry_run=False, now=now)  # a new unit is observed before it counts as unused
    assert engine.store.con.execute("SELECT weight FROM units WHERE id = 'u-weather'").fetchone()[0] == 1.0
    assert fresh.units_dormant == 0
    while engine.store.con.execute("SELECT status FROM units WHERE id = 'u-weather'").fetchone()[0] == "active":
        cycles += 1
        engine.decay(dry_run=False, now=now + dt.timedelta(hours=cfg.observation_window_hours + 25 * cycles))
        assert cycles <= 8, "an unused rule sleeps within 8 cycles at lambda 0.8"
    assert ("dormant", f"decay: unused, weight fell below theta_dormant {cfg.theta_dormant}") in _history(
        engine, "u-weather"
    )
    assert engine.store.index.count(UNITS, "id = 'u-weather' AND status = 'dormant'") == 1  # still findable
    assert engine.store.con.execute("SELECT status, weight FROM units WHERE id = 'u-pinned'").fetchone() == (
        "active",
        1.0,
    )  # it stands for a pinned record
    hits = engine.query("When get_weather returns 429 Too Many Requests, wait 60 seconds", k=5).hits
    woken = next(h for h in hits if h.id == "u-weather")
    assert woken.state == "dormant"  # as it was found; the answer then woke it
    status, weight = engine.store.con.execute("SELECT status, weight FROM units WHERE id = 'u-weather'").fetchone()
    assert status == "active" and weight == pytest.approx(cfg.theta_dormant + cfg.delta_access)
    assert ("woke", "shown by a query") in _history(engine, "u-weather")
    assert engine.store.index.count(UNITS, "id = 'u-weather' AND status = 'active'") == 1


def test_a_dormant_source_shown_as_evidence_wakes_with_a_history_line(engine_on):  # noqa: F811
    engine = engine_on()
    set_state(engine.store, ["w3"], "dormant", reason="covered by unit u-weather")
    result = engine.query("waited 60 seconds after the 429 and retried get_weather; the forecast came back", k=5)
    unit = next(h for h in result.hits if h.id == "u-weather")
    assert any(e.id == "w3" and e.state == "dormant" for e in unit.expanded)
    state, weight = engine.store.con.execute("SELECT state, weight FROM records WHERE id = 'w3'").fetchone()
    assert state == "active" and weight > 1.0
    assert ("state:active", "shown by a query") in _history(engine, "w3")


def test_why_explains_a_decayed_a_merged_and_a_superseded_item_and_revives_one(engine_on, store):  # noqa: F811
    engine = engine_on()
    engine.store.con.execute("UPDATE records SET weight = 0.1 WHERE id = 'd1'")
    set_state(engine.store, ["d1"], "active", reason="test")
    set_state(engine.store, ["d1"], "dormant", reason="decay: weight fell below theta_dormant 0.2")
    add_unit(engine, "u-old", "When get_weather returns 429, retry at once.", ["w1"])
    units.set_status(engine.store, ["u-old"], "superseded", winner="u-weather", reason="cluster weather")
    engine.close()
    out = cli(store, "why", "the weather provider rotates API keys on Sunday", "--limit", "10", "--json")
    assert out.exit_code == 0, out.output
    items = {i["id"]: i for i in json.loads(out.stdout)["items"]}
    decayed, merged, superseded = items["d1"], items["s2"], items["u-old"]
    assert decayed["status"] == "dormant" and decayed["step"] == "state:dormant"
    assert decayed["reason"].startswith("decay:") and decayed["weight"] == pytest.approx(0.1)
    assert merged["status"] == "archived" and merged["merged_into"] == "s1" and merged["reason"] == "merged into s1"
    assert superseded["type"] == "unit" and superseded["superseded_by"] == "u-weather"
    assert superseded["step"] == "superseded" and superseded["reason"] == "by u-weather (cluster weather)"
    assert max(items.values(), key=lambda i: i["similarity"])["id"] == "d1"
    revived = cli(store, "why", "the weather provider rotates API keys on Sunday", "--limit", "1", "--revive", "--json")
    (item,) = json.loads(revived.stdout)["items"]
    assert item["id"] == "d1" and item["revived"] is True
    again = engine_on()
    assert again.store.con.execute("SELECT state FROM records WHERE id = 'd1'").fetchone() == ("active",)
    assert ("state:active", "revived by why") in _history(again, "d1")
    assert again.store.con.execute("SELECT weight FROM records WHERE id = 'd1'").fetchone()[0] == pytest.approx(
        again.config.decay.theta_dormant
    )  # lifted so the next cycle does not put it straight back to sleep
    assert "d1" in {h.id for h in again.query("weather provider rotates API keys", k=10, touch=False).hits}
