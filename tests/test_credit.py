"""Outcome credit by contrast with a simulated agent on a real store: sessions query with their goal id,
succeed with a probability set by their task's difficulty and by what they were shown, and log how
they ended. A planted wrong rule is quarantined, a planted right one gains utility, a neutral one is
not moved; hard tasks alone move nothing (the statistics on hand-made episodes: test_contrast.py)."""

from __future__ import annotations

import datetime as dt
import json
import random

from expengine.lifecycle.credit import credit
from expengine.store import units

NOW = dt.datetime(2026, 3, 10, 12, 0)
# Three situations, each with its own difficulty (success rate before any rule) and its rule's effect.
TASKS = {
    "weather": (
        ["get_weather returned 429 Too Many Requests", "the weather API says rate limit exceeded, 429"],
        0.7,
        "When get_weather returns 429 Too Many Requests, call it again at once in a tight loop.",
        -0.5,  # the planted wrong rule
    ),
    "refund": (
        ["the customer wants a refund for order A-17", "refund request for a cancelled order"],
        0.3,
        "When a customer asks for a refund, look up the order with get_order before calling refund_order.",
        +0.6,  # the planted right rule
    ),
    "booking": (
        ["book a flight from Denver to Tokyo", "the user wants to book a morning flight to Tokyo"],
        0.2,  # hard, and the rule changes nothing: raw failure must not quarantine it
        "When booking a flight, search_flights first with the origin, destination and date.",
        0.0,
    ),
}
RULE_IDS = {"weather": "u-wrong", "refund": "u-right", "booking": "u-neutral"}


def _outcomes(rng: random.Random, n: int, rate: float) -> list[bool]:
    """Exactly round(n·rate) successes, in a seeded order: the test checks the method, not luck."""
    wins = round(n * min(max(rate, 0.0), 1.0))
    outcomes = [True] * wins + [False] * (n - wins)
    rng.shuffle(outcomes)
    return outcomes


def _sessions(engine, write_jsonl, rng: random.Random, phase: str, per_task: int, *, planted: bool) -> None:
    events = []
    for task, (phrasings, base, _, effect) in TASKS.items():
        shown_rate = base + effect if planted else base
        for n, succeeded in enumerate(_outcomes(rng, per_task, shown_rate)):
            goal = f"{phase}-{task}-{n}"
            hits = engine.query(phrasings[n % len(phrasings)], k=2, session=goal, goal_id=goal).hits
            assert not planted or RULE_IDS[task] in {h.id for h in hits}  # the agent was shown its rule
            events.append(
                {
                    "id": f"{goal}-goal",
                    "ts": (NOW + dt.timedelta(minutes=len(events))).isoformat(),
                    "kind": "goal",
                    "agent": "bot",
                    "session": goal,
                    "goal": {"id": goal, "status": "succeeded" if succeeded else "failed", "description": task},
                }
            )
    engine.ingest([write_jsonl(f"{phase}.jsonl", events)])


def _plant(engine) -> None:
    for task, (_, _, text, _) in TASKS.items():
        row = {
            "id": RULE_IDS[task],
            "kind": "rule",
            "text": text,
            "category": task,
            "agent": "bot",
            "support": 3,
            "confidence": 0.8,
            "source_ids": json.dumps([]),
            "method": "test",
            "created": NOW,
            "updated": NOW,
        }
        units.insert(engine.store, row, action="refined", now=NOW)
    units.index_journalled(engine.store, list(RULE_IDS.values()))


def test_credit_by_contrast_moves_the_planted_units_and_not_the_neutral_one(make_engine, write_jsonl):
    # every session is shown its rule; the store holds little but the sessions' near-identical goal records,
    # which a prompt folds into one line (query/repeats.py): at k 5 the freed slots would go to the other
    # situations' rules, so the simulated agent asks for two hits and each episode is shown its own rule only
    engine = make_engine(overrides={"query.min_similarity": "0"})
    assert engine.config.credit.enabled  # on by default; `credit()` is the step's own work
    rng = random.Random(7)
    _sessions(engine, write_jsonl, rng, "before", 16, planted=False)  # before the rules existed
    _plant(engine)
    _sessions(engine, write_jsonl, rng, "after", 16, planted=True)
    first = credit(engine.store, run_id="c1", now=NOW)
    assert first.suspect == 1 and first.credited == 1 and first.quarantined == 0

    def unit(uid: str) -> tuple:
        return engine.store.con.execute("SELECT status, utility FROM units WHERE id = ?", [uid]).fetchone()

    def actions(uid: str) -> list[tuple[str, dict]]:
        rows = engine.store.con.execute(
            "SELECT action, detail FROM history WHERE item_id = ? AND action IN ('suspect', 'credit') "
            "ORDER BY happened_at",
            [uid],
        ).fetchall()
        return [(a, json.loads(d)) for a, d in rows]

    assert unit("u-wrong") == ("active", 0.0)
    ((action, counts),) = actions("u-wrong")
    assert action == "suspect" and counts["shown"] == 16 and counts["shown_succeeded"] == 3  # 0.7 - 0.5
    assert counts["not_shown"] == 16 and counts["not_shown_succeeded"] == 11 and counts["p_value"] < 0.05
    assert counts["situations"] == 2  # each phrasing against itself before the rule existed
    assert unit("u-right")[1] == engine.config.decay.delta_task_success
    assert unit("u-neutral") == ("active", 0.0) and actions("u-neutral") == []  # hard, but no worse
    assert credit(engine.store, run_id="c1b", now=NOW).suspect == 0  # the same evidence is judged once

    _sessions(engine, write_jsonl, rng, "later", 4, planted=True)
    second = credit(engine.store, run_id="c2", now=NOW + dt.timedelta(days=1))
    assert second.quarantined == 1 and unit("u-wrong")[0] == "quarantined"
    detail = engine.store.con.execute(
        "SELECT detail FROM history WHERE item_id = 'u-wrong' AND action = 'quarantined'"
    ).fetchone()[0]
    assert detail.startswith("outcome credit: ") and "when shown vs" in detail
    assert unit("u-right")[1] > engine.config.decay.delta_task_success  # more evidence, more credit
    assert unit("u-neutral") == ("active", 0.0)
    right = next(h for h in engine.query(TASKS["refund"][0][0], k=5, touch=False).hits if h.id == "u-right")
    assert right.parts.utility > 0  # it now ranks higher than its evidence alone would put it
