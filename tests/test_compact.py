"""The forgetting cycle on real stores with the real embedding model: decay, goals, clusters, merge,
purge, forget, pin, dry run, snapshot/restore and the incremental second run."""

from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pytest
from helpers import BOOKING, CHATTER, REFUND, ev, state_of, weights

from expengine.errors import InputError, NotFoundError
from expengine.store.index import MEMORIES


@pytest.fixture
def store(make_engine, write_jsonl):
    """A store holding the booking, refund and chatter logs."""
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)])
    return engine


def table_contents(engine) -> dict[str, list]:
    """Every row of every table, sorted: what 'unchanged in content' means."""
    names = [
        n
        for (n,) in engine.store.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()
    ]
    return {n: sorted(map(repr, engine.store.con.execute(f"SELECT * FROM {n}").fetchall())) for n in sorted(names)}


# --- decay ------------------------------------------------------------------------------------------


def test_decay_arithmetic_by_category_importance_pin_and_protection(make_engine, write_jsonl):
    engine = make_engine(overrides={"decay.theta_dormant": "0.9"})
    engine.ingest(
        [
            write_jsonl(
                "d.jsonl",
                [
                    ev("fact", 0, "note", content="The office moved to Pier 39", category="fact", importance=0.5),
                    ev("proc", 1, "note", content="intermediate step 3 of 7", category="process", importance=0.4),
                    ev("chat", 2, "message", role="user", content="ok cool", category="chatter", importance=0.1),
                    ev("other", 3, "note", content="build 4411 shipped to staging", importance=0.5),
                    ev(
                        "important",
                        4,
                        "note",
                        content="database primary is db-7 in eu-west",
                        category="fact",
                        importance=0.9,
                    ),
                    ev("protected", 5, "message", role="user", content="never share my password with anyone"),
                    ev(
                        "pinned",
                        6,
                        "note",
                        content="process note that the user pinned",
                        category="process",
                        importance=0.4,
                    ),
                ],
            )
        ]
    )
    engine.pin("pinned")
    report = engine.decay(dry_run=False)
    w = weights(engine)
    assert w["fact"] == pytest.approx(0.95)
    assert w["proc"] == pytest.approx(0.85)
    assert w["chat"] == pytest.approx(0.80)
    assert w["other"] == pytest.approx(0.97)
    assert w["important"] == pytest.approx(1.0)  # 0.95 + 0.05 boost: λ = 1.0
    assert w["protected"] == w["pinned"] == 1.0
    # θ_dormant = 0.9: everything below went dormant, protected and pinned never do
    states = state_of(engine)
    assert {i for i, s in states.items() if s == "dormant"} == {"proc", "chat"}
    assert report.became_dormant == 2 and report.decayed == 4  # fact, proc, chat, other
    engine.decay(dry_run=False)
    assert weights(engine)["fact"] == pytest.approx(0.95**2)
    assert weights(engine)["proc"] == pytest.approx(0.85**2)  # dormant memories keep sinking toward θ_purge


def test_decay_dry_run_reports_without_writing(store):
    before = weights(store)
    report = store.decay(dry_run=True)
    assert report.decayed > 0 and report.mean_weight_after < report.mean_weight_before
    assert weights(store) == before


def test_pin_and_unpin_errors_and_revival(store):
    store.store.con.execute("UPDATE records SET state = 'dormant' WHERE id = 'c03'")
    assert store.pin("c03")["state"] == "active"
    assert state_of(store)["c03"] == "active"
    store.unpin("c03")
    assert not store.store.con.execute("SELECT pinned FROM records WHERE id = 'c03'").fetchall()[0][0]
    with pytest.raises(NotFoundError):
        store.pin("no-such-record")


