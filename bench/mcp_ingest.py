"""`memory_ingest(wait=false)` over MCP while a compaction holds the store: how fast the agent gets its receipt.

    python bench/mcp_ingest.py [--calls 20] [--log sample_logs/support_bot.jsonl] [--out bench/results/mcp_ingest.json]

A fresh store gets the log; a real `expengine compact` is started and stopped after its decay step
(it holds the store lock, as a long compaction would); `expengine mcp` is driven by the official MCP
Python SDK client over stdio. After one warm-up call, `--calls` single-record batches are queued with
wait=false and each answer is timed on the client (target: under 50 ms). Then the compaction is killed,
and the time until `memory_status` reports the last batch done is measured too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, load_embedder, machine, write_json


def _cli(store: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "expengine", "--store", str(store), *args],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def _drive(store: Path, calls: int, compaction: subprocess.Popen) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "expengine", "--store", str(store), "mcp"],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        cwd=str(REPO),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool("memory_status", {"receipt": "warm-up"})
        times, receipts = [], []
        for n in range(calls):
            record = {"ts": "2026-03-05T10:00:00Z", "kind": "note", "content": f"bench note {n}: retry after 60 s"}
            started = time.perf_counter()
            answer = await session.call_tool("memory_ingest", {"records": [record], "wait": False})
            times.append(1000 * (time.perf_counter() - started))
            receipts.append(answer.structured_content["receipt"])
        pending = (await session.call_tool("memory_status", {"receipt": receipts[-1]})).structured_content["status"]
        compaction.kill()
        compaction.wait()
        released = time.perf_counter()
        last = (await session.call_tool("memory_status", {"receipt": receipts[-1], "wait": 60})).structured_content
        in_after = time.perf_counter() - released
    ordered = sorted(times)
    return {
        "calls": calls,
        "answer_ms": [round(t, 1) for t in times],
        "answer_ms_p50": round(statistics.median(times), 1),
        "answer_ms_p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
        "answer_ms_max": round(ordered[-1], 1),
        "status_while_compacting": pending,
        "last_batch": last["status"],
        "seconds_until_in_after_compaction": round(in_after, 2),
        "target_ms": 50,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--log", default=str(REPO / "sample_logs" / "support_bot.jsonl"))
    parser.add_argument("--out", default=str(RESULTS / "mcp_ingest.json"))
    args = parser.parse_args(argv)
    from expengine import Engine
    from expengine.store.pause import PAUSE_ENV, PAUSE_MARKER

    with tempfile.TemporaryDirectory(prefix="expengine-mcp-bench-") as tmp:
        store = Path(tmp) / "store"
        with Engine(store=store, embedder=load_embedder()) as engine:
            engine.ingest([args.log])
        compaction = _cli(store, "compact", "--no-refine", env={PAUSE_ENV: "decay"})
        marker = store / (PAUSE_MARKER + "decay")
        while not marker.exists():
            if compaction.poll() is not None:
                raise SystemExit("the compaction ended before its pause point")
            time.sleep(0.05)
        try:
            result = asyncio.run(_drive(store, args.calls, compaction))
        finally:
            if compaction.poll() is None:
                compaction.kill()
    result["machine"] = machine()
    write_json(Path(args.out), result)
    print(result)
    return result


if __name__ == "__main__":
    main()
