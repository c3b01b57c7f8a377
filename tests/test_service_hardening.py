"""The server against its own errors and hostile clients: failed exclusive operations, oversize and
deep input, ingest paths outside the allowed folders, devices and FIFOs, tokens, MCP arguments, long
store paths, warm-up and shutdown. Real server processes on real stores, as in test_service.py."""

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

import duckdb
import pytest
from helpers import (
    BOOKING,
    CHATTER,
    QUERY,
    REFUND,
    REPO,
    call_ignoring_errors,
    free_port,
    invoke,
    mcp_params,
    spawn_server,
    start_server,
    stop,
)

from expengine import __version__
from expengine.lifecycle.snapshot import snapshot_database
from expengine.service.client import SOCKET_FILE, TOKEN_FILE, Client, find_server
from expengine.store.db import LOCK_FILE
from expengine.store.pause import PAUSE_ENV, PAUSE_MARKER

GOOD_LINE = {
    "ts": "2026-03-02T10:00:00Z",
    "kind": "message",
    "role": "user",
    "session": "s9",
    "content": "Always send the itinerary by email.",
}


@pytest.fixture(scope="module")
def hardened(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Any:
    """A served store whose clients may ingest from `root` only, with a 50-line bound per ingest:
    (store, client, root, tcp port, a record id)."""
    from expengine import Engine

    tmp = tmp_path_factory.mktemp("hardened")
    store, root = tmp / "store", tmp / "root"
    root.mkdir()
    log = tmp / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in BOOKING + REFUND + CHATTER), encoding="utf-8")
    with Engine(store=store, embedder=embedder) as engine:
        engine.ingest([str(log)])
        record_id = engine.store.con.execute("SELECT id FROM records ORDER BY id LIMIT 1").fetchone()[0]
    (store / "config.toml").write_text("[serve]\nmax_ingest_lines = 50\n", encoding="utf-8")
    port = free_port()
    child = start_server(store, "--http", str(port), "--ingest-root", str(root))
    yield store, Client(socket_path=store / SOCKET_FILE), root, port, record_id
    code, err = stop(child)
    assert code in (0, -signal.SIGTERM), err


def answered(client: Client) -> None:
    assert client.call("query", {"text": QUERY, "touch": False})["hits"]


def test_a_failed_restore_forget_dry_run_or_reindex_leaves_reads_working(hardened: Any) -> None:
    store, client, _, _, record_id = hardened
    answered(client)
    status, body = client.request("POST", "/v1/restore", {"snapshot_id": "nope"}, timeout=60)
    assert status == 404 and body["error"]["exit_code"] == 5
    answered(client)
    plan = client.call("forget", {"ids": [record_id], "dry_run": True})
    assert plan["records"] == 1 and plan["dry_run"]
    answered(client)
    status, body = client.request("POST", "/v1/reindex", {"model": "no-such-model"}, timeout=60)
    assert status == 400 and "unknown embedder model" in body["error"]["message"]
    answered(client)
    assert invoke(store, "restore", "nope")[0] == 5  # the README's repro, through the CLI
    code, out = invoke(store, "query", "weather", "--no-touch", "--json")
    assert code == 0 and "hits" in json.loads(out)
    assert client.call("show", {"id": record_id})["id"] == record_id  # every read op, not only query


def test_query_text_k_budget_and_body_are_bounded(hardened: Any) -> None:
    client = hardened[1]
    cases = [
        ({"text": "weather " * 1100}, 413, "max_text_chars"),
        ({"text": QUERY, "k": 1000}, 400, "bad argument k"),
        ({"text": QUERY, "budget": 10**9}, 400, "bad argument budget"),
        ({"text": QUERY, "agent": "a" * 70_000}, 400, "bad argument agent"),
        ({"text": "x" * (2 * 2**20)}, 413, "over"),  # a query body is bounded at 1 MB, not --max-body-mb
    ]
    for body, status, words in cases:
        got_status, got = client.request("POST", "/v1/query", body, timeout=60)
        assert (got_status, words in got["error"]["message"]) == (status, True), (got_status, got)
        assert got["error"]["exit_code"] == 2
    assert invoke(hardened[0], "query", "w" * 9000, "--no-touch")[0] == 2
    answered(client)


