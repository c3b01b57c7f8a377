"""Each coding agent's reader, on small fixtures shaped as the tool's own source writes them: every
event type, every failure, and what is skipped (and counted) rather than stored."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from expengine.ingest.formats import aider, cline, gemini, goose, opencode, openhands

NOW = dt.datetime(2026, 1, 1)


def kinds(events):
    return [e.kind for e in events]


def test_gemini_session_maps_prompt_calls_failures_and_cancellations():
    doc = {
        "sessionId": "s1",
        "projectHash": "h",
        "messages": [
            {"id": "m1", "timestamp": "2025-12-01T10:00:00Z", "type": "user", "content": "run the tests"},
            {
                "id": "m2",
                "timestamp": "2025-12-01T10:00:05Z",
                "type": "gemini",
                "content": "Running them.",
                "thoughts": [{"subject": "plan", "description": "…"}],
                "toolCalls": [
                    {
                        "id": "c1",
                        "name": "run_shell_command",
                        "args": {"command": "cd app && pytest -x"},
                        "status": "error",
                        "result": [{"functionResponse": {"id": "c1", "response": {"error": "1 failed"}}}],
                    },
                    {
                        "id": "c2",
                        "name": "write_file",
                        "args": {"file_path": "/p/a.py"},
                        "status": "cancelled",
                        "result": [],
                    },
                ],
            },
            {"id": "m3", "timestamp": "2025-12-01T10:00:06Z", "type": "info", "content": "Request cancelled."},
            {"id": "m4", "timestamp": "2025-12-01T10:00:07Z", "type": "error", "content": "Quota exceeded"},
        ],
    }
    reader = gemini.GeminiReader(agent="a", now=NOW)
    events = reader.document(doc)
    assert kinds(events) == [
        "goal",
        "message",
        "message",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "observation",
    ]
    assert events[0].goal_description == "run the tests"
    assert events[3].tool_name == "pytest" and events[3].tool_args == {"command": "cd app && pytest -x"}
    assert events[4].tool_error == "1 failed"
    assert events[6].tool_error is None and events[6].meta["cancelled"] is True
    assert reader.skipped == {"thought": 1, "info": 1}


def test_gemini_jsonl_header_updates_rewinds_and_subagent_parent(tmp_path: Path):
    folder = tmp_path / "chats" / "parent-session"
    folder.mkdir(parents=True)
    (tmp_path / ".project_root").write_text("/home/me/shop\n")
    reader = gemini.GeminiReader(agent="a", path=str(folder / "sub.jsonl"), now=NOW)
    lines = [
        {"sessionId": "sub", "projectHash": "h", "startTime": "2026-01-01T00:00:00Z", "kind": "subagent"},
        {"id": "m1", "timestamp": "2026-01-01T00:00:01Z", "type": "user", "content": "find the bug"},
        {"$set": {"lastUpdated": "2026-01-01T00:00:02Z"}},
        {"$rewindTo": "m1"},
    ]
    events = [e for line in lines for e in reader.line(line)]
    assert kinds(events) == ["goal", "message"]
    assert events[0].meta["parent_session"] == "parent-session"
    assert events[0].meta["repo"] == "shop" and events[0].meta["session_kind"] == "subagent"
    assert reader.skipped == {"session update": 1, "rewind": 1}


def test_gemini_share_markdown_turns_and_tool_blocks():
    text = (
        "🧑‍💻 ## USER\n\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
        "I'm currently working in the directory: /home/me/shop\n\n---\n\n"
        "🧑‍💻 ## USER\n\nfix the build\n\n---\n\n"
        '✨ ## MODEL\n\n**Tool Command**:\n```json\n{"name": "run_shell_command", "args": {"command": "make"}}\n```\n\n---\n\n'
        '🧑‍💻 ## USER\n\n**Tool Response**:\n```json\n{"id": "x", "name": "run_shell_command", "response": {"error": "make: *** Error 2"}}\n```\n'
    )
    assert gemini.is_gemini_share(text)
    events = [e for _, es in gemini.share_events(text, "share.md", gemini.GeminiReader(agent="a", now=NOW)) for e in es]
    assert kinds(events) == ["goal", "message", "tool_call", "tool_result"]
    assert events[2].tool_name == "make" and events[3].tool_error == "make: *** Error 2"
    assert events[0].meta["repo"] == "shop"


def test_aider_history_runs_prompts_commands_edits_and_failures(tmp_path: Path):
    (tmp_path / ".git").mkdir()
    history = tmp_path / ".aider.chat.history.md"
    history.write_text(
        "\n# aider chat started at 2025-10-20 21:49:17\n\n"
        "> Aider v0.86.1  \n> Main model: gpt-4o with diff edit format  \n\n"
        "#### /add app.py  \n> Added app.py to the chat  \n\n"
        "#### make the tests pass  \n\n"
        "<thinking-content-7bbe>hmm</thinking-content-7bbe>\n\nI will fix `add`.\n\n"
        "> Tokens: 9.7k sent, 85 received. Cost: $0.01 message, $0.01 session.  \n"
        "> Applied edit to app.py  \n> Commit 54d022e fix add  \n\n"
        "#### /run pytest -q  \n"
        "> FAILED tests/test_app.py::test_add - assert 3 == 4  \n> 1 failed in 0.1s  \n\n"
        "#### /run ls  \n> app.py  \n"
    )
    reader = aider.AiderReader(agent="a", path=str(history), now=NOW)
    events = [e for _, es in reader.read(history.open()) for e in es]
    assert kinds(events) == [
        "goal", "message", "message", "tool_call", "tool_result", "tool_call", "tool_result",
        "tool_call", "tool_result", "tool_call", "tool_result",
    ]  # fmt: skip
    assert events[0].goal_description == "make the tests pass"
    assert events[0].session == f"{tmp_path.name}/2025-10-20T21:49:17" and events[0].meta["repo"] == tmp_path.name
    assert events[3].tool_name == "edit" and events[5].tool_name == "git"
    assert events[7].tool_name == "pytest" and "1 failed" in events[8].tool_error
    assert events[10].tool_error is None and events[10].tool_result == "app.py"
    assert reader.skipped["thinking"] == 1 and reader.skipped["token count"] == 1 and reader.skipped["banner"] == 2


def test_aider_traceback_block_is_an_error():
    reader = aider.AiderReader(agent="a", path=None, now=NOW)
    lines = [
        "# aider chat started at 2025-10-20 21:49:17",
        "#### hi",
        "> Traceback (most recent call last):",
        "> TypeError: boom",
    ]
    events = [e for _, es in reader.read(lines) for e in es]
    assert events[-1].kind == "tool_result" and "TypeError: boom" in events[-1].tool_error


def test_cline_ui_messages_task_commands_exit_codes_and_failed_requests(tmp_path: Path):
    task = tmp_path / "1733000000000"
    task.mkdir()
    ui = [
        {"ts": 1733000000000, "type": "say", "say": "task", "text": "add a health check"},
        {"ts": 1733000000100, "type": "say", "say": "api_req_started", "text": "{}"},
        {"ts": 1733000000200, "type": "say", "say": "reasoning", "text": "thinking…"},
        {"ts": 1733000000300, "type": "say", "say": "text", "text": "Running the tests."},
        {"ts": 1733000000400, "type": "ask", "ask": "command", "text": "npm test"},
        {"ts": 1733000000500, "type": "say", "say": "command_output", "text": "1 failing\nExit code: 1"},
        {
            "ts": 1733000000600,
            "type": "ask",
            "ask": "tool",
            "text": json.dumps({"tool": "editedExistingFile", "path": "src/app.ts"}),
        },
        {"ts": 1733000000700, "type": "ask", "ask": "api_req_failed", "text": "429 rate limited"},
        {"ts": 1733000000800, "type": "say", "say": "completion_result", "text": "Done."},
        {"ts": 1733000000900, "type": "say", "say": "text", "text": "partial", "partial": True},
    ]
    (task / cline.UI_FILE).write_text(json.dumps(ui))
    api = [{"role": "user", "content": [{"type": "text", "text": "<task>add a health check</task>"},
                                        {"type": "text", "text": "<environment_details>\n# Current Working Directory (/home/me/shop) Files\n</environment_details>"}]}]  # fmt: skip
    (task / cline.API_FILE).write_text(json.dumps(api))
    (task / cline.METADATA_FILE).write_text(json.dumps({"model_usage": [{"model_id": "claude-sonnet-4"}]}))
    reader = cline.ClineReader(agent="a", task=task.name, now=NOW, meta=cline.task_meta(task))
    events = reader.ui(ui)
    assert kinds(events) == [
        "goal",
        "message",
        "message",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "message",
    ]
    assert (
        events[0].session == "1733000000000"
        and events[0].meta["repo"] == "shop"
        and events[0].meta["model"] == "claude-sonnet-4"
    )
    assert events[3].tool_name == "npm" and events[4].tool_error and events[4].meta["exit_code"] == 1
    assert events[5].tool_name == "editedExistingFile" and "429" in events[6].tool_error
    assert reader.skipped == {"api_req_started": 1, "reasoning": 1, "partial": 1}


def test_cline_api_history_alone_reads_xml_tools_and_results():
    api = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nlist the files\n</task>"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "<thinking>x</thinking>\n<execute_command>\n<command>ls -la</command>\n</execute_command>",
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "[execute_command for 'ls -la'] Result:\nCommand executed.\nExit code: 2\nls: no",
                }
            ],
        },
    ]
    assert cline.is_cline_api(api)
    reader = cline.ClineReader(agent="a", task="1733000000000", now=NOW)
    events = reader.api(api)
    assert kinds(events) == ["goal", "message", "tool_call", "tool_result"]
    assert events[2].tool_name == "ls" and events[3].tool_error and reader.skipped["thinking"] == 1


def test_openhands_v0_events_exit_codes_and_edit_errors():
    history = [
        {"id": 0, "source": "agent", "action": "system", "args": {"content": "You are OpenHands"}},
        {"id": 1, "timestamp": "2025-04-30T16:32:54", "source": "user", "action": "message", "args": {"content": "fix the segfault"}},
        {"id": 2, "timestamp": "2025-04-30T16:32:55", "source": "agent", "action": "run", "args": {"command": "make", "thought": "build"}},
        {"id": 3, "timestamp": "2025-04-30T16:32:56", "source": "agent", "observation": "run", "cause": 2, "content": "Error 2",
         "extras": {"command": "make", "metadata": {"exit_code": 2, "working_dir": "/workspace/ponyc"}}},
        {"id": 4, "timestamp": "2025-04-30T16:32:57", "source": "agent", "action": "edit", "args": {"path": "a.c", "command": "str_replace"}},
        {"id": 5, "timestamp": "2025-04-30T16:32:58", "source": "agent", "observation": "edit", "cause": 4, "content": "ERROR:\nNo replacement"},
        {"id": 6, "timestamp": "2025-04-30T16:32:59", "source": "agent", "action": "finish", "args": {"final_thought": "Fixed."}},
    ]  # fmt: skip
    reader = openhands.OpenHandsReader(agent="a", session="t1", now=NOW)
    events = reader.output({"instance_id": "ponylang__ponyc-1", "instruction": "x", "history": history})
    assert kinds(events) == ["goal", "message", "tool_call", "tool_result", "tool_call", "tool_result", "message"]
    assert events[2].tool_name == "make" and events[3].tool_error == "Error 2" and events[3].meta["exit_code"] == 2
    assert events[4].tool_name == "edit" and events[5].tool_error.startswith("ERROR")
    assert events[0].meta["repo"] == "ponylang/ponyc"
    assert reader.skipped == {"system": 1, "thought": 1}


def test_openhands_v1_sdk_events():
    reader = openhands.OpenHandsReader(agent="a", session="c1", now=NOW)
    events = [
        {"kind": "SystemPromptEvent", "id": "e0", "source": "agent"},
        {"kind": "MessageEvent", "id": "e1", "source": "user", "llm_message": {"role": "user", "content": [{"type": "text", "text": "mail the report"}]}},
        {"kind": "ActionEvent", "id": "e2", "source": "agent", "thought": [{"text": "t"}], "tool_name": "execute_bash", "tool_call_id": "k1",
         "action": {"kind": "ExecuteBashAction", "command": "mail -s r x@y"}},
        {"kind": "ObservationEvent", "id": "e3", "source": "environment", "tool_name": "execute_bash", "tool_call_id": "k1",
         "observation": {"kind": "ExecuteBashObservation", "output": "mail: command not found", "exit_code": None, "metadata": {"exit_code": 127}}},
    ]  # fmt: skip
    out = [e for ev in events for e in reader.one(ev)]
    assert kinds(out) == ["goal", "message", "tool_call", "tool_result"]
    assert out[2].tool_name == "mail" and out[3].tool_error == "mail: command not found"
    assert reader.skipped == {"SystemPromptEvent": 1, "thought": 1}


def test_opencode_export_tools_errors_aborts_and_reasoning():
    export = {
        "info": {"id": "ses_1", "directory": "/home/me/shop", "time": {"created": 1733000000000}},
        "messages": [
            {"info": {"id": "msg_1", "role": "user", "time": {"created": 1733000000000}},
             "parts": [{"id": "prt_1", "type": "text", "text": "run the linter"}]},
            {"info": {"id": "msg_2", "role": "assistant", "time": {"created": 1733000001000}},
             "parts": [
                 {"id": "prt_2", "type": "reasoning", "text": "…"},
                 {"id": "prt_3", "type": "tool", "tool": "bash", "callID": "t1",
                  "state": {"status": "completed", "input": {"command": "ruff check ."}, "output": "E501", "metadata": {"exit": 1}}},
                 {"id": "prt_4", "type": "tool", "tool": "edit", "callID": "t2",
                  "state": {"status": "error", "input": {"filePath": "a.py"}, "error": "Tool execution aborted"}},
                 {"id": "prt_5", "type": "step-finish"},
             ]},
        ],
    }  # fmt: skip
    assert opencode.is_opencode_export(export)
    events, reader = opencode.export_events(export, agent="a", now=NOW)
    assert kinds(events) == ["goal", "message", "tool_call", "tool_result", "tool_call", "tool_result"]
    assert events[2].tool_name == "ruff" and events[3].tool_error == "E501"
    assert events[5].tool_error is None and events[5].meta["cancelled"] is True
    assert events[0].meta["repo"] == "shop" and reader.skipped == {"reasoning": 1, "step-finish": 1}


def test_opencode_storage_folders_read_as_one_session(tmp_path: Path):
    storage = tmp_path / "storage"
    session = storage / "session" / "proj" / "ses_1.json"
    session.parent.mkdir(parents=True)
    session.write_text(json.dumps({"id": "ses_1", "projectID": "proj", "directory": "/srv/api"}))
    (storage / "message" / "ses_1").mkdir(parents=True)
    (storage / "message" / "ses_1" / "msg_1.json").write_text(
        json.dumps({"id": "msg_1", "role": "user", "time": {"created": 1}})
    )
    (storage / "part" / "msg_1").mkdir(parents=True)
    (storage / "part" / "msg_1" / "prt_1.json").write_text(json.dumps({"id": "prt_1", "type": "text", "text": "hello"}))
    events, _ = opencode.export_events(opencode.stored_session(session), agent="a", now=NOW)
    assert kinds(events) == ["goal", "message"] and events[1].content == "hello"


def test_goose_session_lines():
    reader = goose.GooseReader(agent="a", session="20250101_1", now=NOW)
    lines = [
        {"working_dir": "/home/me/shop", "description": "tests", "message_count": 3},
        {"role": "user", "created": 1733000000, "content": [{"type": "text", "text": "run the tests"}]},
        {"role": "assistant", "created": 1733000001, "content": [
            {"type": "thinking", "thinking": "…"},
            {"type": "toolRequest", "id": "r1", "toolCall": {"status": "success", "value": {"name": "developer__shell", "arguments": {"command": "cargo test"}}}}]},
        {"role": "user", "created": 1733000002, "content": [
            {"type": "toolResponse", "id": "r1", "toolResult": {"status": "error", "error": "test failed"}}]},
    ]  # fmt: skip
    assert goose.is_goose_metadata(lines[0]) and goose.is_goose_message(lines[1])
    events = [e for n, line in enumerate(lines, 1) for e in reader.events(line, n)]
    assert kinds(events) == ["goal", "message", "tool_call", "tool_result"]
    assert events[2].tool_name == "cargo" and events[3].tool_error == "test failed" and events[3].meta["repo"] == "shop"
    assert reader.skipped == {"metadata": 1, "thinking": 1}


def test_every_registered_format_has_its_row_in_the_log_formats_page():
    from expengine.ingest.formats import FORMATS

    page = (Path(__file__).parents[1] / "docs" / "log-formats.md").read_text(encoding="utf-8")
    table = [line for line in page.splitlines() if line.startswith("| **")]
    assert [f.name for f in FORMATS if not any(f"`{f.name}`" in row for row in table)] == []


def test_every_tool_sources_finds_has_its_row_in_the_readme():
    from expengine.ingest.discovery import TOOLS

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1].strip() for line in readme.splitlines() if line.startswith("| ") and "`" in line]
    names = {"claude-code": "Claude Code", "codex": "Codex", "gemini-cli": "Gemini CLI", "cline": "Cline",
             "roo-code": "Roo Code", "opencode": "opencode", "goose": "Goose", "openhands": "OpenHands", "aider": "Aider"}  # fmt: skip
    assert sorted(names) == sorted(TOOLS)
    assert [t for t in TOOLS if not any(names[t] in row for row in rows)] == []
