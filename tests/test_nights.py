"""Incremental nights: each cycle works on what came since the last one, and agrees with a full re-run.

The sample logs arrive in three nightly thirds; one store is compacted incrementally each night, the
other with `compact --full` each night. Tolerance: the records kept active agree to Jaccard ≥ 0.8 (measured 0.83) and
the active units' count within 15% (k-means over the whole store and nearest-centroid assignment
group a few borderline records differently, and a unit's evidence with them)."""

from __future__ import annotations

import datetime as dt
import json

from helpers import REPO

START = dt.datetime(2027, 1, 1)
NIGHT = dt.timedelta(hours=25)
LOGS = ("coding_assistant.jsonl", "support_bot.jsonl")


def thirds(tmp_path, logs: tuple[str, ...] = LOGS) -> list[list[str]]:
    """Each sample log cut into three consecutive thirds; night n ingests every log's n-th third."""
    nights: list[list[str]] = [[], [], []]
    for name in logs:
        lines = (REPO / "sample_logs" / name).read_text(encoding="utf-8").splitlines()
        step = -(-len(lines) // 3)
        for n in range(3):
            path = tmp_path / f"n{n}-{name}"
            path.write_text("\n".join(lines[n * step : (n + 1) * step]) + "\n", encoding="utf-8")
            nights[n].append(str(path))
    return nights


def active_ids(engine) -> set[str]:
    return {r[0] for r in engine.store.con.execute("SELECT id FROM records WHERE state = 'active'").fetchall()}


def test_incremental_nights_agree_with_full_nights(make_engine, tmp_path):
    nights = thirds(tmp_path)
    incremental = make_engine(tmp_path / "incremental", overrides={"llm.mode": "template"})
    full = make_engine(tmp_path / "full", overrides={"llm.mode": "template"})
    reports = []
    for n, paths in enumerate(nights, start=1):
        for engine in (incremental, full):
            engine.ingest(paths)
        reports.append(incremental.compact(now=START + NIGHT * n))
        full.compact(now=START + NIGHT * n, full=True)
    assert reports[0].since is None and reports[0].clustering.endswith("full: no clustering with centroids yet")
    assert reports[1].since is not None and "incremental:" in reports[1].clustering
    assert reports[2].steps["clusters"]["partitions_incremental"] > 0
    kept, kept_full = active_ids(incremental), active_ids(full)
    units, units_full = incremental.stats().units, full.stats().units
    agreement = (len(kept & kept_full) / len(kept | kept_full), len(kept), len(kept_full), units, units_full)
    assert agreement[0] >= 0.8, agreement
    assert abs(units - units_full) <= 0.15 * units_full, agreement


def test_the_watermark_moves_and_new_records_join_stored_clusters(make_engine, tmp_path):
    nights = thirds(tmp_path, ("support_bot.jsonl",))
    engine = make_engine(overrides={"llm.mode": "template", "cycle.sweep_rows": "50"})
    engine.ingest(nights[0])
    engine.compact(now=START + NIGHT)
    meta = dict(engine.store.con.execute("SELECT key, value FROM store_meta WHERE key LIKE 'cycle.%'").fetchall())
    upto = engine.store.con.execute("SELECT max(ingested_at) FROM records").fetchall()[0][0]
    assert meta["cycle.ingested_upto"] == upto.isoformat() == meta["cycle.clustered_upto"]
    assert engine.store.con.execute("SELECT count(*) FROM clusters WHERE centroid IS NULL").fetchall()[0][0] == 0
    before = set(engine.store.con.execute("SELECT cluster_key FROM clusters").fetchall())
    engine.ingest(nights[1])
    second = engine.compact(now=START + NIGHT * 2)
    assert second.swept == 50
    clusters = second.steps["clusters"]
    assert clusters["new_records"] > 0 and clusters["partitions_incremental"] > 0
    after = set(engine.store.con.execute("SELECT cluster_key FROM clusters").fetchall())
    assert before & after, "clusters no new record joined and the sweep did not reach are kept as they were"


def test_the_sweep_follows_the_nights_new_records(make_engine, tmp_path):
    """A night re-checks `cycle.sweep_per_new` older records for each new one (at most `sweep_rows`); a quiet
    night, with nothing else to do, re-checks `sweep_rows`."""
    nights = thirds(tmp_path, ("support_bot.jsonl",))
    engine = make_engine(overrides={"llm.mode": "template", "cycle.sweep_rows": "40", "cycle.sweep_per_new": "0.05"})
    engine.ingest(nights[0])
    engine.compact(now=START + NIGHT)
    new = engine.ingest(nights[1]).stored
    second = engine.compact(now=START + NIGHT * 2)
    assert second.swept == min(40, -(-new // 20)) < 40, (second.swept, new)
    assert second.steps["chatter"]["checked"] <= new + second.swept
    quiet = engine.compact(now=START + NIGHT * 3)
    assert quiet.swept == 40


def test_drift_and_growth_cluster_afresh_and_say_why(make_engine, tmp_path):
    nights = thirds(tmp_path, ("support_bot.jsonl",))
    drifting = make_engine(tmp_path / "drift", overrides={"llm.mode": "template", "cycle.drift_similarity": "0.999"})
    growing = make_engine(tmp_path / "growth", overrides={"llm.mode": "template", "cycle.refit_growth": "0.01"})
    for engine in (drifting, growing):
        engine.ingest(nights[0])
        engine.compact(now=START + NIGHT)
        engine.ingest(nights[1])
    drifted = drifting.compact(now=START + NIGHT * 2)
    assert drifted.steps["clusters"]["partitions_drifted"] > 0
    assert "100% far from every centroid" in drifted.clustering
    grown = growing.compact(now=START + NIGHT * 2)
    growing.ingest(nights[2])
    third = growing.compact(now=START + NIGHT * 3)
    assert "incremental" in grown.clustering
    assert "full:" in third.clustering and "cycle.refit_growth" in third.clustering
    forced = growing.compact(now=START + NIGHT * 4, full=True)
    assert forced.since is None and "full: compact --full" in forced.clustering
    stored = json.loads(growing.store.con.execute("SELECT report FROM runs ORDER BY started DESC").fetchone()[0])
    assert stored["clustering"] == forced.clustering


def test_a_night_with_nothing_new_redoes_nothing(make_engine, tmp_path):
    """Clusters already looked at (whether their units stayed live or not), kept turns and unchanged credit
    inputs are not worked on again (only the few clusters the sweep changes are); a full cycle looks at every
    cluster again."""
    nights = thirds(tmp_path, ("support_bot.jsonl",))
    engine = make_engine(overrides={"llm.mode": "template", "cycle.sweep_rows": "5"})
    for n, paths in enumerate(nights[:2], start=1):
        engine.ingest(paths)
        engine.compact(now=START + NIGHT * n)
    quiet = engine.compact(now=START + NIGHT * 3)
    assert "skipped" in quiet.steps["credit"] and quiet.steps["notes"]["turns_checked"] <= 5
    assert quiet.steps["chatter"]["checked"] <= 5
    full = engine.compact(now=START + NIGHT * 4, full=True)
    looked = (quiet.steps["refine"]["clusters_unchanged"], full.steps["refine"]["clusters_unchanged"])
    assert looked[0] > looked[1], looked  # the quiet night refined only the clusters the sweep planned again
    assert full.steps["chatter"]["checked"] > 5
