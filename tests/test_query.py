"""Query, feedback and show on a real store: hand-written logs ingested with the real embedder,
plus a few units written straight to DuckDB and indexed like refinement would."""

from __future__ import annotations

import datetime as dt
import json
import math
import subprocess
import sys

import pytest
from helpers import BASE, UNIT_TEXT, add_unit, cli, dump, ts_at
from typer.testing import CliRunner

from expengine.clock import utcnow
from expengine.errors import InputError, NotFoundError
from expengine.query.render import HEADER
from expengine.store.embeddings import VectorMemo
from expengine.store.index import UNITS
from expengine.store.reindex import unit_rows
from expengine.store.state import set_state
from expengine.textutil import approx_tokens

WEATHER_ERROR = "get_weather error: 429 Too Many Requests, rate limit exceeded"


# --- contract and provenance -------------------------------------------------------------------
def test_json_shape_and_provenance_of_all_three_hit_types(store):
    out = cli(store, "query", "get_weather 429 rate limit, retry?", "-k", "8", "--json", "--no-touch")
    assert out.exit_code == 0, out.output
    payload = json.loads(out.stdout)
    assert {"query", "hits", "prompt"} <= payload.keys()
    assert payload["query"] == "get_weather 429 rate limit, retry?"
    # a hit that repeats a line above is listed under that line's hit, with its type and sources
    by_id = {h["id"]: h for h in payload["hits"]} | {r["id"]: r for h in payload["hits"] for r in h["repeats"]}
    for hit in payload["hits"]:
        assert {"id", "type", "text", "score", "parts", "source_ids"} <= hit.keys()
        assert hit["type"] in ("unit", "memory")
        assert set(hit["parts"]) == {"similarity", "weight", "recency", "utility", "named_time"}
        assert all(0.0 <= hit["parts"][p] <= 1.0 for p in ("similarity", "weight", "recency", "named_time"))
    assert by_id["u-weather"]["type"] == "unit" and by_id["u-weather"]["source_ids"] == ["w1", "w3", "s3"]
    assert by_id["s1"]["type"] == "memory" and by_id["s1"]["source_ids"] == ["s1", "s2", "s3"]
    assert by_id["w4"]["source_ids"] == ["w4"]
    assert not {"s2", "s3", "d1"} & by_id.keys()  # archived and dormant stay out of the hot path
    assert payload["prompt"].startswith(HEADER)
    scores = [h["score"] for h in payload["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_score_is_the_documented_formula(engine_on):
    engine = engine_on(
        overrides={"query.alpha": 0.5, "query.beta": 0.3, "query.gamma": 0.15, "query.utility_weight": 0.05}
    )
    engine.store.con.execute(
        "UPDATE records SET weight = 1.7, utility = 0.4, last_access = ? WHERE id = 'w3'",
        [utcnow() - dt.timedelta(hours=10)],
    )
    hits = {h.id: h for h in engine.query("retry get_weather after 429", k=10, touch=False).hits}
    w3 = hits["w3"]
    assert w3.parts.weight == pytest.approx(1.7 / 2.7, abs=1e-5)
    assert w3.parts.utility == pytest.approx(math.tanh(0.4), abs=1e-5)
    assert w3.parts.recency == pytest.approx(0.995**10, abs=1e-3)
    for h in hits.values():
        p = h.parts
        assert h.score == pytest.approx(
            0.5 * p.similarity + 0.3 * p.weight + 0.15 * p.recency + 0.05 * p.utility, abs=1e-5
        )


# --- ranking -----------------------------------------------------------------------------------
# w1 and w2 say the same: a prompt shows them as one line (test_repeats.py); these tests rank them apart
UNFOLDED = {"query.repeat_similarity": "2"}


def _order(engine, text: str) -> list[str]:
    return [h.id for h in engine.query(text, k=10, touch=False, kind="tool_result").hits]


def test_weight_changes_the_order_as_configured(engine_on):
    engine = engine_on(overrides=UNFOLDED)
    first, second = _order(engine, WEATHER_ERROR)[:2]
    assert {first, second} == {"w1", "w2"}  # same text: only the fusion rank separates them
    engine.store.con.execute("UPDATE records SET weight = 3.0 WHERE id = ?", [second])
    assert _order(engine, WEATHER_ERROR)[:2] == [second, first]
    engine.close()
    blind = engine_on(overrides={**UNFOLDED, "query.beta": 0.0})
    boosted = _order(blind, WEATHER_ERROR)
    blind.store.con.execute("UPDATE records SET weight = 1.0 WHERE id = ?", [second])
    assert _order(blind, WEATHER_ERROR) == boosted  # beta = 0: weight plays no part


def test_recency_changes_the_order_as_configured(engine_on):
    engine = engine_on(overrides=UNFOLDED)
    first, second = _order(engine, WEATHER_ERROR)[:2]
    engine.store.con.execute("UPDATE records SET last_access = ? WHERE id = ?", [utcnow(), second])
    hits = engine.query(WEATHER_ERROR, k=2, touch=False, kind="tool_result").hits
    assert [h.id for h in hits] == [second, first]
    assert hits[0].parts.recency > 0.99 and hits[1].parts.recency < 0.05
    engine.close()
    blind = engine_on(overrides={**UNFOLDED, "query.gamma": 0.0})
    accessed = _order(blind, WEATHER_ERROR)
    blind.store.con.execute("UPDATE records SET last_access = NULL WHERE id = ?", [second])
    assert _order(blind, WEATHER_ERROR) == accessed  # gamma = 0: recency plays no part


def test_a_query_on_a_given_clock_ranks_alike_whatever_the_wall_clock(engine_on, monkeypatch):
    """Recency is measured from the query's `now`: a replay on its cycles' clock gives the same ranking at
    any hour, and only a query without one reads the wall clock."""
    from expengine.query import search

    engine = engine_on(overrides=UNFOLDED)
    first, second = _order(engine, WEATHER_ERROR)[:2]
    moment = utcnow()
    engine.store.con.execute("UPDATE records SET last_access = ? WHERE id = ?", [moment, second])

    def ranking(**clock) -> list[tuple[str, float]]:
        hits = engine.query(WEATHER_ERROR, k=5, touch=False, kind="tool_result", **clock).hits
        return [(h.id, h.score) for h in hits]

    asked = ranking(now=moment)
    assert [i for i, _ in asked[:2]] == [second, first]
    monkeypatch.setattr(search, "utcnow", lambda: moment + dt.timedelta(days=30))
    assert ranking(now=moment) == asked
    assert ranking() != asked  # read on the wall clock a month on, the access is old


def test_a_hit_about_the_day_the_query_names_ranks_above_its_twin(engine_on):
    """w1 and w2 say the same; the one on the day the question names comes first, by the `named_time`
    part (`query.named_time_weight` 0: the fusion order again)."""
    engine = engine_on(overrides=UNFOLDED)
    first, second = _order(engine, WEATHER_ERROR)[:2]
    day = BASE - dt.timedelta(days=3)
    engine.store.con.execute("UPDATE records SET ts = ? WHERE id = ?", [day, second])
    asked = f"{WEATHER_ERROR}, as on {day:%B} {day.day}, {day.year}"
    hits = engine.query(asked, k=10, touch=False, kind="tool_result").hits
    assert hits[0].id == second
    assert hits[0].parts.named_time == 1.0 and all(h.parts.named_time == 0.0 for h in hits[1:])
    assert _order(engine, WEATHER_ERROR)[:2] == [first, second]  # a query that names no day: no change
    engine.close()
    blind = engine_on(overrides={**UNFOLDED, "query.named_time_weight": 0.0})
    assert _order(blind, asked)[:2] == [first, second]


def test_the_times_a_query_names():
    from expengine.query.when import named_periods

    day = dt.date(2023, 10, 13)
    for text in ("What did Mel show on October 13, 2023?", "on the 13th of October 2023", "log of 2023-10-13"):
        assert named_periods(text) == [(day, day)], text
    assert named_periods("What did they paint in July 2023?") == [(dt.date(2023, 7, 1), dt.date(2023, 7, 31))]
    assert named_periods("December 2023") == [(dt.date(2023, 12, 1), dt.date(2023, 12, 31))]
    # a day named: its month is not a second period; no year, or no such day: nothing named
    assert named_periods("on 2 May 2023, in May 2023") == [(dt.date(2023, 5, 2), dt.date(2023, 5, 2))]
    assert named_periods("What did she do on 3 June?") == []
    assert named_periods("February 30, 2023 and may 2023") == [(dt.date(2023, 5, 1), dt.date(2023, 5, 31))]


# --- filters -----------------------------------------------------------------------------------
def test_filters(engine_on):
    engine = engine_on(overrides={"query.min_similarity": "0"})  # a filter may leave only far candidates
    text = "get_weather 429"

    def ids(**kw):  # the hits and the repeats folded under them
        return {i for h in engine.query(text, k=20, touch=False, **kw).hits for i in (h.id, *(r.id for r in h.repeats))}

    everything = ids()
    assert "u-weather" in everything and "c1" in everything
    assert ids(agent="coding-assistant") == {"c1"}
    assert ids(kind="rule") == {"u-weather"}
    assert ids(kind="fact") == set()
    assert ids(kind="tool_result") == {"w1", "w2"}
    assert ids(outcome="failure") == {"w1", "w2"}
    assert ids(outcome="success") == {"w3"}
    assert ids(goal="g1") == {"w1", "w3"}
    assert ids(category="booking") == {"f1", "f2"}
    assert ids(since=ts_at(9), kind="observation") == {"s1", "c1"}
    assert ids(until=ts_at(2), kind="tool_result") == {"w2", "w1"}
    assert "d1" not in everything and "d1" in ids(include_dormant=True)
    with pytest.raises(InputError):
        engine.query(text, kind="banana")
    with pytest.raises(InputError):
        engine.query(text, since="last tuesday")
    with pytest.raises(InputError):
        engine.query("   ")


def test_punctuation_and_empty_store_never_crash(engine_on, make_engine, tmp_path):
    engine = engine_on()
    for text in ['"unbalanced', "AND OR NOT (", "*?~^:", "get_weather(city='Oslo') -> 429!!", "😀"]:
        result = engine.query(text, touch=False)
        assert len(result.hits) <= 5
    empty = make_engine(tmp_path / "empty")
    result = empty.query("anything at all")
    assert result.hits == [] and result.prompt == ""


# --- budget and expansion ----------------------------------------------------------------------
def test_budget_stops_adding_hits(engine_on):
    engine = engine_on()
    text = "get_weather 429 retry"
    full = engine.query(text, k=6, touch=False, expand=False)
    assert len(full.hits) == 6
    budget = approx_tokens(full.prompt) - 1
    cut = engine.query(text, k=6, touch=False, expand=False, budget=budget)
    assert 0 < len(cut.hits) < 6
    assert approx_tokens(cut.prompt) <= budget
    assert [h.id for h in cut.hits] == [h.id for h in full.hits[: len(cut.hits)]]
    tiny = engine.query(text, k=6, touch=False, budget=approx_tokens(HEADER))
    assert tiny.hits == [] and tiny.prompt == ""


def test_unit_expansion_reaches_archived_sources(engine_on):
    engine = engine_on()
    result = engine.query("get_weather 429 retry", k=3, touch=False, kind="rule")
    unit = result.hits[0]
    assert unit.id == "u-weather"
    assert {e.id for e in unit.expanded} == {"w1", "w3", "s3"}
    assert {e.id: e.state for e in unit.expanded}["s3"] == "archived"
    sims = [e.similarity for e in unit.expanded]
    assert sims == sorted(sims, reverse=True)
    assert "evidence (archived)" in result.prompt
    assert engine.query("get_weather 429 retry", k=3, touch=False, kind="rule", expand=False).hits[0].expanded == []
    # a budget that fits the unit line but not all its evidence keeps the unit and drops evidence
    tight = approx_tokens(HEADER) + approx_tokens("- [rule] " + UNIT_TEXT) + 2
    clipped = engine.query("get_weather 429 retry", k=3, touch=False, kind="rule", budget=tight)
    assert [h.id for h in clipped.hits] == ["u-weather"] and clipped.hits[0].expanded == []


# --- reinforcement -----------------------------------------------------------------------------
def test_no_touch_leaves_the_store_unchanged(engine_on, store):
    engine = engine_on()
    before = dump(engine)
    assert engine.query("get_weather 429", k=5, touch=False).hits
    assert dump(engine) == before
    engine.close()
    assert cli(store, "query", "get_weather 429", "--no-touch", "--format", "prompt").exit_code == 0
    again = engine_on()
    assert dump(again) == before


def test_touch_reinforces_the_hits(engine_on):
    engine = engine_on()
    hits = engine.query("get_weather 429 retry", k=5).hits
    memory = next(h for h in hits if h.type == "memory")
    weight, count, last = engine.store.con.execute(
        "SELECT weight, access_count, last_access FROM records WHERE id = ?", [memory.id]
    ).fetchall()[0]
    assert weight == pytest.approx(1.0 + engine.config.decay.delta_access)
    assert count == 1 and (utcnow() - last).total_seconds() < 60
    unit_weight, used = engine.store.con.execute(
        "SELECT weight, last_used FROM units WHERE id = 'u-weather'"
    ).fetchall()[0]
    assert "u-weather" in {h.id for h in hits}
    assert unit_weight == pytest.approx(1.1) and used is not None
    untouched = engine.store.con.execute("SELECT weight, access_count FROM records WHERE id = 'f2'").fetchall()[0]
    assert untouched == (1.0, 0)


# --- feedback and quarantine -------------------------------------------------------------------
def test_feedback_moves_utility_and_quarantines_a_harmful_unit(engine_on, store):
    engine = engine_on()
    assert engine.feedback("w3", helpful=True).utility == pytest.approx(0.2)
    limit = engine.config.refine.harmful_quarantine
    results = [engine.feedback("u-weather", helpful=False, note="made it worse") for _ in range(limit)]
    assert [r.quarantined for r in results] == [False] * (limit - 1) + [True]
    assert results[-1].status == "quarantined" and results[-1].utility < 0
    assert "u-weather" not in {h.id for h in engine.query("get_weather 429 retry", k=10, touch=False).hits}
    with pytest.raises(NotFoundError):
        engine.feedback("no-such-id", helpful=True)
    with pytest.raises(InputError):
        engine.feedback("w3", helpful=None)
    engine.close()

    out = cli(store, "feedback", "u-weather", "--restore", "--note", "false alarm", "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["restored"] is True and json.loads(out.stdout)["status"] == "active"
    hits = json.loads(cli(store, "query", "get_weather 429 retry", "-k", "10", "--json", "--no-touch").stdout)["hits"]
    assert "u-weather" in {h["id"] for h in hits}
    shown = json.loads(cli(store, "show", "u-weather", "--json").stdout)
    assert [r["action"] for r in shown["history"]].count("feedback") == limit
    assert {"quarantined", "restored"} <= {r["action"] for r in shown["history"]}


def test_helpful_feedback_restores_a_quarantined_unit_when_net_helpful(engine_on):
    engine = engine_on(overrides={"refine.harmful_quarantine": 1})
    assert engine.feedback("u-weather", helpful=False).quarantined
    result = engine.feedback("u-weather", helpful=True)
    assert result.restored and result.status == "active"
    assert engine.store.index.count(UNITS, "id = 'u-weather'") == 1


def test_feedback_records_at_ingest_do_the_same(engine_on, write_jsonl):
    engine = engine_on(overrides={"refine.harmful_quarantine": 2})
    events = [
        {
            "id": f"fb{i}",
            "ts": ts_at(20 + i),
            "kind": "feedback",
            "agent": "support-bot",
            "feedback": {"signal": "negative", "target": "u-weather", "text": "wrong wait time"},
        }
        for i in range(2)
    ]
    engine.ingest([write_jsonl("feedback.jsonl", events)])
    assert engine.store.con.execute("SELECT status, harmful FROM units WHERE id = 'u-weather'").fetchall() == [
        ("quarantined", 2)
    ]


# --- show --------------------------------------------------------------------------------------
def test_show_record_and_unit(store):
    out = cli(store, "show", "s3", "--json")
    assert out.exit_code == 0, out.output
    s3 = json.loads(out.stdout)
    assert s3["type"] == "memory" and s3["item"]["state"] == "archived" and s3["merged_into"] == "s1"
    assert [u["id"] for u in s3["cited_by"]] == ["u-weather"]
    assert any(r["action"] == "state:archived" for r in s3["history"])
    assert set(s3["scores"]) >= {"weight", "utility", "recency"}
    s1 = json.loads(cli(store, "show", "s1", "--json").stdout)
    assert s1["source_ids"] == ["s1", "s2", "s3"]
    unit = json.loads(cli(store, "show", "u-weather", "--json").stdout)
    assert unit["type"] == "unit" and [s["id"] for s in unit["sources"]] == ["w1", "w3", "s3"]
    assert cli(store, "show", "u-weather").exit_code == 0  # the Rich rendering
    from expengine.cli import app

    missing = CliRunner().invoke(app, ["--store", str(store), "show", "nope"])
    assert isinstance(missing.exception, NotFoundError)


def test_table_and_prompt_formats(store):
    table = cli(store, "query", "get_weather 429", "--format", "table", "--no-touch")
    assert table.exit_code == 0 and "u-weather" in table.stdout
    prompt = cli(store, "query", "get_weather 429", "--format", "prompt", "--no-touch", "--budget", "60")
    lines = prompt.stdout.strip().splitlines()
    assert lines[0] == HEADER and all(line.startswith(("- [", "  - evidence")) for line in lines[1:])
    assert approx_tokens(prompt.stdout) <= 60


def test_refresh_indexes_and_a_units_table_without_fts(engine_on):
    from expengine.store.reindex import refresh_indexes

    engine = engine_on()
    engine.store.con.execute(
        """INSERT INTO units (id, kind, text, category, agent, support, confidence, source_ids, method, created, updated)
           VALUES ('u-fact', 'fact', 'The refund window for order A-77 is 30 days.', 'refund', 'support-bot', 1, 0.9,
                   '["r1"]', 'test', now()::TIMESTAMP, now()::TIMESTAMP)"""
    )
    engine.store.index.drop(UNITS)
    engine.store.index.add(UNITS, unit_rows(engine.store, "status = 'active'"))  # no FTS index: query builds it once
    assert "u-fact" in {h.id for h in engine.query("refund window A-77", k=3, touch=False, kind="fact").hits}
    assert "FTS" in {i.index_type for i in engine.store.index.table(UNITS).list_indices()}
    report = refresh_indexes(engine.store)
    assert report["memories"] == {"vector_index": False, "text_index": True}  # 12 rows < query.index_above
    assert report["units"]["text_index"] is True


# --- unit recency, evidence de-duplication, the reserved unit slot ----------------------------
def test_unit_recency_comes_from_its_sources_as_of_and_last_use_not_updated(engine_on):
    engine = engine_on()
    engine.store.con.execute("UPDATE units SET updated = ? WHERE id = 'u-weather'", [utcnow()])  # a refinement rewrite

    def unit_recency() -> float:
        return engine.query("get_weather 429 retry", k=1, touch=False, kind="rule").hits[0].parts.recency

    newest_source = BASE + dt.timedelta(minutes=11)  # s3, the newest of w1, w3, s3 (archived sources count)
    hours = (utcnow() - newest_source).total_seconds() / 3600
    assert unit_recency() == pytest.approx(0.995**hours, abs=1e-3) and unit_recency() < 0.1
    engine.store.con.execute("UPDATE units SET as_of = ? WHERE id = 'u-weather'", [utcnow() - dt.timedelta(hours=5)])
    assert unit_recency() == pytest.approx(0.995**5, abs=1e-3)
    engine.store.con.execute(
        "UPDATE units SET last_used = ? WHERE id = 'u-weather'", [utcnow() - dt.timedelta(hours=1)]
    )
    assert unit_recency() == pytest.approx(0.995**1, abs=1e-3)


def test_a_warm_engine_takes_unit_recency_from_memory_and_sees_another_process_change_a_source(engine_on, store):
    """A warm Engine derives each unit's newest source time once per version of the memo
    (`score.units_newest_source_ts`) and reads the sources of the hits shown only (`score.attach_sources`):
    the same recency and evidence as reading them all in the query (inside a transaction, no memo); a
    source's time changed by another process is seen by the next query."""
    engine = engine_on()
    engine.warm()
    now = utcnow()

    def recency_and_evidence() -> tuple[float, list[tuple[str, str, float]]]:
        hit = engine.query("get_weather 429 retry", k=1, touch=False, kind="rule", now=now).hits[0]
        return hit.parts.recency, [(e.id, e.state, e.similarity) for e in hit.expanded]

    warm = recency_and_evidence()
    with engine.session() as s:
        assert s.unit_rows.current(s.con, s.dir, in_transaction=s.in_transaction) is not None
        with s.transaction():
            assert recency_and_evidence() == warm
    assert {e[0] for e in warm[1]} == {"w1", "w3", "s3"} and warm[0] < 0.1
    script = (
        "import duckdb, sys; con = duckdb.connect(sys.argv[1]); con.execute(sys.argv[2], [sys.argv[3]]); con.close()"
    )
    newer = (now - dt.timedelta(hours=2)).isoformat()
    update = "UPDATE records SET ts = CAST(? AS TIMESTAMP) WHERE id = 'w1'"
    subprocess.run([sys.executable, "-c", script, str(store / "expengine.duckdb"), update, newer], check=True)
    for _ in range(2):  # the first query after a write reads DuckDB, the next one memory read again
        recency, evidence = recency_and_evidence()
        assert recency == pytest.approx(0.995**2, abs=1e-6) and evidence == warm[1]


def test_quoted_in_tolerates_labels_punctuation_and_clipped_tails():
    from expengine.query.render import quoted_in

    source = (
        "Caroline: I went to a LGBTQ support group yesterday and it was so powerful, honestly life-changing for me."
    )
    assert quoted_in(
        '- [fact] As of 2023-05-08 Caroline said: "I went to a LGBTQ support group yesterday and it was so '
        'powerful, honestly life-changing for me."',
        source,
    )
    assert quoted_in(
        '- [fact] Caroline said: "I went to a LGBTQ support group yesterday and it was so powerful, honestly…"', source
    )  # a clipped quote still carries most of it
    assert not quoted_in('- [fact] Caroline said: "I went to a LGBTQ support group yesterday…"', source)
    assert not quoted_in("- [fact] Caroline likes support groups.", source)
    assert not quoted_in("- [fact] ok thanks so much", "Mel: ok thanks")  # too short to call a quote


FLIGHT_FACT = 'As of 2026-03-01 the user said: "I need a flight from Denver to Tokyo on March 20, morning departure".'


def _flight_query(engine):
    return engine.query("flight from Denver to Tokyo, search_flights DEN NRT", k=10, touch=False)


def test_evidence_quoted_by_the_unit_or_shown_above_is_not_repeated(engine_on):
    # alpha = gamma = 0: the order follows weight alone, so the test decides who is above whom
    engine = engine_on(overrides={"query.alpha": 0.0, "query.gamma": 0.0})
    add_unit(engine, "u-flight", FLIGHT_FACT, ["f1", "f2"], kind="fact", category="booking")
    engine.store.con.execute("UPDATE units SET weight = 9 WHERE id = 'u-flight'")
    f1_text, f2_text = (
        engine.store.con.execute(f"SELECT text FROM records WHERE id = '{i}'").fetchall()[0][0] for i in ("f1", "f2")
    )

    result = _flight_query(engine)
    unit = result.hits[0]
    assert unit.id == "u-flight" and unit.source_ids == ["f1", "f2"]
    assert {e.id: e.quoted for e in unit.expanded} == {"f1": True, "f2": False}
    assert not {"f1", "f2"} & {h.id for h in result.hits if h.type == "memory"}  # shown under the unit already
    assert len(result.hits) > 1  # the other memories are still there
    under_unit = result.prompt.split("\n- [")[1].splitlines()[1:]
    assert under_unit == [f"  - evidence (active): {f2_text}"] and result.prompt.count(f2_text) == 1
    assert result.prompt.count("Denver to Tokyo") == 1
    payload = result.to_dict()["hits"][0]
    assert payload["source_ids"] == ["f1", "f2"] and [e["quoted"] for e in payload["expanded"]] == [True, False]

    # now the memory f2 outranks the unit: it is shown once, as a memory, and not again as evidence
    engine.store.con.execute("UPDATE records SET weight = 99 WHERE id = 'f2'")
    result = _flight_query(engine)
    assert [h.id for h in result.hits[:2]] == ["f2", "u-flight"]
    assert [e.id for e in result.hits[1].expanded] == ["f1"] and result.hits[1].source_ids == ["f1", "f2"]
    assert result.prompt.count(f2_text) == 1 and f1_text not in {h.text for h in result.hits if h.type == "memory"}


def cosines_to(engine, text: str, others: list[str]) -> list[float]:
    """The cosines a query of `text` computes: its vector embedded alone (`embed_query`), the others' as
    the store holds them. An int8 vector depends on the batch it was embedded in (activations are
    quantised per batch: cosine 0.96-0.99 to the same text alone), so one batch of them all is not it."""
    query = engine.embedder.encode([text])[0]
    return [float(query @ v) for v in engine.store.embeddings.encode(others)]


def test_one_slot_is_reserved_for_a_rule_above_the_similarity_floor(engine_on):
    text = "get_weather 429 retry"

    def top(floor: float) -> list:
        opened = engine_on(overrides={"query.unit_slot_floor": floor})
        hits = opened.query(text, k=3, touch=False).hits
        opened.close()
        return hits

    # a unit that makes the top k on its own: nothing is reserved or moved, whatever the floor
    assert "u-weather" in {h.id for h in top(2.0)}
    assert [h.id for h in top(-1.0)] == [h.id for h in top(2.0)]

    engine = engine_on()
    engine.store.con.execute("UPDATE units SET weight = 0")
    engine.store.con.execute("UPDATE records SET weight = 50")  # every memory now outranks the unit
    (cosine,) = cosines_to(engine, text, [UNIT_TEXT])
    engine.close()

    plain = top(cosine + 0.01)  # the unit is not close enough: the top 3 stay memories
    assert [h.type for h in plain] == ["memory"] * 3
    slotted = top(cosine - 0.01)
    assert [h.id for h in slotted] == [h.id for h in plain[:2]] + ["u-weather"]
    assert slotted[-1].source_ids == ["w1", "w3", "s3"]


def test_the_rule_slot_survives_the_candidate_cut_and_the_budget(engine_on):
    """More close memories than `query.candidates` must not hide the rule, nor may long memories
    above it in the prompt spend the budget it needs."""
    text = "get_weather 429 retry"
    engine = engine_on(overrides={"query.candidates": 2})
    engine.store.con.execute("UPDATE units SET weight = 0")
    engine.store.con.execute("UPDATE records SET weight = 50")
    full = engine.query(text, k=4, touch=False, expand=False)
    assert [h.type for h in full.hits] == ["memory"] * (len(full.hits) - 1) + ["unit"] and full.hits[-1].reserved
    assert len(full.hits) >= 3  # two candidates a list, yet the rule is found beyond them
    rule_line = approx_tokens(full.prompt.splitlines()[-1])
    budget = approx_tokens(HEADER) + rule_line + approx_tokens(full.prompt.splitlines()[1]) + 1
    cut = engine.query(text, k=4, touch=False, expand=False, budget=budget)
    assert [h.type for h in cut.hits] == ["memory", "unit"] and approx_tokens(cut.prompt) <= budget
    engine.close()


def test_identical_evidence_texts_and_texts_that_differ_only_in_ids_are_shown_once():
    from expengine.query.hits import Evidence, Hit, ScoreParts
    from expengine.query.render import render_prompt

    same = "get_weather error: 429 Too Many Requests"
    unit = Hit(
        id="u1",
        type="unit",
        text="When get_weather returns 429: wait 60 s and retry.",
        score=1.0,
        parts=ScoreParts(1, 1, 1, 0),
        source_ids=["e1", "e2", "e3"],
        kind="rule",
        state="active",
        agent="bot",
        category="error",
        ts=None,
        expanded=[
            Evidence("e1", same, "dormant", 0.9),
            Evidence("e2", same, "dormant", 0.9),
            Evidence("e3", "get_weather returned: sunny", "archived", 0.5),
            Evidence("e4", "goal open: check order W5065264 for user u-104", "dormant", 0.9),
            Evidence("e5", "goal open: check order W2685820 for user u-102", "dormant", 0.9),  # ids aside, e4
        ],
    )
    prompt, kept = render_prompt([unit], budget=None)
    assert prompt.count(same) == 1 and "sunny" in prompt and "W2685820" not in prompt
    assert kept[0].source_ids == ["e1", "e2", "e3"]
    assert [e.quoted for e in kept[0].expanded] == [False, True, False, False, True]


def test_evidence_similarity_is_the_cosine_of_each_source_text_in_any_state(engine_on):
    engine = engine_on()
    set_state(engine.store, ["w3"], "dormant", reason="test")  # sources: w1 active, w3 dormant, s3 archived
    text = "get_weather 429 retry"
    unit = engine.query(text, k=3, touch=False, kind="rule").hits[0]
    assert {e.id: e.state for e in unit.expanded} == {"w1": "active", "w3": "dormant", "s3": "archived"}
    expected = cosines_to(engine, text, [e.text for e in unit.expanded])
    assert [e.similarity for e in unit.expanded] == [round(c, 4) for c in expected]


def test_an_intent_rule_takes_the_slot_by_its_text_not_its_condition_vector(engine_on):
    """LanceDB embeds an intent rule's condition; the rule slot's floor is on the cosine of its text."""
    text = "get_weather 429 retry"
    engine = engine_on()
    condition = "the user asks about the weather in Paris"
    engine.store.con.execute("UPDATE units SET cluster_key = 'intent:weather', condition = ?, weight = 0", [condition])
    engine.store.index.add(UNITS, unit_rows(engine.store, "id = 'u-weather'"))
    engine.store.con.execute("UPDATE records SET weight = 50")
    by_text, by_condition = cosines_to(engine, text, [UNIT_TEXT, condition])
    assert by_condition < by_text - 0.02
    engine.close()
    for floor, slotted in ((by_text - 0.01, True), (by_text + 0.01, False)):
        opened = engine_on(overrides={"query.unit_slot_floor": floor})
        assert ("u-weather" in [h.id for h in opened.query(text, k=3, touch=False).hits]) is slotted
        opened.close()


def test_warm_reads_the_vectors_queries_compare_into_memory(engine_on):
    """A server warms at start: an intent rule's text (LanceDB holds its condition's vector) and the
    archived sources of units come from memory afterwards, never from a scan of the embedding cache."""
    engine = engine_on(overrides={"query.min_similarity": "0"})  # the condition vector is far from the query
    condition = "the user asks about the weather in Paris"
    engine.store.con.execute(
        "UPDATE units SET cluster_key = 'intent:weather', condition = ? WHERE id = 'u-weather'", [condition]
    )
    engine.store.index.add(UNITS, unit_rows(engine.store, "id = 'u-weather'"))
    before = engine.query("get_weather 429 retry", k=3, touch=False, kind="rule").to_dict()
    engine.store.embeddings.memo = VectorMemo()  # a fresh process
    assert engine.warm() >= 2  # the rule's text and its archived source s3
    engine.store.con.execute("DELETE FROM embeddings")
    after = engine.query("get_weather 429 retry", k=3, touch=False, kind="rule").to_dict()
    assert [h["id"] for h in after["hits"]] == ["u-weather"]
    # nothing was missing from memory: a miss would have embedded the text again and cached it
    assert engine.store.con.execute("SELECT count(*) FROM embeddings").fetchone() == (0,)
    assert {e["id"]: e["similarity"] for e in after["hits"][0]["expanded"]} == {
        e["id"]: e["similarity"] for e in before["hits"][0]["expanded"]
    }


def test_compacting_the_index_files_and_scalar_indexes_change_no_answer(engine_on):
    from expengine.store.index import MEMORIES
    from expengine.store.reindex import refresh_indexes

    engine = engine_on()
    set_state(engine.store, ["w1"], "dormant", reason="test")  # an update: LanceDB rewrites rows into a new fragment
    questions = ["get_weather 429 retry", "what did the user ask for", "refund"]

    def answers() -> list[tuple]:  # all but the times and recency, which move with the clock
        out = [engine.query(q, touch=False, include_dormant=True) for q in questions]
        return [
            (
                a.prompt,
                a.candidates,
                [(h.id, h.parts.similarity, [(e.id, e.similarity) for e in h.expanded]) for h in a.hits],
            )
            for a in out
        ]

    def fragments() -> int:
        return len(engine.store.index.table(MEMORIES).to_lance().get_fragments())

    for name in (MEMORIES, UNITS):  # full-text indexes over every row, as after a compaction without this step
        engine.store.index.refresh_text_index(name)
    before, scattered = answers(), fragments()
    refresh_indexes(engine.store)
    assert fragments() < scattered
    assert answers() == before


def test_evidence_lines_only_for_sources_related_to_the_query(engine_on):
    def evidence_lines(floor: float) -> int:
        engine = engine_on(overrides={"query.evidence_floor": floor})
        prompt = engine.query("get_weather 429 retry", k=6, touch=False).prompt
        engine.close()
        return sum(line.lstrip().startswith("- evidence") for line in prompt.splitlines())

    assert evidence_lines(-1.0) >= 1 and evidence_lines(1.01) == 0


def _unit_hit(engine, text: str = "get_weather 429 retry"):
    return next((h for h in engine.query(text, k=5, touch=False).hits if h.id == "u-weather"), None)


def test_a_warm_engine_reads_units_from_memory_and_sees_another_process_write(engine_on, store):
    """The units' columns queries read (`row_memo.unit_memo`: scoring, the rule slot, project rules,
    noted turns) are kept in memory by a warm Engine while the database files are unchanged: another
    process's write to `units` (a cron compaction between calls) is seen by the next query."""
    engine = engine_on()
    engine.warm()
    assert _unit_hit(engine) is not None
    with engine.session() as s:
        rows = s.unit_rows.current(s.con, s.dir, in_transaction=s.in_transaction)
        assert rows is not None, "the warm Engine answers from memory"
        assert s.unit_rows.read(s.con, ["u-weather"]) == [rows["u-weather"]], "memory and DuckDB give one row"
        assert rows["u-weather"].sources == ["w1", "w3", "s3"] and rows["u-weather"].text_keyed
    script = "import duckdb, sys; con = duckdb.connect(sys.argv[1]); con.execute(sys.argv[2]); con.close()"
    database = str(store / "expengine.duckdb")
    update = "UPDATE units SET weight = 40, category = 'environment', subject = 'acme/widgets' WHERE id = 'u-weather'"
    subprocess.run([sys.executable, "-c", script, database, update], check=True)
    for _ in range(2):  # the first query after a write reads DuckDB, the next one memory read again
        hit = _unit_hit(engine)
        assert hit is not None and abs(hit.parts.weight - 40 / 41) < 1e-6 and hit.category == "environment"
        named = engine.query("[acme/widgets] fix the flaky build", k=5, touch=False)
        assert "u-weather" in [h.id for h in named.hits], "a project rule written by another process"
    subprocess.run([sys.executable, "-c", script, database, "UPDATE units SET status = 'archived'"], check=True)
    assert _unit_hit(engine) is None and _unit_hit(engine) is None, "an archived unit is no candidate"


def test_a_unit_write_of_its_own_is_seen_by_the_next_query(engine_on):
    """A server holds the store open: its own writes to `units` (feedback, a cycle) are seen too."""
    engine = engine_on()
    with engine.session() as s:
        engine.warm()
        before = _unit_hit(engine)
        s.con.execute("UPDATE units SET weight = 40 WHERE id = 'u-weather'")
        assert s.unit_rows.current(s.con, s.dir, in_transaction=s.in_transaction) is None, "the files changed"
        after = _unit_hit(engine)
        assert before is not None and before.parts.weight < 40 / 41
        assert after is not None and abs(after.parts.weight - 40 / 41) < 1e-6
        with s.transaction():
            s.con.execute("UPDATE units SET weight = 0 WHERE id = 'u-weather'")
            assert s.unit_rows.current(s.con, s.dir, in_transaction=s.in_transaction) is None, "never in a transaction"
            hit = _unit_hit(engine)
            assert hit is not None and hit.parts.weight == 0.0


def test_the_units_vectors_held_in_memory_rank_as_lancedb_exact_search(engine_on):
    """The units' vector search runs on their vectors held in memory (`Index.held`): the same ids in the
    same order, and the same distances, as LanceDB's exact search, under every unit filter; a write to
    the table is seen by the next search."""
    from expengine.query.filters import Filters
    from expengine.query.retrieve import _vector_search

    engine = engine_on()
    store = engine.store
    add_unit(engine, "u-flight", "Book the aisle seat the user prefers on every flight.", ["f1"], category="booking")
    add_unit(engine, "u-code", "Run the tests before a commit.", ["c1"], agent="coding-assistant", category="code")
    add_unit(engine, "u-fact", "The user lives in Paris.", ["f2"], kind="fact", category="booking")
    add_unit(engine, "u-old", "Retry a failed refund after an hour.", ["w2"])
    store.con.execute("UPDATE units SET status = 'quarantined' WHERE id = 'u-old'")
    store.index.update(UNITS, ["u-old"], {"status": "quarantined"})
    held = store.index.held(UNITS)
    assert held is not None and len(held.ids) == 5
    filters = [
        Filters(),
        Filters(kind="rule"),
        Filters(kind="fact"),
        Filters(agent="coding-assistant"),
        Filters(category="booking"),
        Filters(since=utcnow() - dt.timedelta(days=11), until=utcnow()),
        Filters(since=utcnow() - dt.timedelta(days=9)),
    ]
    for text in ("get_weather 429 retry", "which seat on the plane", "where does the user live"):
        vector = store.embedder.encode([text])[0]
        for f in filters:
            lance = _vector_search(store, UNITS, vector, f.unit_where(), 50)
            memory = held.nearest(vector, f.unit_mask(held.columns), 50)
            assert [i for i, _ in memory] == [i for i, _ in lance], (text, f)
            assert all(abs(a - b) < 1e-6 for (_, a), (_, b) in zip(memory, lance))
    nearest_two = held.nearest(vector, Filters().unit_mask(held.columns), 2)
    assert [i for i, _ in nearest_two] == [
        i for i, _ in _vector_search(store, UNITS, vector, Filters().unit_where(), 2)
    ]
    assert "u-old" not in {i for i, _ in held.nearest(vector, Filters().unit_mask(held.columns), 50)}
    assert held.nearest(vector, Filters(since=utcnow() - dt.timedelta(days=9)).unit_mask(held.columns), 50) == []
    # the rule slot's vectors by id: what a LanceDB read by id gives
    read = store.index.vectors(UNITS, ["u-flight", "u-code", "missing"])
    assert held.by_id(["u-flight", "u-code", "missing"]).keys() == read.keys() == {"u-flight", "u-code"}
    assert all((held.by_id([i])[i] == read[i]).all() for i in read)
    add_unit(engine, "u-new", "Ask the user which city before booking a hotel.", ["f1"], category="booking")
    assert store.index.held(UNITS) is not held, "a write to the table is read again"
    assert "u-new" in {h.id for h in engine.query("which city for the hotel booking", kind="rule", touch=False).hits}
