"""One clock and an honest dry run: every step stamps the cycle's `now`, and `compact --dry-run`
reports exactly what the real cycle that follows does."""

from __future__ import annotations

import datetime as dt
from typing import Any

from helpers import BOOKING, CHATTER, REFUND

T0 = dt.datetime(2026, 4, 1, 3, 0)  # "nightly at 03:00"
WINDOW_H = 60  # not a multiple of a day, so the purge lands on the first night past 60 h


def test_thirty_nightly_cycles_mark_observe_and_purge_on_the_cycle_clock(make_engine, write_jsonl):
    engine = make_engine(
        overrides={"llm.mode": "template", "decay.observation_window_hours": str(WINDOW_H), "decay.theta_purge": "0.2"}
    )  # dormant by decay = light enough to purge
    engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)])
    nights = [T0 + dt.timedelta(days=i) for i in range(30)]
    for night in nights:
        assert engine.compact(now=night).status == "completed"
    con = engine.store.con
    stamps = {r[0] for r in con.execute("SELECT happened_at FROM history WHERE run_id IS NOT NULL").fetchall()}
    assert stamps and stamps <= set(nights)  # every state change and history row carries a cycle clock
    rows = con.execute(
        """SELECT d.item_id, max(d.happened_at), min(a.happened_at), arg_max(d.detail, d.happened_at) FROM history d
           JOIN history a ON a.item_id = d.item_id AND a.action = 'state:archived' AND a.detail LIKE 'purge:%'
           WHERE d.action = 'state:dormant' AND d.happened_at < a.happened_at GROUP BY d.item_id"""
    ).fetchall()
    assert rows, "no record went the whole way from dormant to purged"
    by_decay = 0
    for item_id, marked, purged, why in rows:
        waited = (purged - marked).total_seconds() / 3600
        assert waited >= WINDOW_H and waited % 24 == 0, (item_id, marked, purged)
        if why.startswith("decay:"):  # light enough when marked: purged on the first night past 60 h
            assert waited == 72, (item_id, marked, purged)
            by_decay += 1
    assert by_decay
    marked_at = dict(con.execute("SELECT id, marked_at FROM records WHERE state = 'dormant'").fetchall())
    assert set(marked_at.values()) <= set(nights)
    waiting = [i for i, m in marked_at.items() if nights[-1] - m <= dt.timedelta(hours=WINDOW_H)]
    archived = {r[0] for r in con.execute("SELECT id FROM records WHERE state = 'archived'").fetchall()}
    assert not set(waiting) & archived


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what differs by nature between two runs: timings (wall and CPU), run and snapshot ids."""
    drop = {"seconds", "cpu_s", "run_id", "snapshot_id", "dry_run", "status", "recovered"}

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in drop}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    out = clean(report)
    out["steps"].pop("snapshot", None)
    return out


def test_dry_run_report_equals_the_real_run_that_follows(make_engine, write_jsonl):
    engine = make_engine(overrides={"llm.mode": "template"})
    engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)])
    night = T0
    for _ in range(2):  # a first cycle, then a second one with something already clustered and refined
        dry = engine.compact(dry_run=True, now=night)
        real = engine.compact(now=night)
        assert dry.dry_run and not real.dry_run
        assert dry.after is not None and real.after is not None and dry.after.to_dict() == real.after.to_dict()
        assert _figures(dry.to_dict()) == _figures(real.to_dict())
        night += dt.timedelta(days=1)
    assert real.steps["refine"].get("units_written", 0) + real.steps["decay"]["decayed"] > 0
