"""Library mode: an Engine an agent keeps open takes the store only per call, so cron and CLI run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import BOOKING, CHATTER, REFUND, spawn_cli

REPO = Path(__file__).resolve().parents[1]


def run_cli(store: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "expengine", "--store", str(store), "--wait", "5", *args],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_an_engine_held_open_blocks_neither_cron_compact_nor_cli_queries(make_engine, write_jsonl, tmp_path):
    agent = make_engine()  # what an agent keeps for its whole life
    agent.ingest([write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)])
    assert agent.query("refund past the window", k=3, touch=False).hits
    store = tmp_path / "store"
    compact = spawn_cli(store, "--wait", "120", "compact", "--no-refine", "--json")
    queried = run_cli(store, "--wait", "120", "query", "refund window", "--json", "--no-touch")
    out, err = compact.communicate(timeout=600)
    assert compact.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    assert queried.returncode == 0, queried.stderr
    assert json.loads(queried.stdout)["hits"]
    after = agent.query("refund past the window", k=3, touch=False)  # the held Engine still answers
    assert after.hits and agent.history()[-1]["status"] == "completed"


def test_nested_calls_reuse_one_open_store(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", CHATTER)])
    with engine.session() as store:
        assert engine.stats().raw == len(CHATTER)  # no second lock: the open store is reused
        assert store.con.execute("SELECT count(*) FROM records").fetchall()[0][0] == len(CHATTER)
    assert engine._store is None  # closed (and unlocked) again after the block