def test_json_nested_10000_deep_is_a_400(hardened: Any) -> None:
    client = hardened[1]
    deep = b'{"text": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    conn = client._connection(60)
    conn.request("POST", "/v1/query", body=deep, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    status, body = response.status, json.loads(response.read())
    conn.close()
    assert status == 400 and "nested deeper" in body["error"]["message"]
    nested: Any = "x"
    for _ in range(100):  # parses, but deeper than the bound: refused before it reaches the pipeline
        nested = {"a": nested}
    status, body = client.request("POST", "/v1/ingest", {"records": [{**GOOD_LINE, "meta": nested}]}, timeout=60)
    assert status == 400 and "nested deeper" in body["error"]["message"]
    answered(client)


def test_ingest_reads_regular_files_under_the_allowed_folders_only(hardened: Any, tmp_path: Path) -> None:
    store, client, root, _, _ = hardened
    outside = tmp_path / "outside.jsonl"
    outside.write_text(json.dumps(GOOD_LINE) + "\n")
    (root / "link.jsonl").symlink_to(outside)
    os.mkfifo(root / "pipe.jsonl")
    before = client.call("stats")["rejects"]
    refused = [
        ("/etc/shadow", "outside the folders"),
        (str(outside), "outside the folders"),
        (f"{root}/../../../../../../../etc/passwd", "outside the folders"),  # traversal
        (str(root / "link.jsonl"), "outside the folders"),  # a symlink out of the root
        (str(root / "pipe.jsonl"), "not a regular file"),
        ("/dev/zero", "outside the folders"),
        ("", "must be absolute"),
        ("relative.jsonl", "must be absolute"),
        (str(root / "missing.jsonl"), "no such file"),
    ]
    for path, words in refused:
        status, body = client.request("POST", "/v1/ingest", {"paths": [path]}, timeout=60)
        assert (status, words in body["error"]["message"]) == (400, True), (path, body)
    assert client.call("stats")["rejects"] == before  # nothing was read
    (root / "link.jsonl").unlink()
    inside = root / "sub" / "good.jsonl"
    inside.parent.mkdir()
    inside.write_text(json.dumps(GOOD_LINE) + "\n")
    result = client.call("ingest", {"paths": [str(root)]})  # the folder walk skips the FIFO
    assert result["files"] == [str(inside)] and result["read"] == 1
    (root / "pipe.jsonl").unlink()
    big = root / "big.jsonl"
    big.write_text("".join(json.dumps({**GOOD_LINE, "content": f"line {i}"}) + "\n" for i in range(60)))
    status, body = client.request("POST", "/v1/ingest", {"paths": [str(big)]}, timeout=60)
    assert status == 413 and "50 lines" in body["error"]["message"]
    status, body = client.request("POST", "/v1/ingest", {"text": big.read_text()}, timeout=60)
    assert status == 413
    big.unlink()
    answered(client)


def test_the_writer_stops_an_ingest_past_its_time(tmp_path: Path) -> None:
    from expengine.errors import TooLargeError
    from expengine.service import ops

    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(GOOD_LINE) + "\n")
    reach = ops.Reach((tmp_path,), max_bytes=2**20, max_lines=100, timeout_s=5)
    assert reach.files([str(log)], deadline=time.monotonic() + 5) == [str(log)]
    with pytest.raises(TooLargeError, match="writer time"):
        reach.files([str(log)], deadline=time.monotonic() - 1)


