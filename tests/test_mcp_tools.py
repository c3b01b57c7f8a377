"""The MCP tools beside query: ingest that does not wait (receipt + memory_status), units, forget, version."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

from helpers import BOOKING, REFUND, mcp_params, paused_cli

from expengine import __version__

NEW = {
    "id": "late-1",
    "ts": "2026-03-05T10:00:00Z",
    "kind": "note",
    "agent": "support-bot",
    "session": "s9",
    "content": "Always confirm the refund amount before calling issue_refund.",
}


def _paused_compaction(store: Path) -> Any:
    """A real `expengine compact` holding the store lock, stopped after its decay step."""
    return paused_cli(store, "decay", "compact", "--no-refine")


async def _session(store: Path, compaction: Any) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    seen: dict[str, Any] = {}
    async with stdio_client(mcp_params(store)) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        seen["version"] = init.server_info.version
        seen["tools"] = {t.name: t.input_schema for t in (await session.list_tools()).tools}
        started = time.perf_counter()
        queued = await session.call_tool("memory_ingest", {"records": [NEW], "wait": False})
        seen["answer_ms"] = 1000 * (time.perf_counter() - started)
        seen["queued"] = queued.structured_content
        receipt = queued.structured_content["receipt"]
        seen["while_compacting"] = (await session.call_tool("memory_status", {"receipt": receipt})).structured_content
        compaction.send_signal(signal.SIGKILL)  # the lock is free again: the queued batch goes in
        compaction.wait()
        seen["done"] = (await session.call_tool("memory_status", {"receipt": receipt, "wait": 60})).structured_content
        seen["unknown"] = await session.call_tool("memory_status", {"receipt": "rcpt-nope"})
        seen["units"] = (await session.call_tool("memory_units", {"status": "active"})).structured_content
        seen["dry"] = (
            await session.call_tool("memory_forget", {"ids": ["late-1"], "dry_run": True})
        ).structured_content
        seen["kept"] = await session.call_tool("memory_show", {"id": "late-1"})
        seen["forgot"] = (await session.call_tool("memory_forget", {"sessions": ["s9"]})).structured_content
        seen["gone"] = await session.call_tool("memory_show", {"id": "late-1"})
        seen["no_filter"] = await session.call_tool("memory_forget", {"dry_run": True})
    return seen


def test_ingest_without_waiting_answers_during_a_compaction_and_the_receipt_says_when_it_is_in(
    make_engine: Any, write_jsonl: Any, tmp_path: Path
) -> None:
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND)])
    engine.close()
    store = tmp_path / "store"
    compaction = _paused_compaction(store)
    try:
        seen = asyncio.run(_session(store, compaction))
    finally:
        if compaction.poll() is None:
            compaction.kill()
    assert seen["version"] == __version__
    assert set(seen["tools"]) == {
        "memory_query",
        "memory_ingest",
        "memory_status",
        "memory_feedback",
        "memory_show",
        "memory_why",
        "memory_stats",
        "memory_units",
        "memory_goals",
        "memory_forget",
    }
    assert "wait" in seen["tools"]["memory_ingest"]["properties"]
    assert seen["queued"]["status"] == "queued" and seen["queued"]["records"] == 1
    assert seen["while_compacting"]["status"] in ("queued", "running")  # the compaction still holds the lock
    done = seen["done"]
    assert done["status"] == "done" and done["result"]["stored"] == 1, done
    assert seen["unknown"].is_error and "no ingest receipt" in seen["unknown"].content[0].text
    assert isinstance(seen["units"]["units"], list)
    assert seen["dry"]["dry_run"] is True and seen["dry"]["records"] == 1
    assert not seen["kept"].is_error  # the dry run deleted nothing
    assert seen["forgot"]["records"] == 1 and seen["gone"].is_error
    assert seen["no_filter"].is_error and "at least one filter" in seen["no_filter"].content[0].text
    print(json.dumps({"memory_ingest_wait_false_ms": round(seen["answer_ms"], 1)}))
