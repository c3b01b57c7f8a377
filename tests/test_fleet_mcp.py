"""`mcp --root R --store-name N`: one tenant's MCP tools over stdio. Through the fleet's `serve --root`
when one runs (found by the address it leaves under `<root>/.servers/`, with the tenant's own token),
else on the tenant's store itself."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from helpers import REPO, TEMPLATES, Child, free_port, make_fleet, run_main, stop

from expengine.service.client import FLEET_SERVERS, TOKEN_FILE, Client, find_fleet_server


def start_fleet_server(root: Path) -> tuple[Child, Client]:
    """`serve --root` on a free port, returned once it answers /health (polled, with a deadline)."""
    url = f"http://127.0.0.1:{free_port()}"
    child = Child(
        [sys.executable, "-m", "expengine", *TEMPLATES, "serve", "--root", str(root), "--http", url[7:]],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    client, deadline = Client(url=url), time.monotonic() + 300
    while client.health() is None:
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the fleet server never answered /health"
        time.sleep(0.1)
    return child, client


async def tenant_session(root: Path, name: str, text: str) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "expengine", "mcp", "--root", str(root), "--store-name", name],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        cwd=str(REPO),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        answer = await session.call_tool("memory_query", {"text": text, "k": 10, "touch": False})
        stats = await session.call_tool("memory_stats", {})
        return {"answer": answer.structured_content, "error": answer.is_error, "stats": stats.structured_content}


def test_mcp_for_one_tenant_goes_through_the_fleet_server_then_opens_its_store(tmp_path, embedder):
    root = tmp_path / "fleet"
    make_fleet(root, embedder)
    child, server = start_fleet_server(root)
    try:
        entries = list((root / FLEET_SERVERS).glob("*.json"))
        assert [json.loads(e.read_text())["pid"] for e in entries] == [child.pid]
        token = (root / "alpha" / TOKEN_FILE).read_text().strip()
        held = Client(url=server.url, token=token, store="alpha").call("query", {"text": "book a flight"})
        assert held["hits"]  # the server now holds alpha open (and locked): MCP can only answer through it
        found = find_fleet_server(root, "alpha")
        assert found is not None and found.prefix == "/v1/alpha"
        counters = Client(url=server.url, token=token)  # /health shows its counters to a tenant only
        before = counters.health()["requests"]
        seen = asyncio.run(tenant_session(root, "alpha", "book a flight"))
        assert not seen["error"] and seen["answer"]["hits"]
        assert {h["agent"] for h in seen["answer"]["hits"]} == {"alpha"}
        assert counters.health()["requests"] >= before + 2  # both tool calls went to the fleet server
    finally:
        code, err = stop(child)
    assert code in (0, -signal.SIGTERM), err  # uvicorn re-raises the SIGTERM it handled
    assert list((root / FLEET_SERVERS).glob("*.json")) == []  # its address left with it
    assert find_fleet_server(root, "beta") is None
    seen = asyncio.run(tenant_session(root, "beta", "refund a cancelled flight"))  # no server: opens beta itself
    assert not seen["error"] and {h["agent"] for h in seen["answer"]["hits"]} == {"beta"}
    assert seen["stats"]["raw"] > 0


def test_a_stale_or_foreign_server_entry_is_skipped(tmp_path, embedder):
    root = tmp_path / "fleet"
    make_fleet(root, embedder, names=("alpha",))
    (root / FLEET_SERVERS).mkdir()
    (root / FLEET_SERVERS / "1.json").write_text(json.dumps({"url": f"http://127.0.0.1:{free_port()}"}))
    (root / FLEET_SERVERS / "2.json").write_text("not json")
    assert find_fleet_server(root, "alpha") is None


def test_mcp_root_usage_mistakes_are_one_line(monkeypatch, capsys, tmp_path):
    code, out, err = run_main(monkeypatch, capsys, ["mcp", "--root", str(tmp_path)])
    assert code == 2 and out == "" and "--root and --store-name go together" in err and "Traceback" not in err
    code, _, err = run_main(monkeypatch, capsys, ["mcp", "--root", str(tmp_path), "--store-name", "../etc"])
    assert code == 2 and "is not a store name" in err
    args = ["--store", str(tmp_path / "s"), "mcp", "--root", str(tmp_path), "--store-name", "alpha"]
    code, _, err = run_main(monkeypatch, capsys, args)
    assert code == 2 and "--store and --root name two stores" in err
