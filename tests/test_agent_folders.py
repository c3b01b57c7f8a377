"""`ingest` on folders as the agents leave them: a Cline task folder is one session, a Gemini CLI
`chats/` folder its sessions with their subagents, a project root its Aider history; a file in no
known format is an error naming the formats."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from expengine.cli import app
from expengine.errors import InputError


def ingest(store: Path, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(app, ["--store", str(store), "ingest", *args, "--json"])
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return result.exit_code, json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {"output": result.output}


def sessions(engine) -> dict[str, int]:
    return dict(engine.store.con.execute("SELECT session, count(*) FROM records GROUP BY session").fetchall())


def cline_task(folder: Path) -> Path:
    folder.mkdir(parents=True)
    ui = [
        {"ts": 1733000000000, "type": "say", "say": "task", "text": "add a health check"},
        {"ts": 1733000000400, "type": "ask", "ask": "command", "text": "npm test"},
        {"ts": 1733000000500, "type": "say", "say": "command_output", "text": "1 failing\nExit code: 1"},
    ]
    (folder / "ui_messages.json").write_text(json.dumps(ui))
    api = [{"role": "user", "content": [{"type": "text", "text": "<task>add a health check</task>"}]}]
    (folder / "api_conversation_history.json").write_text(json.dumps(api, indent=2))
    (folder / "task_metadata.json").write_text(json.dumps({"model_usage": [{"model_id": "claude"}]}))
    return folder


def test_a_cline_task_folder_is_one_session_and_a_lone_api_history_reads_alone(tmp_path: Path, make_engine):
    task = cline_task(tmp_path / "tasks" / "1733000000000")
    code, result = ingest(tmp_path / "store", str(task))
    assert code == 0 and result["rejected"] == 0 and result["stored"] == 4
    lone = tmp_path / "copied" / "1733000009999"
    lone.mkdir(parents=True)
    (lone / "api_conversation_history.json").write_text((task / "api_conversation_history.json").read_text())
    code, result = ingest(tmp_path / "store", str(lone / "api_conversation_history.json"))
    assert code == 0 and result["stored"] == 2
    engine = make_engine(store=tmp_path / "store")
    assert sessions(engine) == {"1733000000000": 4, "1733000009999": 2}
    error = engine.store.con.execute(
        "SELECT tool_name, tool_error FROM records WHERE tool_error IS NOT NULL"
    ).fetchall()
    assert error == [("npm", "1 failing\nExit code: 1")]


def test_a_gemini_chats_folder_reads_sessions_with_their_subagents(tmp_path: Path, make_engine):
    chats = tmp_path / "tmp" / "abc" / "chats"
    (chats / "s1").mkdir(parents=True)
    message = {"id": "m1", "timestamp": "2026-01-01T00:00:00Z", "type": "user", "content": "fix the build"}
    (chats / "session-1.json").write_text(json.dumps({"sessionId": "s1", "projectHash": "h", "messages": [message]}))
    sub = [
        {"sessionId": "sub1", "projectHash": "h", "startTime": "2026-01-01T00:00:01Z", "kind": "subagent"},
        {**message, "id": "m2", "content": "look for the failing target"},
    ]
    (chats / "s1" / "sub1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in sub))
    code, result = ingest(tmp_path / "store", str(chats))
    assert code == 0 and result["rejected"] == 0 and result["stored"] == 4
    engine = make_engine(store=tmp_path / "store")
    assert sessions(engine) == {"s1": 2, "sub1": 2}
    parents = engine.store.con.execute(
        "SELECT DISTINCT json_extract_string(meta, '$.parent_session') FROM records WHERE session = 'sub1'"
    ).fetchall()
    assert parents == [("s1",)]


def test_a_project_root_reads_its_aider_history_and_a_text_file_is_an_error(tmp_path: Path):
    project = tmp_path / "shop"
    project.mkdir()
    (project / ".aider.chat.history.md").write_text(
        "# aider chat started at 2026-01-01 10:00:00\n\n#### run the tests\n\nOk.\n"
    )
    (project / "notes.md").write_text("# notes\n")
    code, result = ingest(tmp_path / "store", str(project))
    assert code == 0 and result["stored"] == 3
    error = CliRunner().invoke(app, ["--store", str(tmp_path / "store"), "ingest", str(project / "notes.md")]).exception
    assert isinstance(error, InputError) and error.exit_code == 2  # the CLI prints it as one error line
    assert "notes.md is in no log format" in str(error) and "--format" in str(error)
