"""Random kill -9 during ingest and compaction: every rerun heals the store. A few seeded kills here;
`scripts/kill_test.py` runs many with the same functions."""

from __future__ import annotations

import random

import pyarrow.compute as pc
import pytest
from helpers import load_kill_test


def kills_heal(tmp_path, embedder, phases, *, kills: int, seed: int, base: bool) -> set[str]:
    """Run the script's phases on a prepared store (with `base`, four slices ingested first, unkilled);
    every kill must be followed by a rerun that heals. Returns the raw ids the store holds at the end."""
    kill_test = load_kill_test()
    slices = kill_test.make_slices(tmp_path / "slices", 20 if base else 30, 3 * kills + 6)
    store = tmp_path / "store"
    kill_test.prepare_store(store, slices, embedder)
    ingested: set[str] = set()
    if base:
        assert kill_test.run_to_end(kill_test.command(store, "ingest", *map(str, slices[-4:]), "--json")) is None
        ingested = set().union(*map(kill_test.slice_ids, slices[-4:]))
    rng = random.Random(seed)
    for phase in phases:
        tally = kill_test.run_phase(
            store, phase, kills=kills, rng=rng, slices=slices, ingested=ingested, embedder=embedder, log=lambda *_: None
        )
        assert tally.failures == [] and tally.kills == kills, tally
        assert tally.healed == tally.checks >= 1
    return ingested


@pytest.mark.slow
def test_random_kills_during_ingest_and_compaction_heal_on_rerun(tmp_path, embedder):
    ingested = kills_heal(tmp_path, embedder, ("ingest", "compact"), kills=3, seed=5, base=False)
    assert len(ingested) > 30  # slices landed, so the raw-count check compared real numbers


@pytest.mark.slow
def test_random_kills_during_forget_restore_and_reindex_heal_on_rerun(tmp_path, embedder):
    assert kills_heal(tmp_path, embedder, ("forget", "restore", "reindex"), kills=2, seed=11, base=True)


def test_the_checker_sees_a_store_that_did_not_heal(tmp_path, make_engine, write_jsonl):
    """Each check can fail: duplicates, a wrong raw count, an unindexed memory, a missing source, a pending write."""
    kill_test = load_kill_test()
    engine = make_engine()
    engine.ingest(
        [
            write_jsonl(
                "log.jsonl",
                [
                    {
                        "id": f"e{i}",
                        "kind": "note",
                        "agent": "bot",
                        "content": f"note {i}",
                        "ts": "2026-03-01T09:00:00Z",
                    }
                    for i in range(4)
                ],
            )
        ]
    )
    store, embedder = engine.store_dir, engine.embedder
    rows = engine.store.index.table("memories").to_arrow()
    engine.store.index.add("memories", rows.filter(pc.field("id") == "e0"), replace=False)
    engine.store.index.delete("memories", ["e1"])
    engine.store.con.execute("INSERT INTO pending_index VALUES ('e2', 'memory')")
    engine.store.con.execute(
        """INSERT INTO units (id, kind, text, category, agent, support, confidence, source_ids, method, created,
                                updated)
           VALUES ('u1', 'fact', 'x', 'note', 'bot', 1, 0.5, '["gone"]', 'test', now(), now())"""
    )
    engine.close()
    problems = " | ".join(kill_test.check_store(store, {"e0", "e1", "e2", "e3", "e4"}, embedder))
    for expected in (
        "duplicate ids in LanceDB memories",
        "raw count 4 != 5",
        "disagree with DuckDB",
        "cites missing records",
        "pending",
        "LanceDB units 0 != 1",
    ):
        assert expected in problems
