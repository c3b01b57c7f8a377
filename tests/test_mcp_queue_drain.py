"""`memory_ingest(wait=false)` answers at once with a receipt; when the client then goes away (stdin
closed), the MCP server ingests what it queued before it exits, and a SIGTERM that cuts the wait short
makes it say on stderr which batches it dropped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from expengine import __version__

REPO = Path(__file__).resolve().parents[1]
RECORDS = [
    {"ts": "2026-03-02T10:00:00Z", "kind": "message", "role": "user", "session": f"s{i % 7}", "content": f"note {i}"}
    for i in range(1500)
]


def _queue_and_hang_up(store: Path) -> subprocess.Popen:
    """`expengine mcp` on `store`, spoken to over stdio: initialise, queue the records, close stdin."""
    child = subprocess.Popen(
        [sys.executable, "-m", "expengine", "--store", str(store), "--set", "llm.mode=template", "mcp"],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None

    def send(message: dict[str, Any]) -> None:
        child.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]

    def answer(request_id: int) -> dict[str, Any]:
        for line in child.stdout:  # type: ignore[union-attr]
            message = json.loads(line)
            if message.get("id") == request_id:
                return message
        raise AssertionError("the MCP server closed stdout")

    client = {"name": "test", "version": __version__}
    send(
        {
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client},
        }
    )
    assert "result" in answer(1)
    send({"method": "notifications/initialized"})
    arguments = {"records": RECORDS, "wait": False}
    send({"id": 2, "method": "tools/call", "params": {"name": "memory_ingest", "arguments": arguments}})
    queued = answer(2)["result"]["structuredContent"]
    assert queued["status"] == "queued" and queued["records"] == len(RECORDS)
    child.stdin.close()
    return child


def _finish(child: subprocess.Popen) -> str:
    """Its stderr once it has exited (stdin is closed already, so `communicate` cannot be used)."""
    child.stdout.read()  # type: ignore[union-attr]
    err = child.stderr.read()  # type: ignore[union-attr]
    child.wait(timeout=600)
    return err


def _stored(store: Path, embedder: Any) -> int:
    from expengine import Engine

    with Engine(store=store, embedder=embedder) as engine:
        return engine.stats().raw


@pytest.mark.slow
def test_a_queued_ingest_is_stored_when_the_client_hangs_up(tmp_path, embedder):
    store = tmp_path / "store"
    child = _queue_and_hang_up(store)
    err = _finish(child)
    assert child.returncode == 0 and "dropped" not in err, err
    assert _stored(store, embedder) == len(RECORDS)


@pytest.mark.slow
def test_a_sigterm_during_the_drain_says_what_was_dropped(tmp_path, embedder):
    store = tmp_path / "store"
    child = _queue_and_hang_up(store)
    child.send_signal(signal.SIGTERM)
    err = _finish(child)
    stored = _stored(store, embedder)
    assert stored == len(RECORDS) or ("1 queued ingest batch(es) (1500 records) dropped at shutdown" in err), err