def test_long_term_goal_slows_decay(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest(
        [
            write_jsonl(
                "lt.jsonl",
                [
                    ev(
                        "g",
                        0,
                        "goal",
                        goal_id="lt",
                        goal={"id": "lt", "status": "open", "description": "Track the user's diet", "long_term": True},
                    ),
                    ev("m", 1, "message", goal_id="lt", role="assistant", content="noted the lunch order"),
                    ev("x", 2, "message", role="assistant", content="noted the lunch order for the other team"),
                ],
            )
        ]
    )
    engine.decay(dry_run=False)
    w = weights(engine)
    assert w["m"] == pytest.approx(0.99) and w["x"] == pytest.approx(0.97)


# --- goal-linked cleanup ----------------------------------------------------------------------------


def test_goal_success_weakens_process_and_reinforces_lessons(store):
    cfg = store.config.decay
    report = store.goal_cleanup(dry_run=False)
    w = weights(store)
    assert report.goals_handled == {"succeeded": 1, "failed": 1}
    lessons = {"b01", "b12", "b13", "b04", "b05", "b06", "b09", "b10", "b11"}
    for rid in lessons:  # goal, outcome, fixed error, final successful call+result per tool, final answer
        assert w[rid] == pytest.approx(1 + cfg.delta_task_success), rid
    for rid in ("b02", "b03", "b07", "b08"):  # the request (the goal holds it), first failed call, in-between messages
        assert w[rid] == pytest.approx(cfg.goal_success_process_factor), rid
    assert (
        store.store.con.execute("SELECT handled_status FROM goals WHERE goal_id = 'g1'").fetchall()[0][0] == "succeeded"
    )


def test_goal_failure_reinforces_what_explains_it(store):
    cfg = store.config.decay
    store.goal_cleanup(dry_run=False)
    w = weights(store)
    for rid in ("r03", "r04", "r05", "r07"):  # the wrong call, its error, the user's correction, the outcome
        assert w[rid] == pytest.approx(1 + cfg.delta_task_failure_lesson), rid
    assert w["r02"] == w["r06"] == 1.0
    assert w["c01"] == 1.0  # no goal: untouched


def test_goal_records_read_together_are_those_read_goal_by_goal(make_engine, write_jsonl, monkeypatch):
    """Goals read a few at a time (here one and two a query) get the records a query per goal got: linked
    by goal_id, or by session within the goal's span when they have none, in time order."""
    from expengine.lifecycle import goals as goal_step
    from expengine.store.vocabulary import INDEXED_RECORDS_SQL

    engine = make_engine()
    by_session = [
        ev("q01", 40, "goal", session="s9", goal_id="g9", goal={"id": "g9", "status": "open", "description": "Rebook"}),
        ev("q02", 41, "tool_call", session="s9", tool={"name": "rebook", "args": {"pnr": "X1"}}),
        ev("q03", 42, "tool_result", session="s9", tool={"name": "rebook", "result": "ok"}),
        ev("q04", 43, "goal", session="s9", goal_id="g9", goal={"id": "g9", "status": "succeeded"}),
        ev("q05", 90, "message", session="s9", role="user", content="later, outside the span"),
    ]
    engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER + by_session)])
    store = engine.store
    pending = goal_step._pending_goals(store)
    assert len(pending) == 3

    def one_goal(goal: tuple) -> list[dict]:
        goal_id, agent, session, _status, opened, updated = goal
        rows = store.con.execute(
            f"""SELECT {", ".join(goal_step.FIELDS)} FROM records WHERE {INDEXED_RECORDS_SQL}
                AND (goal_id = ? OR (goal_id IS NULL AND agent = ? AND session = ? AND ts BETWEEN ? AND ?))
                ORDER BY ts, id""",
            [goal_id, agent, session, opened, updated],
        ).fetchall()
        return [dict(zip(goal_step.FIELDS, row)) for row in rows]

    expected = {g[0]: one_goal(g) for g in pending}
    assert [r["id"] for r in expected["g9"]] == ["q01", "q02", "q03", "q04"]
    for per_read in (1, 2, 500):
        monkeypatch.setattr(goal_step, "GOALS_PER_READ", per_read)
        assert goal_step._linked_records(store, pending) == expected


def test_goal_cleanup_handles_each_status_change_once(store):
    store.goal_cleanup(dry_run=False)
    once = weights(store)
    report = store.goal_cleanup(dry_run=False)
    assert report.goals_handled == {} and weights(store) == once


