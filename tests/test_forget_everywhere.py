"""`forget` leaves the text in no file of the store: the query log (asked with or without the session),
the run reports that quote a deleted unit, the rejected lines, and every snapshot; and a damaged
snapshot costs that snapshot only (it is named, the live store and the good snapshots still forget)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers import damage_snapshot
from test_compact import BOOKING, CHATTER, REFUND, ev
from test_forget import files_holding

from expengine.lifecycle.snapshot import own_chunks
from expengine.store.db import SNAPSHOT_DIR

SECRET = "ZEBRAFISH7731"
PRIVATE = [
    ev(
        f"z{i:02d}",
        60 + i,
        "note",
        session="privacy-1",
        agent="bot",
        category="preference",
        content=f"User u-777 keeps the locker code {SECRET} and prefers {seat} seats on long flights",
    )
    for i, seat in enumerate(["aisle", "window", "aisle", "aisle"])
]
# a line of the same session that fails validation: its raw text is kept among the rejects
REJECTED = json.dumps({"id": "z99", "ts": "not a time", "kind": "note", "session": "privacy-1", "content": SECRET})


def _private_store(make_engine, write_jsonl):
    engine = make_engine(overrides={"llm.mode": "template", "cluster.interval_new_memories": 1})
    engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER + PRIVATE + [REJECTED])])
    engine.query(f"what is the locker code {SECRET}?", session="privacy-1")
    engine.query(f"what is the locker code {SECRET}?")  # asked outside the session
    engine.compact()
    engine.query(f"which seats go with {SECRET}?")
    engine.compact()
    return engine


def _holding(folder: Path) -> list[str]:
    """Files holding the secret in any case (the full-text index keeps tokens lower-cased)."""
    return sorted(set(files_holding(folder, SECRET)) | set(files_holding(folder, SECRET.lower())))


def test_forget_leaves_no_byte_of_a_session_in_any_file(make_engine, write_jsonl):
    engine = _private_store(make_engine, write_jsonl)
    assert any(f.startswith(SNAPSHOT_DIR) for f in _holding(engine.store_dir))  # the test can fail

    engine.forget(sessions=["privacy-1"])
    engine.forget(rejects=True)
    engine.close()

    assert _holding(engine.store_dir) == []


def test_forget_with_a_damaged_snapshot_forgets_everywhere_else_and_names_it(make_engine, write_jsonl):
    engine = _private_store(make_engine, write_jsonl)
    first = engine.store_dir / SNAPSHOT_DIR / engine.snapshots()[0].id
    damage_snapshot(first)

    result = engine.forget(sessions=["privacy-1"])

    assert result.records == len(PRIVATE) and result.snapshots == 1
    assert len(result.snapshots_damaged) == 1 and first.name in result.snapshots_damaged[0]
    rejects = engine.forget(rejects=True)
    assert rejects.snapshots == 1 and rejects.snapshots_damaged == result.snapshots_damaged
    engine.close()
    aside = engine.store_dir.parent / "damaged"
    aside.mkdir()
    for path in [*own_chunks(first), first]:  # the damaged chunk among them: its bytes cannot be read to grep
        shutil.move(path, aside / path.name)
    assert _holding(engine.store_dir) == []
    assert not list(aside.rglob(".tmp-*"))