def test_forget_rejects_clears_them_from_the_store_and_its_snapshots(hardened: Any) -> None:
    store, client, _, _, _ = hardened
    client.call("ingest", {"text": "not json, a leaked line: hunter2\n" + json.dumps(GOOD_LINE) + "\n"})
    client.call("compact", {"refine": False})  # a snapshot that holds the reject too
    count = client.call("stats")["rejects"]
    assert count >= 1
    code, out = invoke(store, "forget", "--rejects", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["rejects"] == count
    assert client.call("stats")["rejects"] == count
    assert invoke(store, "forget", "--rejects", "--agent", "bot")[0] == 2  # no record filter with it
    code, out = invoke(store, "forget", "--rejects", "--yes", "--json")
    assert code == 0 and json.loads(out)["rejects"] == count and json.loads(out)["snapshots"] >= 1
    assert client.call("stats")["rejects"] == 0 and client.call("rejects")["rejects"] == []
    for snapshot in (store / "snapshots").glob("*/snapshot.json"):
        with snapshot_database(snapshot.parent) as path:
            con = duckdb.connect(str(path), read_only=True)
            try:
                assert con.execute("SELECT count(*) FROM rejects").fetchall() == [(0,)]
            finally:
                con.close()
    answered(client)


def test_the_bearer_scheme_is_case_insensitive(hardened: Any) -> None:
    store, _, _, port, _ = hardened
    token = (store / TOKEN_FILE).read_text().strip()
    for header, status in [
        (f"bearer {token}", 200),
        (f"BEARER  {token}", 200),
        (f"Bearer {token}x", 401),
        (f"Basic {token}", 401),
        (token, 401),
    ]:
        conn = Client(url=f"http://127.0.0.1:{port}")._connection(30)
        conn.request("GET", "/health", headers={"Authorization": header})
        response = conn.getresponse()
        response.read()
        conn.close()
        assert response.status == status, header


def test_mcp_is_as_strict_as_http_and_reports_its_version(hardened: Any, tmp_path: Path) -> None:
    store, _, root, _, _ = hardened
    good = root / "mcp.jsonl"
    good.write_text(json.dumps({**GOOD_LINE, "content": "Ask before rebooking a cancelled flight."}) + "\n")
    calls = [
        ("memory_feedback", {"id": "x", "helpful": "yes"}),
        ("memory_query", {"text": QUERY, "sql": "DROP TABLE records"}),
        ("memory_query", {"text": QUERY, "k": "5"}),
        ("memory_query", {"text": "w" * 9000}),
        ("memory_ingest", {"path": "/etc/shadow"}),
        ("memory_ingest", {"path": str(good)}),
    ]
    version, results = asyncio.run(_mcp_calls(store, calls))
    assert version == __version__
    *refused, ingested = results
    assert [r.is_error for r in refused] == [True] * 5, refused
    assert "outside the folders" in refused[4].content[0].text
    assert not ingested.is_error and ingested.structured_content["read"] == 1


def test_mcp_owning_the_store_reads_no_path_without_a_root(make_engine: Any, write_jsonl: Any, tmp_path: Path) -> None:
    make_engine().close()
    path = write_jsonl("log.jsonl", [GOOD_LINE])
    _, (result,) = asyncio.run(_mcp_calls(tmp_path / "store", [("memory_ingest", {"path": path})]))
    assert result.is_error and "reads no paths" in result.content[0].text


async def _mcp_calls(store: Path, calls: list[tuple[str, dict[str, Any]]]) -> tuple[str, list[Any]]:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    async with stdio_client(mcp_params(store)) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        return init.server_info.version, [await session.call_tool(name, args) for name, args in calls]


def _seeded(make_engine: Any, write_jsonl: Any, store: Path) -> None:
    engine = make_engine(store=store)
    engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND)])
    engine.close()


def test_a_store_path_too_long_for_a_unix_socket_still_serves(
    make_engine: Any, write_jsonl: Any, tmp_path: Path
) -> None:
    store = tmp_path / ("deep-folder-" * 10) / "store"
    assert len(str(store / SOCKET_FILE)) > 110
    _seeded(make_engine, write_jsonl, store)
    child = start_server(store)
    try:
        code, out = invoke(store, "query", QUERY, "--no-touch", "--json")
        assert code == 0 and json.loads(out)["hits"]
        assert find_server(store).health()["pid"] == child.pid  # type: ignore[union-attr]
    finally:
        code, err = stop(child)
    assert code in (0, -signal.SIGTERM), err


