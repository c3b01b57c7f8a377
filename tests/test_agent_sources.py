"""Agent logs found where they live, and read from where the last run stopped: a file that grows, one
rewritten, one rotated, a half-written last line, and a kill -9 in the middle of a run."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from helpers import HEAVY_MODULES, cli_then_modules, run_offline_python
from test_compact_cli import paused_cli

from expengine.ingest.discovery import find_sources
from expengine.store.pause import PAUSE_MARKER


def claude_line(n: int, text: str | None = None, session: str = "s1") -> str:
    return json.dumps(
        {
            "type": "user" if n % 2 == 0 else "assistant",
            "sessionId": session,
            "uuid": f"{session}-u{n}",
            "timestamp": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z",
            "cwd": "/home/me/shop",
            "message": {"role": "user", "content": text or f"step {n}: run the tests with pytest -x"},
        }
    )


def session_file(home: Path, lines: list[str], name: str = "s1.jsonl") -> Path:
    path = home / "claude" / "projects" / "-home-me-shop" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_sources_are_found_where_each_tool_keeps_them(home: Path, tmp_path: Path):
    session_file(home, [claude_line(0)])
    rollout = home / "codex" / "sessions" / "2026" / "01" / "01" / "rollout-x.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_text("{}\n")
    chats = home / ".gemini" / "tmp" / "abc" / "chats"
    (chats / "parent").mkdir(parents=True)
    (chats / "session-1.json").write_text("{}")
    (chats / "parent" / "sub.jsonl").write_text("{}\n")
    task = home / "config" / "Code" / "User" / "globalStorage" / "saoudrizwan.claude-dev" / "tasks" / "1733000000000"
    task.mkdir(parents=True)
    (task / "ui_messages.json").write_text("[]")
    (task / "api_conversation_history.json").write_text("[]")
    roo = home / "config" / "Cursor" / "User" / "globalStorage" / "rooveterinaryinc.roo-cline" / "tasks" / "17"
    roo.mkdir(parents=True)
    (roo / "api_conversation_history.json").write_text("[]")
    session = home / "data" / "opencode" / "storage" / "session" / "proj" / "ses_1.json"
    session.parent.mkdir(parents=True)
    session.write_text("{}")
    goose = home / "data" / "goose" / "sessions" / "g1.jsonl"
    goose.parent.mkdir(parents=True)
    goose.write_text("{}\n")
    events = home / ".openhands" / "sessions" / "sid" / "events"
    events.mkdir(parents=True)
    (events / "0.json").write_text("{}")
    project = tmp_path / "src" / "shop"
    (project / "node_modules" / "x").mkdir(parents=True)
    (project / ".aider.chat.history.md").write_text("# aider chat started at 2026-01-01 00:00:00\n")
    (project / "node_modules" / "x" / ".aider.chat.history.md").write_text("")

    found = {(s.tool, Path(s.path).name, s.kind) for s in find_sources(None, [str(tmp_path / "src")])}
    assert found == {
        ("claude-code", "s1.jsonl", "lines"),
        ("codex", "rollout-x.jsonl", "lines"),
        ("gemini-cli", "session-1.json", "whole"),
        ("gemini-cli", "sub.jsonl", "lines"),
        ("cline", "ui_messages.json", "whole"),
        ("roo-code", "api_conversation_history.json", "whole"),
        ("opencode", "ses_1.json", "whole"),
        ("goose", "g1.jsonl", "lines"),
        ("openhands", "events", "folder"),
        ("aider", ".aider.chat.history.md", "whole"),
    }
    assert {s.tool for s in find_sources(["goose", "codex"], None)} == {"goose", "codex"}


def records(engine) -> int:
    return engine.store.con.execute("SELECT count(*) FROM records").fetchall()[0][0]


def test_a_growing_file_is_read_from_its_cursor_and_a_half_line_waits(home: Path, make_engine):
    path = session_file(home, [claude_line(n) for n in range(6)])
    engine = make_engine()
    first = engine.ingest_agents(["claude-code"])
    stored = records(engine)
    assert first.read_sources == 1 and first.ingest.stored == stored > 0

    again = engine.ingest_agents(["claude-code"])
    assert again.unchanged == 1 and again.bytes_read == 0 and again.ingest.read == 0

    grown = "".join(claude_line(n) + "\n" for n in range(6, 8))
    half = claude_line(8)
    with path.open("a") as f:
        f.write(grown + half[:20])
    third = engine.ingest_agents(["claude-code"])
    assert third.by_reason == {"grown": 1} and third.bytes_read == len(grown.encode())
    assert third.ingest.duplicates == 0 and records(engine) == stored + third.ingest.stored
    assert engine.store.con.execute("SELECT max(source_line) FROM records").fetchall()[0][0] == 8

    with path.open("a") as f:
        f.write(half[20:] + "\n")
    fourth = engine.ingest_agents(["claude-code"])
    assert fourth.bytes_read == len(half) + 1 and fourth.ingest.stored >= 1
    assert engine.sources(["claude-code"])[0].new_bytes == 0


def test_a_rewritten_or_rotated_file_is_read_again_from_its_start_idempotently(home: Path, make_engine):
    path = session_file(home, [claude_line(n) for n in range(4)])
    engine = make_engine()
    engine.ingest_agents(["claude-code"])
    before = records(engine)

    path.write_text("".join(claude_line(n) + "\n" for n in range(4)).replace("step 0", "step zero"))
    rewritten = engine.ingest_agents(["claude-code"])
    assert rewritten.by_reason == {"rewritten": 1} and rewritten.bytes_read == path.stat().st_size
    assert rewritten.ingest.duplicates == rewritten.ingest.read - rewritten.ingest.stored

    os.rename(path, path.with_suffix(".jsonl.1"))
    session_file(home, [claude_line(n, session="s2") for n in range(3)])
    rotated = engine.ingest_agents(["claude-code"])
    assert rotated.by_reason == {"rotated": 1} and rotated.ingest.stored > 0
    assert records(engine) >= before


def test_a_run_killed_mid_way_leaves_its_cursors_and_the_next_run_stores_nothing_twice(
    home: Path, make_engine, tmp_path: Path
):
    session_file(home, [claude_line(n) for n in range(3000)])
    store = tmp_path / "store"
    child = paused_cli(store, "ingest-batch", "ingest", "--from-agents", "claude-code")
    child.send_signal(signal.SIGKILL)
    child.communicate()
    (store / (PAUSE_MARKER + "ingest-batch")).unlink()

    engine = make_engine(store=store)
    assert engine.store.con.execute("SELECT count(*) FROM source_cursors").fetchall()[0][0] == 0
    partial = records(engine)
    result = engine.ingest_agents(["claude-code"])
    assert result.by_reason == {"new": 1} and result.ingest.duplicates == partial
    total = records(engine)
    assert total == partial + result.ingest.stored
    assert engine.store.con.execute("SELECT count(DISTINCT id) FROM records").fetchall()[0][0] == total


# and those a cron's ingest leaves out: pyarrow, and the pandas that building an Arrow table imports (35 MB)
CRON_HEAVY = (*HEAVY_MODULES, "pyarrow", "pandas")


def cli_modules(store: Path, *args: str) -> tuple[dict, list[str]]:
    """`expengine --store STORE ARGS --json` in a new process: its output, and the heavy modules it loaded."""
    done = run_offline_python("-c", cli_then_modules(CRON_HEAVY), "--store", str(store), *args, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout), json.loads(done.stderr.strip().splitlines()[-1])


def test_a_run_with_nothing_new_to_store_loads_neither_lance_nor_the_encoder(home: Path, tmp_path: Path):
    """A nightly run where no log gained a whole line reads the cursors in DuckDB and stops there."""
    path = session_file(home, [claude_line(n) for n in range(4)])
    store = tmp_path / "store"
    first, loaded = cli_modules(store, "ingest", "--from-agents", "claude-code")
    # the records go into DuckDB only: LanceDB's half waits for the next open that heals (below, `stats`)
    assert first["ingest"]["stored"] > 0 and "onnxruntime" in loaded
    assert not {"lance", "lancedb", "pyarrow", "pandas"} & set(loaded), loaded  # its peak memory: the encoder, DuckDB
    again, loaded = cli_modules(store, "ingest", "--from-agents", "claude-code")
    assert again["by_reason"] == {"unchanged": 1} and again["bytes_read"] == 0 and loaded == [], loaded

    with path.open("a") as f:
        f.write(claude_line(4)[:20])  # half a line: it waits for the rest
    listed, loaded = cli_modules(store, "sources", "claude-code")
    assert listed["sources"][0]["new_bytes"] == 20 and loaded == [], loaded
    waiting, loaded = cli_modules(store, "ingest", "--from-agents", "claude-code")
    assert waiting["by_reason"] == {"grown": 1} and waiting["ingest"]["read"] == 0 and loaded == [], loaded

    with path.open("a") as f:
        f.write(claude_line(4)[20:] + "\n")
    grown, loaded = cli_modules(store, "ingest", "--from-agents", "claude-code")
    assert grown["bytes_read"] == len(claude_line(4)) + 1 and grown["ingest"]["duplicates"] == 0
    assert not {"lance", "lancedb", "pyarrow"} & set(loaded), (
        loaded
    )  # the first run's pending rows are left pending too
    stats, _ = cli_modules(store, "stats")
    assert stats["raw"] == first["ingest"]["stored"] + grown["ingest"]["stored"] == stats["indexed_memories"]


def test_an_ingest_that_leaves_lancedb_to_the_next_open_is_found_by_the_next_query(
    home: Path, tmp_path: Path, make_engine
):
    """`ingest --from-agents` defers the LanceDB append: the next query heals it first, so both its
    vector and its full-text search find what the ingest stored, and nothing is left pending."""
    session_file(home, [claude_line(0, "the flaky checkout test needs TZ=UTC before pytest"), claude_line(1)])
    store = tmp_path / "store"
    first, loaded = cli_modules(store, "ingest", "--from-agents", "claude-code")
    assert first["ingest"]["stored"] >= 2 and "lancedb" not in loaded
    found, loaded = cli_modules(store, "query", "flaky checkout test timezone", "--no-touch")
    assert "lancedb" in loaded  # this open appended the pending rows
    assert any("TZ=UTC" in hit["text"] for hit in found["hits"]), found["hits"]
    engine = make_engine(store=store)
    assert engine.store.con.execute("SELECT count(*) FROM pending_index").fetchall()[0][0] == 0
    assert engine.store.index.count("memories") == first["ingest"]["stored"]
    assert "TZ=UTC" in engine.query("TZ=UTC", k=1, touch=False).hits[0].text
