"""Each unit status change, through the one owner of the `units` table (store/units.py): DuckDB, the
history entry and the LanceDB index move together, and a repeated change writes nothing."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from expengine.store import unit_reads, units
from expengine.store.index import UNITS

NOW = dt.datetime(2026, 3, 10, 12, 0)
WEATHER = "When get_weather returns 429 Too Many Requests, wait 60 seconds and retry once."


def _unit(uid: str, text: str, *, kind: str = "rule", **extra) -> dict:
    return {
        "id": uid,
        "kind": kind,
        "text": text,
        "category": "weather",
        "agent": "bot",
        "support": 2,
        "confidence": 0.8,
        "source_ids": json.dumps(["r1", "r2"]),
        "method": "test",
        "created": NOW,
        "updated": NOW,
        **extra,
    }


@pytest.fixture
def store(make_engine):
    engine = make_engine()
    store = engine.store
    for uid, text in (("u-old", WEATHER), ("u-new", WEATHER + " Never call it twice per second.")):
        units.insert(store, _unit(uid, text), action="refined", detail={"cluster": "weather"}, now=NOW)
    units.index_journalled(store, ["u-old", "u-new"])
    return store


def _history(store, uid: str) -> list[tuple[str, str]]:
    return store.con.execute(
        "SELECT action, detail FROM history WHERE item_id = ? ORDER BY happened_at, action", [uid]
    ).fetchall()


def _indexed(store, uid: str) -> bool:
    return store.index.count(UNITS, f"id = '{uid}'") == 1


def test_an_inserted_active_unit_is_journalled_then_indexed(make_engine):
    store = make_engine().store
    units.insert(store, _unit("u-a", WEATHER), action="refined", now=NOW)
    pending = store.con.execute("SELECT id, target FROM pending_index").fetchall()
    assert pending == [("u-a", "unit")] and not _indexed(store, "u-a")
    units.index_journalled(store, ["u-a"])
    assert _indexed(store, "u-a") and store.con.execute("SELECT count(*) FROM pending_index").fetchall() == [(0,)]
    assert _history(store, "u-a") == [("refined", None)]


def test_a_superseded_unit_leaves_the_index_and_names_its_winner(store):
    later = NOW + dt.timedelta(hours=1)
    changed = units.set_status(store, ["u-old"], "superseded", winner="u-new", reason="cluster weather", now=later)
    assert changed == 1
    row = store.con.execute("SELECT status, superseded_by, updated FROM units WHERE id = 'u-old'").fetchall()
    assert row == [("superseded", "u-new", later)]
    assert ("superseded", "by u-new (cluster weather)") in _history(store, "u-old")
    assert not _indexed(store, "u-old") and _indexed(store, "u-new")


def test_superseding_twice_changes_nothing_the_second_time(store):
    assert units.set_status(store, ["u-old"], "superseded", winner="u-new", reason="first", now=NOW) == 1
    assert units.set_status(store, ["u-old"], "superseded", winner="u-new", reason="again", now=NOW) == 0
    assert [action for action, _ in _history(store, "u-old")].count("superseded") == 1


def test_a_quarantined_unit_leaves_the_index_but_stays_listed(store):
    assert units.set_status(store, ["u-old"], "quarantined", reason="3 harmful vs 0 helpful reports") == 1
    assert not _indexed(store, "u-old")
    assert [u["id"] for u in unit_reads.list_units(store, status="quarantined")] == ["u-old"]
    assert ("quarantined", "3 harmful vs 0 helpful reports") in _history(store, "u-old")


def test_a_restored_unit_comes_back_into_the_index(store):
    units.set_status(store, ["u-old"], "quarantined", reason="harmful")
    assert units.set_status(store, ["u-old"], "active", reason="false alarm") == 1
    assert _indexed(store, "u-old") and units.status_of(store, "u-old") == "active"
    assert ("restored", "false alarm") in _history(store, "u-old")
    assert units.set_status(store, ["u-old"], "active", reason="again") == 0  # already active


def test_a_restored_superseded_unit_forgets_its_winner(store):
    units.set_status(store, ["u-old"], "superseded", winner="u-new", reason="test")
    units.set_status(store, ["u-old"], "active", reason="the winner was wrong")
    assert store.con.execute("SELECT status, superseded_by FROM units WHERE id = 'u-old'").fetchall() == [
        ("active", None)
    ]
    assert _indexed(store, "u-old")


def test_quarantine_and_restore_through_feedback(make_engine):
    engine = make_engine(overrides={"refine.harmful_quarantine": 1})
    units.insert(engine.store, _unit("u-w", WEATHER), action="refined", now=NOW)
    units.index_journalled(engine.store, ["u-w"])
    assert engine.feedback("u-w", helpful=False).quarantined
    assert not _indexed(engine.store, "u-w")
    assert "u-w" not in {h.id for h in engine.query("get_weather 429 retry", k=10, touch=False).hits}
    result = engine.feedback("u-w", helpful=None, restore=True, note="false alarm")
    assert result.restored and result.status == "active" and _indexed(engine.store, "u-w")
    assert "u-w" in {h.id for h in engine.query("get_weather 429 retry", k=10, touch=False).hits}


def test_a_unit_of_a_new_kind_is_insertable_and_listed(make_engine):
    """The owner hardcodes no kind: a future producer (notes) writes through the same `insert`."""
    store = make_engine().store
    units.insert(store, _unit("u-note", "Never share booking references over chat.", kind="note"), action="noted")
    units.index_journalled(store, ["u-note"])
    assert [u["kind"] for u in unit_reads.list_units(store, kind="note")] == ["note"]
    assert _indexed(store, "u-note") and unit_reads.trace_unit(store, "u-note")["history"][0]["action"] == "noted"


def test_a_field_the_table_lacks_is_refused(make_engine):
    store = make_engine().store
    with pytest.raises(AssertionError, match="not unit fields"):
        units.insert(store, _unit("u-x", WEATHER, colour="red"), action="refined")