def test_a_cli_call_during_the_warm_up_waits_for_the_server(make_engine: Any, write_jsonl: Any, tmp_path: Path) -> None:
    store = tmp_path / "store"
    _seeded(make_engine, write_jsonl, store)
    child = spawn_server(store)
    try:
        deadline = time.monotonic() + 120
        lock = store / LOCK_FILE
        while not (lock.exists() and lock.read_text() == f"pid {child.pid}"):  # it holds the store, warming
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        done = subprocess.run(
            [sys.executable, "-m", "expengine", "--store", str(store), "--wait", "120", "stats", "--json"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["raw"] == len(BOOKING + REFUND)
    finally:
        code, err = stop(child)
    assert code in (0, -signal.SIGTERM), err


def test_sigterm_mid_compaction_exits_within_grace(make_engine: Any, write_jsonl: Any, tmp_path: Path) -> None:
    """One --grace covers the whole shutdown (it was twice: uvicorn's wait, then the writer's)."""
    store = tmp_path / "store"
    _seeded(make_engine, write_jsonl, store)
    grace = 3.0
    child = start_server(store, "--grace", str(grace), env={PAUSE_ENV: "decay"})
    client = Client(socket_path=store / SOCKET_FILE)
    threading.Thread(target=call_ignoring_errors, args=(client, "compact"), daemon=True).start()
    deadline = time.monotonic() + 180
    while not (store / (PAUSE_MARKER + "decay")).exists():  # the writer is stuck in the cycle
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    started = time.monotonic()
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=120)
    took = time.monotonic() - started
    assert took < grace + 1.5, took  # twice --grace before
    assert "abandoned" in child.communicate()[1]


def test_a_query_thread_never_writes_the_cache_under_an_open_write(make_engine: Any, write_jsonl: Any) -> None:
    """A server's query embeds its text on a reader view while the writer's transaction is open (a compaction
    step): were the view to insert the vector, the writer's own insert of that text would hit a key committed
    where its transaction cannot see it, and the whole compaction would fail and roll back under the readers."""
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", BOOKING)])
    store = engine.store
    view = engine.reader()
    text = "a question no record holds, about the rebooking desk"
    store.con.execute("BEGIN")
    store.con.execute("SELECT count(*) FROM embeddings").fetchall()  # the writer's transaction has begun reading
    view._store.embeddings.encode([text])  # the query thread, between the writer's BEGIN and its insert
    assert store.embeddings.keep([text]) == 1
    store.con.execute("COMMIT")
    assert view._store.embeddings.encode([text]).shape == (1, store.embeddings.dim)
    view._store.con.close()


def test_reads_answer_again_after_a_compaction_that_failed_and_rolled_back(
    make_engine: Any, write_jsonl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed cycle puts its snapshot back, which replaces the database file under the query threads'
    views: the next read must answer on a fresh view, not fail until some exclusive operation."""
    from expengine.lifecycle.index_refresh import IndexStep
    from expengine.service import ops
    from expengine.service.server import Service

    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)])
    service = Service(engine, ops.Reach.of([], engine.config.serve))
    query = ops.OPS["query"]
    args = ops.parse(query, {"text": QUERY, "touch": False})
    assert service.read(query, args).hits  # this thread's view is made

    def broken(self: Any, store: Any, ctx: Any) -> Any:
        raise RuntimeError("a step failed")

    monkeypatch.setattr(IndexStep, "run", broken)
    compact = ops.OPS["compact"]
    with pytest.raises(RuntimeError, match="a step failed"):
        service.submit("compact", compact, ops.parse(compact, {})).result()
    assert service.read(query, args).hits
    service.writer.shutdown()
