"""A damaged snapshot (a cut or garbled chunk, or `.xz` of the older format) costs that snapshot only: `restore` says so in one line
with exit 3 and leaves no temporary file, and a server that was asked to restore it goes on answering
queries, stats and ingests. A snapshot id that is not one (a path, 70,000 characters) is a 400 that
names no path."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from helpers import damage_snapshot
from test_cli_usage import run_main
from test_compact import BOOKING, CHATTER, REFUND
from test_service import QUERY, start_server, stop

from expengine.service.client import SOCKET_FILE, Client
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
    store, ids = snapshotted
    child = start_server(store)
    try:
        client = Client(socket_path=store / SOCKET_FILE)
        for snapshot_id in ids[:2]:
            status, body = client.request("POST", "/v1/restore", {"snapshot_id": snapshot_id}, timeout=120)
            assert body["error"]["exit_code"] == 3 and "is damaged" in body["error"]["message"], body
            assert client.call("query", {"text": QUERY, "touch": False})["hits"]
            assert client.call("stats", {})["raw"] >= len(BOOKING + REFUND + CHATTER)
            record = {"ts": "2026-03-02T10:00:00Z", "kind": "message", "role": "user", "content": "hello again"}
            assert client.call("ingest", {"records": [record]})["stored"] in (0, 1)
        assert _leftovers(store) == []
        long_id = "x" * 70_000
        status, body = client.request("POST", "/v1/restore", {"snapshot_id": long_id}, timeout=60)
        assert status == 400 and str(store) not in json.dumps(body) and len(json.dumps(body)) < 1000
        assert client.call("restore", {"snapshot_id": ids[2]})["snapshot_id"] == ids[2]  # a whole one still works
    finally:
        code, err = stop(child)
    assert code in (0, -signal.SIGTERM) and "Traceback" not in err, err