def test_open_goals_are_left_alone(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest([write_jsonl("open.jsonl", BOOKING[:6])])  # no success yet
    assert engine.goal_cleanup(dry_run=False).goals_handled == {}
    assert set(weights(engine).values()) == {1.0}


def test_goal_success_can_put_process_to_sleep(make_engine, write_jsonl):
    engine = make_engine(overrides={"decay.goal_success_process_factor": "0.1"})
    engine.ingest([write_jsonl("log.jsonl", BOOKING)])
    report = engine.goal_cleanup(dry_run=False)
    states = state_of(engine)
    assert report.became_dormant == 4
    assert {i for i, s in states.items() if s == "dormant"} == {"b02", "b03", "b07", "b08"}
    assert engine.store.index.count(MEMORIES, "state = 'dormant'") == 4


# --- cluster pruning and merge ----------------------------------------------------------------------

DUPLICATES = [
    ev(
        "d1",
        0,
        "tool_result",
        role="tool",
        tool={"name": "get_weather", "error": "429 Too Many Requests, retry after 60 s"},
    ),
    ev(
        "d2",
        1,
        "tool_result",
        role="tool",
        tool={"name": "get_weather", "error": "429 Too Many Requests, retry after 60 s."},
    ),
    ev(
        "d3",
        2,
        "tool_result",
        role="tool",
        tool={"name": "get_weather", "error": "429 Too many requests, retry after 60 s"},
    ),
    ev(
        "d4",
        3,
        "tool_result",
        role="tool",
        importance=0.2,
        tool={"name": "get_weather", "error": "429 Too Many Requests - retry after 60 s"},
    ),
]


def test_merge_keeps_provenance_and_never_absorbs_pinned(make_engine, write_jsonl):
    engine = make_engine(overrides={"cluster.members_per_cluster": "50"})
    engine.ingest([write_jsonl("dup.jsonl", DUPLICATES + CHATTER)])
    engine.pin("d4")
    engine.prune_clusters(dry_run=False)
    rows = {
        r[0]: r[1:]
        for r in engine.store.con.execute(
            "SELECT id, state, merged_into, merged_ids, merged_count FROM records"
        ).fetchall()
    }
    survivor = "d4"  # pinned wins over importance and recency
    assert rows[survivor][0] == "active"
    assert json.loads(rows[survivor][2]) == ["d1", "d2", "d3"] and rows[survivor][3] == 4
    for rid in ("d1", "d2", "d3"):
        assert rows[rid][0] == "dormant" and rows[rid][1] == survivor
    members = {r for (r,) in engine.store.con.execute("SELECT record_id FROM cluster_members").fetchall()}
    assert {"d1", "d2", "d3", "d4"} <= members  # the absorbed stay listed, so a unit can name them
    assert (
        engine.store.con.execute("SELECT count(*) FROM history WHERE action = 'merge:absorbed'").fetchall()[0][0] == 3
    )


def test_merge_accumulates_ids_across_runs(make_engine, write_jsonl):
    engine = make_engine(overrides={"cluster.members_per_cluster": "50"})
    engine.ingest([write_jsonl("a.jsonl", DUPLICATES[:2] + CHATTER)])
    engine.prune_clusters(dry_run=False)
    first = engine.store.con.execute("SELECT id FROM records WHERE merged_count > 1").fetchall()[0][0]
    engine.ingest([write_jsonl("b.jsonl", DUPLICATES[2:3])])
    engine.prune_clusters(dry_run=False)
    survivor, merged, count = engine.store.con.execute(
        "SELECT id, merged_ids, merged_count FROM records WHERE state = 'active' AND merged_count > 1"
    ).fetchall()[0]
    assert count == 3 and set(json.loads(merged)) == {"d1", "d2", "d3"} - {survivor}
    assert first in json.loads(merged) or first == survivor
    into = {
        r
        for (r,) in engine.store.con.execute(
            "SELECT DISTINCT merged_into FROM records WHERE merged_into IS NOT NULL"
        ).fetchall()
    }
    assert into == {survivor}


def test_near_duplicates_with_different_identifiers_are_not_merged(make_engine, write_jsonl):
    orders = [
        ev(
            f"o{i}",
            i,
            "tool_result",
            role="tool",
            tool={"name": "lookup_order", "result": f"order W{oid} shipped to Oslo"},
        )
        for i, oid in enumerate(("4821", "7730", "4821"))
    ]
    engine = make_engine(overrides={"cluster.members_per_cluster": "50"})
    engine.ingest([write_jsonl("orders.jsonl", orders + CHATTER)])
    engine.prune_clusters(dry_run=False)
    states = state_of(engine)
    assert states["o1"] == "active"  # the only record of order W7730 survives
    assert sorted(s for rid, s in states.items() if rid in ("o0", "o2")) == ["active", "dormant"]


PRUNE = [
    ev(
        "p1", 0, "message", role="user", content="My flight AS 1618 from Denver to Tokyo departs at 10:05 from gate B12"
    ),
    ev("p2", 1, "message", role="user", content="flight AS 1618 departs at 10:05"),
    ev("p3", 2, "message", role="user", content="Denver to Tokyo flight, gate B12"),
    ev("p4", 3, "message", role="user", content="My sister Ana's birthday is on June 4 and she loves tulips"),
    ev("p5", 4, "message", role="user", content="thanks!"),
    ev("p6", 5, "message", role="user", content="ok"),
]


def test_cluster_pruning_keeps_centroid_near_and_unique_facts(make_engine, write_jsonl):
    engine = make_engine(overrides={"cluster.members_per_cluster": "50", "cluster.keep_ratio": "0.3"})
    engine.ingest([write_jsonl("p.jsonl", PRUNE)])
    report = engine.prune_clusters(dry_run=False)
    states = state_of(engine)
    assert report.clusters == 1 and report.merged_records == 0
    assert states["p4"] == "active"  # the unique fact is never covered
    assert states["p1"] == "active"  # the richest statement covers the others
    assert states["p5"] == states["p6"] == "dormant"  # chatter carries nothing
    assert "dormant" in (states["p2"], states["p3"])  # repeats of p1
    # the member nearest the centroid (one cluster: the members' mean) is kept
    ids = [
        i for (i,) in engine.store.con.execute("SELECT record_id FROM cluster_members ORDER BY record_id").fetchall()
    ]
    assert ids == sorted(r["id"] for r in PRUNE)
    texts = dict(engine.store.con.execute("SELECT id, text FROM records").fetchall())
    vectors = engine.store.embeddings.encode([texts[i] for i in ids])
    nearest = ids[int(np.argmax(vectors @ vectors.mean(axis=0)))]
    assert states[nearest] == "active"
    reasons = dict(engine.store.con.execute("SELECT id, state_reason FROM records WHERE state = 'dormant'").fetchall())
    assert reasons["p5"].startswith("cluster pruning: carries nothing")


def test_keep_ratio_is_a_floor(make_engine, write_jsonl):
    engine = make_engine(overrides={"cluster.members_per_cluster": "50", "cluster.keep_ratio": "0.7"})
    engine.ingest([write_jsonl("p.jsonl", PRUNE)])
    report = engine.prune_clusters(dry_run=False)
    active = sum(1 for s in state_of(engine).values() if s == "active")
    assert active >= math.ceil(0.7 * len(PRUNE))
    assert report.kept_by_floor >= 1  # something redundant stayed because of the floor


def test_prune_dry_run_plans_without_writing(make_engine, write_jsonl):
    engine = make_engine(overrides={"cluster.members_per_cluster": "50", "cluster.keep_ratio": "0.3"})
    engine.ingest([write_jsonl("p.jsonl", PRUNE + DUPLICATES)])
    before = table_contents(engine)
    report = engine.prune_clusters(dry_run=True)
    assert report.merged_records >= 2 and report.dormant_empty == 2 and report.dormant_examples
    assert table_contents(engine) == before


# --- purge and forget -------------------------------------------------------------------------------


def test_purge_archives_only_after_the_observation_window(store):
    now = dt.datetime(2030, 1, 1)
    old, recent = now - dt.timedelta(hours=100), now - dt.timedelta(hours=1)
    store.store.con.execute(
        "UPDATE records SET state = 'dormant', weight = 0.01, marked_at = ? WHERE id IN ('c01', 'c02', 'b08')", [old]
    )
    store.store.con.execute("UPDATE records SET last_access = ? WHERE id = 'c02'", [recent])  # used during the window
    store.store.con.execute(
        "UPDATE records SET state = 'dormant', weight = 0.01, marked_at = ? WHERE id = 'b07'", [recent]
    )
    store.store.con.execute("UPDATE records SET state = 'dormant', weight = 0.5, marked_at = ? WHERE id = 'b03'", [old])
    assert store.purge(dry_run=True, now=now).archived == 2
    report = store.purge(dry_run=False, now=now)
    states = state_of(store)
    assert report.archived == 2 and report.waiting == 2
    assert states["c01"] == states["b08"] == "archived"
    assert states["c02"] == states["b07"] == states["b03"] == "dormant"
    assert store.store.index.count(MEMORIES, "id IN ('c01', 'b08')") == 0
    assert store.store.con.execute("SELECT count(*) FROM records").fetchall()[0][0] == len(BOOKING + REFUND + CHATTER)


def test_forget_deletes_records_and_derived_rows(store):
    from expengine.store.embeddings import text_hash

    now = dt.datetime(2026, 3, 2)
    store.prune_clusters(dry_run=False)
    store.store.con.execute(
        """INSERT INTO units (id, kind, text, category, agent, support, confidence, source_ids, method, created, updated)
           VALUES ('u1', 'fact', 'User u-101 prefers aisle seats', 'preference', 'bot', 2, 0.9, '["c03", "c01"]', 'test', ?, ?),
                  ('u2', 'fact', 'greeting', 'chatter', 'bot', 1, 0.9, '["c01"]', 'test', ?, ?)""",
        [now] * 4,
    )
    hello = text_hash(store.store.con.execute("SELECT text FROM records WHERE id = 'c01'").fetchall()[0][0])
    result = store.forget(ids=["c01"])
    assert result.records == 1 and result.units_deleted == 1 and result.units_updated == 1
    assert store.store.con.execute("SELECT count(*) FROM records WHERE id = 'c01'").fetchall()[0][0] == 0
    assert store.store.con.execute("SELECT count(*) FROM history WHERE item_id = 'c01'").fetchall()[0][0] == 0
    assert store.store.con.execute("SELECT count(*) FROM cluster_members WHERE record_id = 'c01'").fetchall()[0][0] == 0
    assert store.store.con.execute("SELECT count(*) FROM embeddings WHERE text_hash = ?", [hello]).fetchall()[0][0] == 0
    assert store.store.con.execute("SELECT source_ids, support FROM units WHERE id = 'u1'").fetchall()[0] == (
        '["c03"]',
        1,
    )
    assert store.store.con.execute("SELECT count(*) FROM units WHERE id = 'u2'").fetchall()[0][0] == 0
    assert store.store.index.count(MEMORIES, "id = 'c01'") == 0
    by_filter = store.forget(sessions=["s2"])
    assert by_filter.records == len(REFUND)


def test_forget_bad_input(store):
    with pytest.raises(NotFoundError):
        store.forget(ids=["nope"])
    with pytest.raises(InputError):
        store.forget()
    with pytest.raises(InputError):
        store.forget(before="last tuesday")
    assert store.forget(sessions=["s1'; DROP TABLE records; --"]).records == 0  # a value, never SQL
    assert store.store.con.execute("SELECT count(*) FROM records").fetchall()[0][0] == len(BOOKING + REFUND + CHATTER)


# --- the whole cycle --------------------------------------------------------------------------------


def test_dry_run_changes_nothing(store):
    before = table_contents(store)
    lance_before = sorted(
        store.store.index.table(MEMORIES).to_arrow().select(["id", "state"]).to_pylist(), key=lambda r: r["id"]
    )
    report = store.compact(dry_run=True, refine=False)
    assert report.dry_run and report.after.active < report.before.active  # the plan does something
    assert report.steps["goals"]["goals_handled"] == {"succeeded": 1, "failed": 1}
    assert table_contents(store) == before
    assert (
        sorted(store.store.index.table(MEMORIES).to_arrow().select(["id", "state"]).to_pylist(), key=lambda r: r["id"])
        == lance_before
    )
    assert store.snapshots() == []


def test_snapshot_compact_restore_is_exact(store, embedder):
    before = table_contents(store)
    report = store.compact(refine=False)
    assert report.status == "completed" and report.snapshot_id
    assert table_contents(store)["records"] != before["records"]
    restored = store.restore(report.snapshot_id)
    assert restored.runs_rolled_back == [report.run_id]
    after = table_contents(store)
    # the embedding cache is no table of record: a cycle leaves the vectors LanceDB holds to it (and the
    # restore rebuilt LanceDB from them), so the cache may hold fewer rows than before
    for name in before:
        if name not in ("runs", "history", "embeddings"):
            assert after[name] == before[name], name
    assert set(after["embeddings"]) <= set(before["embeddings"])
    assert store.store.index.count(MEMORIES) == len(BOOKING + REFUND + CHATTER)
    hits = (
        store.store.index.table(MEMORIES)
        .search(embedder.encode(["request_refund error: order W123 is past the 30 day refund window"])[0])
        .limit(3)
        .to_list()
    )
    assert hits[0]["id"] == "r04"
    status = store.store.con.execute("SELECT status FROM runs WHERE id = ?", [report.run_id]).fetchall()[0][0]
    assert status == "rolled_back"
    with pytest.raises(NotFoundError):
        store.restore("20000101T000000000000-abcd")
    with pytest.raises(InputError):
        store.restore("../etc")


def test_second_compact_skips_clustering_and_history_grows(store):
    first = store.compact(refine=False)
    assert first.clustering.startswith("ran")
    second = store.compact(refine=False)
    assert second.clustering.startswith("skipped") and second.steps["clusters"]["seconds"] == 0.0
    assert second.steps["decay"]["decayed"] > 0  # decay is per cycle, always applied
    later = store.compact(refine=False, now=dt.datetime.fromisoformat(first.clock) + dt.timedelta(hours=25))
    assert later.clustering.startswith("ran: 25")
    runs = store.history()
    assert [r["run_id"] for r in runs] == [first.run_id, second.run_id, later.run_id]
    assert runs[0]["raw"] == len(BOOKING + REFUND + CHATTER) and runs[0]["active_after"] < runs[0]["active_before"]


def test_snapshot_retention(make_engine, write_jsonl):
    engine = make_engine(overrides={"snapshot.retention": "2"})
    engine.ingest([write_jsonl("c.jsonl", CHATTER)])
    ids = [engine.snapshot().id for _ in range(3)]
    assert [s.id for s in engine.snapshots()] == ids[:0:-1]


def test_refine_hook_runs_after_pruning_and_before_purge(store, monkeypatch):
    import expengine.lifecycle.refine as refine_module
    from expengine.errors import ModelError

    calls = []

    class Result:
        def to_dict(self):
            return {"units_written": 0}

        def summary(self):
            return "0 units written"

    def fake_refine(db, llm, *, dry_run, run_id, max_llm_calls, now, full):
        calls.append((dry_run, run_id, max_llm_calls, db.con.execute("SELECT count(*) FROM clusters").fetchall()[0][0]))
        if len(calls) == 2:
            raise ModelError("model file missing")
        return Result()

    monkeypatch.setattr(refine_module, "refine_clusters", fake_refine)
    report = store.compact(max_llm_calls=3)
    assert calls == [(False, report.run_id, 3, report.after.clusters)] and report.after.clusters > 0
    assert list(report.steps)[-3:] == ["refine", "purge", "index"]
    failed = store.compact()  # a model error is reported, the cycle still completes
    assert failed.status == "completed" and "model file missing" in failed.steps["refine"]["error"]
    store.compact(refine=False)
    assert len(calls) == 2
