"""Routine calls of a tool whose rule would only restate its schema go to sleep with their own reason;
a failure, a user's request and a run's last active record stay (refine/routine.py)."""

from __future__ import annotations

import json

import pytest
from helpers import at

from expengine.engine import Engine
from expengine.lifecycle.refine.routine import ROUTINE_REASON
from expengine.store.units import signature_of

ORDERS = ["A1001", "B2002", "C3003", "D4004", "E5005"]


def lookup_run(n: int, *, fails: bool = False, asked: bool = True) -> list[dict]:
    """One run: the user asks about an order, the agent calls lookup_order with its id."""
    s, base = f"s{n}", n * 100
    result = {"error": "order not found"} if fails else {"result": {"order_id": ORDERS[n], "status": "shipped"}}

    def event(step: str, minute: int, kind: str, **fields) -> dict:
        return {"id": f"r{n}-{step}", "ts": at(base + minute), "kind": kind, "agent": "shop", "session": s, **fields}

    asking = [event("ask", 0, "message", role="user", content=f"where is my order {ORDERS[n]}?")] if asked else []
    return asking + [
        event("call", 1, "tool_call", tool={"name": "lookup_order", "args": {"order_id": ORDERS[n]}}),
        event("result", 2, "tool_result", tool={"name": "lookup_order", **result}),
    ]


def refined(tmp_path, embedder, events: list[dict], **overrides: str) -> Engine:
    """A store of `events` whose records form one cluster, refined once."""
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    engine = Engine(store=tmp_path / "store", embedder=embedder, overrides={"llm.mode": "template", **overrides})
    engine.ingest([str(path)])
    ids = [e["id"] for e in events]
    con = engine.store.con
    con.execute(
        "INSERT INTO clusters (cluster_key, agent, size, signature, updated) VALUES ('orders', 'shop', ?, ?, ?)",
        [len(ids), signature_of(ids), at(0)],
    )
    con.executemany("INSERT INTO cluster_members VALUES ('orders', ?)", [[i] for i in ids])
    return engine


def states(engine: Engine) -> dict[str, str]:
    return dict(engine.store.con.execute("SELECT id, state FROM records").fetchall())


@pytest.fixture(scope="module")
def embedder():
    from expengine.models.embedder import get_embedder

    return get_embedder()


def test_a_routine_cluster_sleeps_with_its_reason_and_the_requests_stay(tmp_path, embedder):
    events = [e for n in range(4) for e in lookup_run(n)]
    with refined(tmp_path, embedder, events) as engine:
        report = engine.refine(run_id="r1")
        assert engine.units(agent="shop", kind="rule") == []  # "call lookup_order(order_id=…)": vacuous
        found = states(engine)
        assert all(found[f"r{n}-call"] == found[f"r{n}-result"] == "dormant" for n in range(4))
        assert all(found[f"r{n}-ask"] == "active" for n in range(4))  # the user's requests stay
        assert report.routine_asleep == 8 and "8 routine calls asleep" in report.summary()
        expected = ROUTINE_REASON.format(tool="lookup_order", calls=4, runs=4, key="orders")
        shown = engine.show("r0-call")
        assert shown.item["state"] == "dormant" and shown.item["state_reason"] == expected
        assert shown.history[-1]["run_id"] == "r1"
        assert engine.store.con.execute("SELECT count(*) FROM records WHERE state = 'archived'").fetchone()[0] == 0
        asked = engine.why("lookup_order order_id A1001", limit=20)
        assert any(item.id == "r0-call" and item.reason == expected for item in asked.items)


def test_a_cluster_with_a_failure_stays_awake(tmp_path, embedder):
    events = [e for n in range(4) for e in lookup_run(n, fails=n == 3)]
    with refined(tmp_path, embedder, events) as engine:
        report = engine.refine(run_id="r1")
        assert report.routine_asleep == 0
        assert states(engine)["r3-result"] == "active"
        assert not any(
            (r or "").startswith("routine call")
            for (r,) in engine.store.con.execute("SELECT state_reason FROM records").fetchall()
        )


def test_a_runs_last_active_record_stays_and_dry_run_changes_nothing(tmp_path, embedder):
    """Run s3 has no request: its call and result are all that is left of it on the hot path."""
    events = [e for n in range(4) for e in lookup_run(n, asked=n != 3)]
    with refined(tmp_path, embedder, events) as engine:
        assert engine.refine(dry_run=True).routine_asleep == 6
        assert set(states(engine).values()) == {"active"}
        assert engine.refine(run_id="r1").routine_asleep == 6
        found = states(engine)
        assert found["r3-call"] == found["r3-result"] == "active"
        assert found["r0-call"] == "dormant"


@pytest.mark.parametrize("min_support, asleep", [("3", 8), ("4", 0)])
def test_a_routine_is_seen_in_min_support_runs(tmp_path, embedder, min_support, asleep):
    """Four calls in three runs (s2 looked its order up twice)."""
    events = [e for n in range(3) for e in lookup_run(n)]
    events += [dict(e, id=e["id"] + "b", ts=at(211 + i)) for i, e in enumerate(lookup_run(2)[1:])]
    with refined(tmp_path, embedder, events, **{"refine.min_support": min_support}) as engine:
        assert engine.refine(run_id="r1").routine_asleep == asleep
