"""opencode's and Goose's SQLite stores: found where the tools keep them, read read-only, and read again
only from the last row read (a tool call that completes later rewrites its row: its result is read)."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pytest
from agent_databases import Goose, Opencode
from test_agent_sources import records

from expengine.ingest.discovery import find_sources
from expengine.ingest.formats import goose, opencode
from expengine.ingest.formats.sqlite import Scan, connect

T = 1_733_000_000_000  # ms
NOW = dt.datetime(2026, 1, 1)


def opencode_db(home: Path) -> tuple[Opencode, Path]:
    path = home / "data" / "opencode" / "opencode.db"
    db = Opencode(path)
    db.session("ses_1", "/home/me/shop", T)
    db.message("msg_1", "ses_1", "user", T)
    db.part("prt_1", "msg_1", "ses_1", T, {"type": "text", "text": "run the tests please"})
    db.message("msg_2", "ses_1", "assistant", T + 10, path={"cwd": "/home/me/shop", "root": "/home/me/shop"})
    db.part("prt_2", "msg_2", "ses_1", T + 11, {"type": "reasoning", "text": "…"})
    db.part(
        "prt_3",
        "msg_2",
        "ses_1",
        T + 12,
        {
            "type": "tool",
            "tool": "bash",
            "callID": "c1",
            "state": {"status": "running", "input": {"command": "npm test"}},
        },
    )
    return db, path


def complete_npm_test(db: Opencode, t: int, output: str, code: int) -> None:
    """The running `npm test` call's part, rewritten as opencode does when the call ends."""
    state = {"status": "completed", "input": {"command": "npm test"}, "output": output, "metadata": {"exit": code}}
    db.part("prt_3", "msg_2", "ses_1", t, {"type": "tool", "tool": "bash", "callID": "c1", "state": state})


def goose_db(home: Path) -> tuple[Goose, Path]:
    path = home / "data" / "goose" / "sessions" / "sessions.db"
    db = Goose(path)
    db.session("20260101_1", "/home/me/shop")
    db.message("20260101_1", "user", 1733000000, [{"type": "text", "text": "run the tests"}], "m1")
    call = {"name": "developer__shell", "arguments": {"command": "cargo test"}}
    db.message(
        "20260101_1",
        "assistant",
        1733000001,
        [
            {"type": "thinking", "thinking": "…"},
            {"type": "toolRequest", "id": "r1", "toolCall": {"status": "success", "value": call}},
        ],
        "m2",
    )
    return db, path


def read_all(module, path: Path, since: int = 0) -> tuple[list, Scan]:
    scan = Scan(since, since)
    con = connect(str(path))
    try:
        return list(module.database_reads(con, scan, agent="a", now=NOW)), scan
    finally:
        con.close()


def test_opencode_database_maps_text_tools_and_skips_reasoning(home: Path):
    db, path = opencode_db(home)
    complete_npm_test(db, T + 20, "1 failing", 1)
    db.message("msg_3", "ses_1", "assistant", T + 30, error={"name": "APIError", "data": {"message": "overloaded"}})
    reads, scan = read_all(opencode, path)
    events = [r[1] for r in reads if r[1] is not None]
    assert [e.kind for e in events] == ["goal", "message", "tool_call", "tool_result", "tool_result"]
    assert events[2].tool_name == "npm" and events[2].tool_args == {"command": "npm test"}
    assert events[3].tool_error == "1 failing" and events[3].meta["exit_code"] == 1
    assert events[4].tool_error == "APIError: overloaded" and events[0].meta["repo"] == "shop"
    assert [r[3] for r in reads if r[1] is None] == ["reasoning"]
    assert scan.mark == T + 30 and scan.bytes_read > 0


def test_goose_database_maps_messages_and_reads_on_from_the_last_id(home: Path):
    db, path = goose_db(home)
    reads, scan = read_all(goose, path)
    events = [r[1] for r in reads if r[1] is not None]
    assert [e.kind for e in events] == ["goal", "message", "tool_call"] and events[2].tool_name == "cargo"
    assert events[0].meta["repo"] == "shop" and [r[3] for r in reads if r[1] is None] == ["thinking"]
    assert scan.mark == 2
    db.message(
        "20260101_1",
        "user",
        1733000002,
        [{"type": "toolResponse", "id": "r1", "toolResult": {"status": "error", "error": "test failed"}}],
        "m3",
    )
    db.message("20260101_1", "user", 1733000003, [{"type": "text", "text": "now fix it"}], "m4")
    later, scan = read_all(goose, path, since=scan.mark)
    kinds = [r[1].kind for r in later if r[1] is not None]
    assert kinds == ["tool_result", "message"] and scan.mark == 4  # the session had its goal already


def test_a_database_that_is_not_there_is_never_created(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        connect(str(tmp_path / "opencode.db"))
    assert list(tmp_path.iterdir()) == []


def test_databases_are_found_ingested_and_read_again_only_where_rows_changed(home: Path, make_engine):
    oc, oc_path = opencode_db(home)
    gs, gs_path = goose_db(home)
    found = {(s.tool, Path(s.path).name, s.kind) for s in find_sources(["opencode", "goose"])}
    assert found == {("opencode", "opencode.db", "database"), ("goose", "sessions.db", "database")}
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (oc_path, gs_path)}

    engine = make_engine()
    first = engine.ingest_agents(["opencode", "goose"])
    stored = records(engine)
    assert first.read_sources == 2 and first.ingest.stored == stored == 6 and first.ingest.rejected == 0
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (oc_path, gs_path)} == before  # read-only

    again = engine.ingest_agents(["opencode", "goose"])
    assert again.unchanged == 2 and again.bytes_read == 0 and again.ingest.read == 0

    complete_npm_test(oc, T + 50, "ok", 0)
    gs.message("20260101_1", "user", 1733000009, [{"type": "text", "text": "and the linter"}], "m9")
    third = engine.ingest_agents(["opencode", "goose"])
    assert third.by_reason == {"grown": 2}
    assert third.ingest.stored == 2 and records(engine) == stored + 2  # the npm result, the new message
    results = engine.store.con.execute("SELECT count(*) FROM records WHERE kind = 'tool_result'").fetchall()[0][0]
    assert results == 1
    assert [r.new_bytes for r in engine.sources(["opencode", "goose"])] == [0, 0]
    oc.close()
    gs.close()
