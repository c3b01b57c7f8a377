"""A damaged snapshot (a cut or garbled chunk, or `.xz` of the older format) costs that snapshot only: `restore` says so in one line
with exit 3 and leaves no temporary file, and a server that was asked to restore it goes on answering
queries, stats and ingests
(HTTP 422 naming the snapshot; `forget` through MCP skips it and says so). A snapshot id that is not one (a path, 70,000 characters) is a 400 that
names no path."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from helpers import damage_snapshot, free_port, mcp_params
from test_cli_usage import run_main
from test_compact import BOOKING, CHATTER, REFUND
from test_service import QUERY, start_server, stop

from expengine.service.client import TOKEN_FILE, Client
from expengine.store.db import SNAPSHOT_DIR

NOTE = {"kind": "message", "role": "user", "session": "notes"}
STORED = len(BOOKING + REFUND + CHATTER) + 3
DAMAGES = {
    "truncated": lambda data: data[: len(data) // 2],
    "garbage": lambda data: b"not a Parquet file at all" * 100,
}


@pytest.fixture(scope="module")
def snapshotted(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> tuple[Path, list[str]]:
    """A store with three snapshots: the first cut in half, the second garbled, the third whole."""
    from expengine import Engine

    tmp = tmp_path_factory.mktemp("damaged")
    store, log = tmp / "store", tmp / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in BOOKING + REFUND + CHATTER), encoding="utf-8")
    with Engine(store=store, embedder=embedder, overrides={"llm.mode": "template"}) as engine:
        engine.ingest([str(log)])
        ids = []
        for n in range(3):  # a record of its own in each, so each has a chunk of its own
            note = tmp / f"note{n}.jsonl"
            note.write_text(json.dumps(dict(NOTE, ts=f"2026-03-0{n + 2}T10:00:00Z", content=f"note {n}")) + "\n")
            engine.ingest([str(note)])
            ids.append(engine.snapshot().id)
    for snapshot_id, damage in zip(ids, DAMAGES.values()):
        damage_snapshot(store / SNAPSHOT_DIR / snapshot_id, damage)
    return store, ids


def _leftovers(store: Path) -> list[str]:
    return [str(p.relative_to(store)) for p in store.rglob(".tmp-*")]


@pytest.mark.parametrize("which", [0, 1], ids=list(DAMAGES))
def test_restoring_a_damaged_snapshot_is_one_line_exit_3(snapshotted, monkeypatch, capsys, which):
    store, ids = snapshotted
    code, out, err = run_main(monkeypatch, capsys, ["--store", str(store), "restore", ids[which]])
    assert code == 3 and out == "" and "Traceback" not in err, err
    first, hint = err.strip().splitlines()
    assert first.startswith(f"error: the snapshot {ids[which]} is damaged") and hint.startswith("  hint:")
    assert _leftovers(store) == []
    code, out, _ = run_main(monkeypatch, capsys, ["--store", str(store), "stats", "--json"])
    assert code == 0 and json.loads(out)["raw"] == STORED


def test_a_server_asked_to_restore_a_damaged_snapshot_goes_on_answering(snapshotted):
    """Over TCP as a remote client would: a 422 naming the snapshot and the fix, the live store untouched."""
    store, ids = snapshotted
    port = free_port()
    child = start_server(store, "--http", f"127.0.0.1:{port}")
    try:
        client = Client(url=f"http://127.0.0.1:{port}", token=(store / TOKEN_FILE).read_text().strip())
        raw = client.call("stats", {})["raw"]
        for snapshot_id in ids[:2]:
            status, body = client.request("POST", "/v1/restore", {"snapshot_id": snapshot_id}, timeout=120)
            error = body["error"]
            assert status == 422 and error["type"] == "DamagedSnapshotError" and error["exit_code"] == 3, body
            assert error["message"].startswith(f"the snapshot {snapshot_id} is damaged"), error
            assert "expengine snapshots" in error["hint"], error
            assert client.call("stats", {})["raw"] == raw  # nothing of the live store changed
            assert client.call("query", {"text": QUERY, "touch": False})["hits"]
            record = {
                "ts": "2026-03-02T10:00:00Z",
                "kind": "message",
                "role": "user",
                "content": "hello again",
                "session": "late",
            }
            assert client.call("ingest", {"records": [record]})["stored"] in (0, 1)
            raw = client.call("stats", {})["raw"]
        assert _leftovers(store) == []
        long_id = "x" * 70_000
        status, body = client.request("POST", "/v1/restore", {"snapshot_id": long_id}, timeout=60)
        assert status == 400 and str(store) not in json.dumps(body) and len(json.dumps(body)) < 1000
        forgot = asyncio.run(_forget_through_mcp(store))
        assert not forgot.is_error and forgot.structured_content["records"] == 1, forgot
        assert sorted(why.split()[2] for why in forgot.structured_content["snapshots_damaged"]) == sorted(ids[:2])
        assert client.call("query", {"text": QUERY, "touch": False})["hits"]
        assert _leftovers(store) == []
        assert client.call("restore", {"snapshot_id": ids[2]})["snapshot_id"] == ids[2]  # a whole one still works
    finally:
        code, err = stop(child)
    assert code in (0, -signal.SIGTERM) and "Traceback" not in err, err


async def _forget_through_mcp(store: Path) -> Any:
    """`memory_forget` through `expengine mcp`, which hands it to the running server."""
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    async with stdio_client(mcp_params(store)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await session.call_tool("memory_forget", {"sessions": ["late"]})


def test_a_new_snapshot_never_shares_a_damaged_chunk_and_mends_it(make_engine, write_jsonl):
    """The next snapshot of unchanged tables would list the very chunk files of the last one: a damaged one is
    written again under its name, so the new snapshot (a cycle's roll-back point) and the old one restore."""
    from expengine.errors import DamagedSnapshotError

    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", BOOKING)])
    first = engine.snapshot().id
    damage_snapshot(engine.store_dir / SNAPSHOT_DIR / first)
    with pytest.raises(DamagedSnapshotError):
        engine.restore(first)
    second = engine.snapshot().id
    assert engine.restore(second).snapshot_id == second
    assert engine.restore(first).snapshot_id == first
