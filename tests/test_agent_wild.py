"""The agent readers on real logs these tools wrote in public repositories (`../shared/data/wild/`):
every message read, every failed command an error, the project found."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from expengine.ingest.formats import aider, gemini, openhands

WILD = Path(__file__).parents[1] / ".." / "shared" / "data" / "wild"
NOW = dt.datetime(2026, 1, 1)


def wild(*parts: str) -> Path:
    path = WILD.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing (CI must have ../shared/data/wild)")
        pytest.skip("../shared/data/wild is not available")
    return path


def test_gemini_cli_session_reads_every_message_and_call():
    doc = json.loads(wild("gemini-cli", "codemie", "session-2025-12-01T21-45-5b959dae.json").read_text())
    reader = gemini.GeminiReader(agent="a", now=NOW)
    events = reader.document(doc)
    calls = sum(len(m.get("toolCalls") or []) for m in doc["messages"])
    assert sum(e.kind == "tool_call" for e in events) == calls == sum(e.kind == "tool_result" for e in events)
    texts = [m for m in doc["messages"] if str(m.get("content") or "").strip()]
    assert sum(e.kind == "message" for e in events) == len(texts)
    assert events[0].kind == "goal" and events[0].goal_description == "hi"
    assert reader.skipped["thought"] > 0 and len({e.id for e in events}) == len(events)


@pytest.mark.parametrize("name", ["agent-chat-share.md", "current.md"])
def test_gemini_cli_share_exports_pair_commands_with_responses(name: str):
    text = wild("gemini-cli", "go-ai-agent-v2", name).read_text(encoding="utf-8")
    assert gemini.is_gemini_share(text)
    events = [e for _, es in gemini.share_events(text, name, gemini.GeminiReader(agent="a", now=NOW)) for e in es]
    calls = [e for e in events if e.kind == "tool_call"]
    results = [e for e in events if e.kind == "tool_result"]
    # a tool's output may quote the export code itself: only a marker at a line's start opens a block
    assert len(calls) == text.count("\n**Tool Command**:\n```json") and len(results) == text.count(
        "\n**Tool Response**:\n```json"
    )
    errors = sum(block.split("```", 2)[1].count('"error":') > 0 for block in text.split("\n**Tool Response**:\n")[1:])
    assert sum(bool(e.tool_error) for e in results) == errors > 0
    assert {e.meta.get("repo") for e in events} == {"go-ai-agent-v2"}


def test_gemini_cli_prompt_log():
    entries = json.loads(wild("gemini-cli", "codemie", "logs.json").read_text())
    assert gemini.is_gemini_prompt_log(entries)
    events = gemini.prompt_log_events(entries, agent="a", now=NOW)
    assert [e.content for e in events] == [e["message"] for e in entries]


@pytest.mark.parametrize("project", ["Monochromatic", "OpenCoder", "zen-mcp-server"])
def test_aider_histories_split_into_runs_with_prompts_and_errors(project: str):
    path = wild("aider", project, ".aider.chat.history.md")
    lines = path.read_text(encoding="utf-8").splitlines()
    reader = aider.AiderReader(agent="a", path=str(path), now=NOW)
    events = [e for _, es in reader.read(lines) for e in es]
    prompts = [e for e in events if e.kind == "message" and e.role == "user"]
    typed = [line for line in lines if line.startswith("#### ") and not line[5:].lstrip().startswith(("/", "!"))]
    assert len(prompts) <= len(typed) and len({e.session for e in events}) <= sum(map(aider.is_aider_history, lines))
    tracebacks = sum((e.tool_error or "").count("Traceback (most recent call last)") for e in events)
    assert tracebacks == sum(line.startswith("> Traceback") for line in lines)
    assert {e.meta["repo"] for e in events} <= {project} and len({e.id for e in events}) == len(events)


@pytest.mark.parametrize(
    "where",
    ["OpenHands/multi_swe_bench_examples", "OpenHands/resolver_mock_output", "benchmarks/openagentsafety_gpt-4o"],
)
def test_openhands_output_every_failed_command_is_an_error(where: str):
    for number, line in enumerate(wild("openhands", *where.split("/"), "output.jsonl").read_text().splitlines()):
        task = json.loads(line)
        assert openhands.is_openhands_output(task)
        reader = openhands.OpenHandsReader(agent="a", session=str(task.get("instance_id") or number), now=NOW)
        events = reader.output(task)
        assert events[0].kind == "goal" and len({e.id for e in events}) == len(events)
        flat = [e for item in task["history"] for e in (item if isinstance(item, list) else [item])]
        failed = 0
        for e in flat:
            obs = e.get("observation")
            extras = e.get("extras") or {}
            code = extras.get("exit_code", (extras.get("metadata") or {}).get("exit_code")) if obs == "run" else None
            if isinstance(obs, dict):  # V1
                code = (
                    obs.get("exit_code")
                    if obs.get("exit_code") is not None
                    else (obs.get("metadata") or {}).get("exit_code")
                )
            failed += isinstance(code, int) and code not in (0, -1)
        results = [e for e in events if e.kind == "tool_result"]
        assert sum(e.meta.get("exit_code") not in (None, 0, -1) and bool(e.tool_error) for e in results) == failed
