"""`expengine serve` and `expengine mcp` end to end: real server processes on real stores.

One server per module (starting one loads the model); the kill -9 test starts its own two.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    BOOKING,
    CHATTER,
    QUERY,
    REFUND,
    call_ignoring_errors,
    free_port,
    invoke,
    mcp_params,
    start_server,
    stop,
)

from expengine.service.client import SOCKET_FILE, TOKEN_FILE, Client, find_server
from expengine.store.pause import PAUSE_ENV, PAUSE_MARKER

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Any:
    """A store with the booking, refund and chatter logs, the direct-mode answers recorded before its
    server starts (a server holds the store), then the server: (store, client, tcp port, direct answers)."""
    from expengine import Engine

    tmp = tmp_path_factory.mktemp("served")
    store = tmp / "store"
    log = tmp / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in BOOKING + REFUND + CHATTER), encoding="utf-8")
    with Engine(store=store, embedder=embedder) as engine:
        engine.ingest([str(log)])
        record_id = engine.store.con.execute("SELECT id FROM records ORDER BY id LIMIT 1").fetchone()[0]
    commands = [
        ("query", QUERY, "--no-touch", "--json"),
        ("show", record_id, "--json"),
        ("stats", "--json"),
        ("units", "--json"),
        ("history", "--json"),
        ("snapshots", "--json"),
        ("rejects", "--json"),
    ]
    direct = {c: invoke(store, *c, direct=True) for c in commands}
    port = free_port()
    root = str(tmp_path_factory.getbasetemp())  # the tests' own files may be ingested by path
    child = start_server(store, "--http", f"127.0.0.1:{port}", "--max-body-mb", "0.01", "--ingest-root", root)
    yield store, Client(socket_path=store / SOCKET_FILE), port, direct
    code, err = stop(child)
    assert code in (0, -signal.SIGTERM), err
    assert '"event": "stopped"' in err  # a JSON-lines log, and a clean stop
    assert not (store / SOCKET_FILE).exists() and find_server(store) is None


def test_cli_through_the_server_prints_what_direct_mode_prints(served: Any) -> None:
    store, client, _, direct = served
    for command, (code, out) in direct.items():
        got_code, got = invoke(store, *command)
        assert (got_code, command) == (code, command)
        want, have = json.loads(out), json.loads(got)
        if command[0] == "query":  # the only field that is a measurement
            want.pop("took_ms"), have.pop("took_ms")
        if command[0] == "stats":  # the server's socket and token files are in the folder now
            want.pop("size_bytes"), have.pop("size_bytes")
        assert have == want, command
    assert client.health()["pid"] != os.getpid()  # it really was another process that answered


def test_a_query_through_the_server_imports_no_heavy_module(served: Any) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "expengine",
            "--store",
            str(served[0]),
            "query",
            QUERY,
            "--no-touch",
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["hits"]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines() if "|" in line}
    assert not imported & {"torch", "duckdb", "lancedb", "pyarrow", "numpy", "sentence_transformers", "starlette"}


def test_errors_keep_their_exit_codes_through_the_server(served: Any) -> None:
    store = served[0]
    assert invoke(store, "show", "no-such-id")[0] == 5
    assert invoke(store, "query", "x", "-k", "0")[0] == 2
    assert invoke(store, "--set", "query.rrf_k=5", "stats")[0] == 2  # a server's config is fixed


def test_bad_requests_get_json_errors(served: Any) -> None:
    client = served[1]
    cases = [
        ("POST", "/v1/query", b"{not json", 400, "malformed JSON"),
        ("POST", "/v1/query", {"text": 5}, 400, "bad argument text"),
        ("POST", "/v1/query", {"text": "x", "sql": "DROP TABLE records"}, 400, "bad argument sql"),
        ("POST", "/v1/query", ["a list"], 400, "bad argument"),
        ("POST", "/v1/ingest", {"text": "x" * 20_000}, 413, "over"),
        ("POST", "/v1/no-such-op", {}, 404, "no operation"),
        ("GET", "/no/such/route", None, 404, "Not Found"),
    ]
    for method, path, body, status, words in cases:
        if isinstance(body, bytes):  # malformed: sent raw, not JSON-encoded
            conn = client._connection(10)
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            got_status, got = response.status, json.loads(response.read())
            conn.close()
        else:
            got_status, got = client.request(method, path, body, timeout=10)
        assert got_status == status, (path, body, got)
        assert words in got["error"]["message"], got
        assert got["error"]["exit_code"] in (2, 5)
    assert client.health()["status"] == "ok"  # and it lives on


def test_tcp_needs_the_bearer_token(served: Any) -> None:
    store, _, port, _ = served
    token_file = store / TOKEN_FILE
    assert token_file.stat().st_mode & 0o777 == 0o600
    url = f"http://127.0.0.1:{port}"
    assert Client(url=url).request("GET", "/health", timeout=10)[0] == 401
    assert Client(url=url, token="wrong").request("POST", "/v1/stats", {}, timeout=10)[0] == 401
    good = Client(url=url, token=token_file.read_text().strip())
    assert good.request("GET", "/health", timeout=10)[0] == 200
    assert good.call("stats")["raw"] == len(BOOKING + REFUND + CHATTER)
    assert Client(socket_path=store / SOCKET_FILE).request("GET", "/health", timeout=10)[0] == 200  # no token


def test_queries_and_an_ingest_during_a_compaction(served: Any, tmp_path: Path) -> None:
    client = served[1]
    before = client.call("stats")["raw"]
    extra = tmp_path / "extra.jsonl"
    extra.write_text(
        json.dumps(
            {
                "ts": "2026-03-02T10:00:00Z",
                "kind": "message",
                "role": "user",
                "session": "s9",
                "content": "Please always send the itinerary by email.",
            }
        )
        + "\n"
    )
    outcome: dict[str, Any] = {}

    def compact() -> None:
        outcome["compact"] = client.call("compact", {"refine": True})

    worker = threading.Thread(target=compact)
    worker.start()
    answers, failures = 0, []
    ingest = threading.Thread(
        target=lambda: outcome.setdefault("ingest", client.call("ingest", {"paths": [str(extra)]}))
    )
    ingest.start()
    while worker.is_alive() or answers < 3:
        try:
            result = client.call("query", {"text": QUERY, "touch": True})
            answers += 1
            assert result["hits"], result
        except Exception as exc:
            failures.append(repr(exc))
    worker.join()
    ingest.join()
    assert failures == []
    assert outcome["compact"]["status"] == "completed"
    assert outcome["ingest"]["stored"] == 1  # queued behind the compaction or before it, never lost
    assert client.call("stats")["raw"] == before + 1
    stats = client.request("GET", "/stats", timeout=10)[1]
    assert stats["server"]["requests"] > answers and stats["store"]["raw"] == before + 1


def test_mcp_over_stdio_with_the_sdk_client(served: Any) -> None:
    store = served[0]
    result = asyncio.run(_mcp_session(store, ("memory_query", {"text": QUERY, "k": 3, "touch": False})))
    tools, answer, stats, bad_type, unknown = result
    assert set(tools) >= {"memory_query", "memory_ingest", "memory_feedback", "memory_show", "memory_stats"}
    for schema, description in tools.values():
        assert schema["type"] == "object" and len(description) > 80
    assert "text" in tools["memory_query"][0]["required"]
    assert not answer.is_error and answer.structured_content["hits"]
    assert stats.structured_content["raw"] >= len(BOOKING + REFUND + CHATTER)
    assert bad_type.is_error and unknown.is_error


def test_mcp_owns_the_store_when_no_server_runs(make_engine: Any, write_jsonl: Any, tmp_path: Path) -> None:
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", BOOKING)])
    engine.close()
    store = tmp_path / "store"
    _, _, stats, _, _ = asyncio.run(_mcp_session(store, ("memory_stats", {})))
    assert stats.structured_content["raw"] == len(BOOKING)
    assert not (store / SOCKET_FILE).exists()


async def _mcp_session(store: Path, first: tuple[str, dict[str, Any]]) -> tuple[Any, ...]:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    async with stdio_client(mcp_params(store)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        tools = {t.name: (t.input_schema, t.description or "") for t in listed.tools}
        answer = await session.call_tool(*first)
        stats = await session.call_tool("memory_stats", {})
        bad_type = await session.call_tool("memory_feedback", {"id": 5, "helpful": "very"})
        unknown = await session.call_tool("memory_drop_everything", {})
        return tools, answer, stats, bad_type, unknown


@pytest.mark.parametrize("stop_signal", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_stopped_mid_compaction_then_the_next_start_recovers(
    stop_signal: signal.Signals, make_engine: Any, write_jsonl: Any, tmp_path: Path
) -> None:
    """kill -9, or SIGTERM with a step that outlasts --grace: the next start rolls the cycle back."""
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)])
    weights = engine.store.con.execute("SELECT id, weight FROM records ORDER BY id").fetchall()
    engine.close()
    store = tmp_path / "store"
    child = start_server(store, "--grace", "1", env={PAUSE_ENV: "decay"})
    client = Client(socket_path=store / SOCKET_FILE)
    compact = threading.Thread(target=call_ignoring_errors, args=(client, "compact"), daemon=True)
    compact.start()
    marker = store / (PAUSE_MARKER + "decay")
    deadline = time.monotonic() + 180
    while not marker.exists():  # the writer applied decay, then blocks there
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    assert client.health()["busy"] == "compact"
    for _ in range(3):  # answered from a consistent state while the cycle is half done
        assert client.call("query", {"text": QUERY, "touch": False})["hits"]
    child.send_signal(stop_signal)
    child.wait(timeout=120)
    compact.join(timeout=30)
    marker.unlink()
    if stop_signal == signal.SIGKILL:
        assert (store / SOCKET_FILE).exists()  # stale: refused, so commands fall back to direct mode
    assert find_server(store) is None

    child = start_server(store)
    try:
        runs = Client(socket_path=store / SOCKET_FILE).call("history")["runs"]
        assert [r["status"] for r in runs] == ["rolled_back"]
    finally:
        stop(child)
    engine = make_engine(store=store)
    assert engine.store.con.execute("SELECT id, weight FROM records ORDER BY id").fetchall() == weights
