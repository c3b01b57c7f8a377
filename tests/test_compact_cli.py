"""The compaction commands end to end, a real process killed mid-run, and the exit codes cron sees."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from helpers import BOOKING, CHATTER, REFUND, paused_cli, spawn_cli, state_of, weights
from typer.testing import CliRunner

from expengine.cli import app
from expengine.store.pause import PAUSE_MARKER

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def store_dir(make_engine, write_jsonl, tmp_path):
    """A closed store holding the booking, refund and chatter logs."""
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)])
    engine.close()
    return tmp_path / "store"


def invoke(store: Path, *args: str) -> dict:
    result = CliRunner().invoke(app, ["--store", str(store), *args])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, result.stdout
    return json.loads(lines[0])


def test_kill_mid_run_is_rolled_back_by_the_next_run(store_dir, make_engine):
    engine = make_engine(store=store_dir)
    original_weights, original_states = weights(engine), state_of(engine)
    engine.close()
    child = paused_cli(store_dir, "decay", "compact", "--no-refine")  # decay applied, then it blocks
    child.send_signal(signal.SIGKILL)
    child.wait()
    (store_dir / (PAUSE_MARKER + "decay")).unlink()

    engine = make_engine(store=store_dir)
    assert engine.store.con.execute("SELECT status FROM runs").fetchall() == [("running",)]
    assert weights(engine) != original_weights  # the kill left a half-done cycle behind
    recovered = engine.recover_interrupted()
    assert [r["action"] for r in recovered] == ["rolled back"]
    assert weights(engine) == original_weights and state_of(engine) == original_states
    assert engine.store.index.count("memories") == len(original_weights)
    assert engine.store.con.execute("SELECT status FROM runs").fetchall() == [("rolled_back",)]
    report = engine.compact(refine=False)
    assert report.status == "completed" and report.recovered == []


def test_compact_finds_and_rolls_back_a_stale_run(store_dir, make_engine):
    engine = make_engine(store=store_dir)
    snapshot = engine.snapshot(reason="before compaction")
    engine.store.con.execute(
        "INSERT INTO runs VALUES ('run-killed', now(), NULL, FALSE, 'running', ?, NULL)", [snapshot.id]
    )
    engine.store.con.execute("UPDATE records SET weight = 0.01")  # what a killed run may leave
    report = engine.compact(refine=False)
    assert report.recovered == [{"run_id": "run-killed", "snapshot_id": snapshot.id, "action": "rolled back"}]
    assert report.before.active == len(BOOKING + REFUND + CHATTER) and report.after.dormant < report.before.active


def test_cli_compact_snapshots_history_json(store_dir):
    dry = invoke(store_dir, "compact", "--dry-run", "--no-refine", "--json")
    assert dry["dry_run"] and dry["after"]["active"] < dry["before"]["active"]
    run = invoke(store_dir, "compact", "--no-refine", "--json")
    assert run["status"] == "completed" and set(run["steps"]) >= {"snapshot", "decay", "goals", "clusters", "purge"}
    assert all("seconds" in step for step in run["steps"].values())
    second = invoke(store_dir, "compact", "--no-refine", "--json")
    snaps = invoke(store_dir, "snapshots", "--json")["snapshots"]
    assert [s["id"] for s in snaps] == [second["snapshot_id"], run["snapshot_id"]]
    runs = invoke(store_dir, "history", "--json")["runs"]
    assert [r["run_id"] for r in runs] == [run["run_id"], second["run_id"]]
    assert runs[0]["raw"] == len(BOOKING + REFUND + CHATTER)
    restored = invoke(store_dir, "restore", run["snapshot_id"], "--json")
    assert restored["active_after"] == len(BOOKING + REFUND + CHATTER)
    assert set(restored["runs_rolled_back"]) == {run["run_id"], second["run_id"]}
    text = CliRunner().invoke(app, ["--store", str(store_dir), "history"])
    assert text.exit_code == 0 and text.stdout.count("%") == 2  # one active-share cell per run


def test_cli_pin_forget(store_dir):
    assert invoke(store_dir, "pin", "c01", "--json") == {"id": "c01", "pinned": True, "state": "active"}
    assert invoke(store_dir, "unpin", "c01", "--json")["pinned"] is False
    gone = invoke(store_dir, "forget", "--session", "s3", "--yes", "--json")
    assert gone["records"] == len(CHATTER)


def test_exit_codes(store_dir, make_engine):
    holder = make_engine(store=store_dir)
    assert holder.store  # held open (and locked) until close(), like a running compaction
    locked = spawn_cli(store_dir, "--wait", "0", "compact", "--json")
    _, err = locked.communicate(timeout=120)
    assert locked.returncode == 4 and "busy" in err
    holder.close()
    missing = spawn_cli(store_dir, "restore", "20000101T000000000000-abcd")
    _, err = missing.communicate(timeout=120)
    assert missing.returncode == 5 and "no snapshot" in err
    unconfirmed = spawn_cli(store_dir, "forget", "c01", "--json")
    _, err = unconfirmed.communicate(timeout=120)
    assert unconfirmed.returncode == 2 and "--yes" in err
    bad_pin = spawn_cli(store_dir, "pin", "nope")
    bad_pin.communicate(timeout=120)
    assert bad_pin.returncode == 5


def test_interrupted_run_keeps_records_ingested_after_it(store_dir, make_engine, write_jsonl):
    engine = make_engine(store=store_dir)
    snapshot = engine.snapshot(reason="before compaction")
    from expengine.clock import utcnow

    engine.store.con.execute(
        "INSERT INTO runs VALUES ('run-killed', ?, NULL, FALSE, 'running', ?, NULL)", [utcnow(), snapshot.id]
    )
    engine.store.con.execute("UPDATE records SET state = 'dormant' WHERE id = 'c01'")  # DuckDB changed, LanceDB not
    engine.ingest([write_jsonl("late.jsonl", [dict(CHATTER[2], id="late", content="User u-101 moved to Lisbon")])])
    recovered = engine.recover_interrupted()
    assert recovered[0]["action"].startswith("kept (1 records ingested since)")
    assert state_of(engine)["late"] == "active"
    assert engine.store.index.count("memories", "id = 'c01' AND state = 'dormant'") == 1  # index agrees again
    assert engine.store.con.execute("SELECT status FROM runs WHERE id = 'run-killed'").fetchall() == [("interrupted",)]


def test_every_step_renders_its_own_summary_line(store_dir):
    """The CLI has no per-step code: each declared step's report carries the line `compact` prints."""
    from expengine.lifecycle.steps import STEPS

    report = invoke(store_dir, "compact", "--dry-run", "--json")
    assert list(report["steps"]) == [s.name for s in STEPS]  # the dry run takes no snapshot
    assert all(isinstance(step["summary"], str) and step["summary"] for step in report["steps"].values())
    assert report["steps"]["decay"]["summary"] == (
        f"{report['steps']['decay']['decayed']} decayed, {report['steps']['decay']['became_dormant']} dormant, "
        f"{report['steps']['decay']['units_dormant']} units dormant"
    )
    shown = CliRunner().invoke(app, ["--store", str(store_dir), "compact"], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    assert "archived," in shown.stdout and "chatter messages asleep" in shown.stdout
    help_text = " ".join(CliRunner().invoke(app, ["compact", "--help"]).stdout.split())
    assert all(s.does in help_text for s in STEPS), help_text
