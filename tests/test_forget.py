"""`forget` for privacy: structured filters, no raw SQL, and nothing left behind in any file of the store,
snapshots and old LanceDB versions included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import MARKER, OTHERS, SECRET, add_unit, ev, files_holding
from typer.testing import CliRunner

from expengine.cli import app
from expengine.errors import ExpengineError, NotFoundError
from expengine.store.index import MEMORIES, UNITS


@pytest.fixture
def compacted(make_engine, write_jsonl, tmp_path):
    """A store that ingested the secret session and compacted twice: two snapshots hold the secret."""
    engine = make_engine(overrides={"llm.mode": "template", "cluster.interval_new_memories": 1})
    engine.ingest([write_jsonl("log.jsonl", OTHERS + SECRET)])
    engine.compact()
    # a unit standing on secret records and on others (the templates refine none here: tool restatements)
    with engine.session():
        add_unit(engine, "u-seats", "Offer aisle seats first on long flights.", ["p00", "p02", "b09"], agent="bot")
    engine.ingest([write_jsonl("more.jsonl", [dict(SECRET[0], id="p99", ts="2026-03-01T11:00:00Z")])])
    engine.compact()
    return engine


def test_forget_removes_text_from_snapshots_and_every_file(compacted):
    engine, store = compacted, compacted.store_dir
    assert len(engine.snapshots()) == 2
    assert any("snapshots/" in f for f in files_holding(store, MARKER))  # the test can fail
    cited = {u["id"]: u["source_ids"] for u in engine.units() if any(s.startswith("p") for s in u["source_ids"])}
    assert cited  # a unit stands on the secret records, so provenance is exercised too

    result = engine.forget(sessions=["private"])

    assert result.records == len(SECRET) + 1 and result.snapshots == 2
    assert files_holding(store, MARKER) == []
    assert engine.store.con.execute("SELECT count(*) FROM records WHERE session = 'private'").fetchall()[0][0] == 0
    assert engine.store.index.count(MEMORIES, "session = 'private'") == 0
    left = {u["id"]: u for u in engine.units()}
    for unit_id in cited:
        if unit_id in left:
            assert not any(s.startswith("p") for s in left[unit_id]["source_ids"])
            assert left[unit_id]["support"] == len(left[unit_id]["source_ids"])
            assert engine.trace(unit_id)["missing_source_ids"] == []
        else:
            with pytest.raises(NotFoundError):
                engine.show(unit_id)
    with pytest.raises(NotFoundError):
        engine.show("p01")
    hits = engine.query("which seats does the user prefer on long flights", touch=False).to_dict()
    assert MARKER not in json.dumps(hits)
    restored = engine.restore(engine.snapshots()[-1].id)
    assert restored.raw_after == len(OTHERS)  # the oldest snapshot no longer holds the secret either
    assert engine.store.index.count(MEMORIES) == len(OTHERS)


def test_forget_drops_a_unit_that_quotes_a_forgotten_record(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", OTHERS + SECRET)])
    engine.store.con.execute(
        """INSERT INTO units (id, kind, text, category, agent, support, confidence, source_ids, method, created,
                                updated)
           VALUES ('u-quote', 'fact', ?, 'preference', 'bot', 2, 0.9, '["p00", "c03"]', 'test', now(), now()),
                  ('u-plain', 'fact', 'User u-101 prefers aisle seats', 'preference', 'bot', 2, 0.9, '["p00", "c03"]',
                   'test', now(), now())""",
        [f"User u-555 {MARKER} prefers aisle seats"],
    )
    result = engine.forget(ids=["p00"])
    assert (result.units_deleted, result.units_updated) == (1, 1)
    units = {u["id"]: u for u in engine.units()}
    assert "u-quote" not in units and units["u-plain"]["source_ids"] == ["c03"]


def test_forget_filters_combine_with_and(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", OTHERS + [dict(SECRET[0], agent="other-bot")])])
    plan = engine.forget(agents=["bot"], before="2026-03-01T09:05:00Z", dry_run=True)
    assert plan.dry_run and plan.ids == ["b01", "b02", "b03", "b04", "b05"]
    assert (
        engine.store.con.execute("SELECT count(*) FROM records").fetchall()[0][0] == len(OTHERS) + 1
    )  # nothing deleted
    picked = engine.forget(sessions=["s1", "s3"], agents=["bot"], ids=["b01", "c01", "r01"], dry_run=True)
    assert picked.ids == ["b01", "c01"]
    assert engine.forget(agents=["other-bot"]).ids == ["p00"]
    assert engine.forget(before="2026-03-01").records == 0  # a date is its midnight (UTC): nothing is older


def invoke(store: Path, *args: str, input: str | None = None):
    return CliRunner().invoke(app, ["--store", str(store), *args], input=input)


def failure(result) -> tuple[int, str]:
    """The exit code and message `expengine` would print for a domain error the runner saw raised."""
    assert isinstance(result.exception, ExpengineError), result.output
    return result.exception.exit_code, str(result.exception)


def test_cli_forget_ids_from_file_and_stdin_dry_run_and_confirmation(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    markup = ev("m1", 50, "note", session="s9", content="[bold]x[/x] markup")
    engine.ingest([write_jsonl("log.jsonl", OTHERS + [markup])])
    engine.close()
    store = tmp_path / "store"
    (tmp_path / "ids.txt").write_text("c01\n\nc02\n", encoding="utf-8")

    plan = invoke(store, "forget", "--ids-from", str(tmp_path / "ids.txt"), "--dry-run", "--json")
    assert plan.exit_code == 0 and json.loads(plan.stdout)["ids"] == ["c01", "c02"]
    shown = invoke(store, "forget", "--session", "s9", "--dry-run")
    assert shown.exit_code == 0 and "[bold]x[/x] markup" in shown.stdout  # log text is never markup
    code, message = failure(invoke(store, "forget", "c01", "--json"))
    assert code == 2 and "--yes" in message
    gone = invoke(store, "forget", "--ids-from", "-", "--yes", "--json", input="c01\nc02\n")
    assert gone.exit_code == 0 and json.loads(gone.stdout)["records"] == 2
    code, message = failure(invoke(store, "forget", "--session", "no-such-session", "--yes"))
    assert code == 5 and "no record matches" in message
    code, message = failure(invoke(store, "forget", "--ids-from", str(tmp_path / "absent.txt"), "--yes"))
    assert code == 2 and "cannot read --ids-from" in message
    assert "--where" not in invoke(store, "forget", "--help").stdout
    assert invoke(store, "stats", "--json").exit_code == 0


def test_a_forget_killed_after_commit_is_finished_on_next_open(make_engine, write_jsonl, tmp_path):
    """The ids are journalled in pending_index with the deletion, so LanceDB catches up when the store opens."""
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", OTHERS)])
    engine.store.con.execute("DELETE FROM records WHERE id = 'c01'")  # what a forget killed before LanceDB leaves
    engine.store.con.execute("INSERT INTO pending_index VALUES ('c01', 'memory')")
    engine.close()
    reopened = make_engine(store=tmp_path / "store")
    assert reopened.store.index.count(MEMORIES, "id = 'c01'") == 0 and reopened.store.index.count(UNITS) == 0
    assert reopened.store.index.count(MEMORIES) == len(OTHERS) - 1
