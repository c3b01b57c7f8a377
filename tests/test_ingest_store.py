"""Ingest into a real store: real DuckDB, LanceDB and the packaged embedding model."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest
from helpers import REPO

from expengine.errors import InputError, RejectedLinesError
from expengine.ingest.readers import Item

GOOD = [
    {
        "id": "r1",
        "ts": "2026-03-01T09:00:00Z",
        "kind": "goal",
        "agent": "bot",
        "session": "s1",
        "goal": {"id": "g1", "status": "open", "description": "Get the weather in Oslo"},
    },
    {
        "id": "r2",
        "ts": "2026-03-01T09:00:01Z",
        "kind": "tool_call",
        "agent": "bot",
        "session": "s1",
        "goal_id": "g1",
        "tool": {"name": "get_weather", "args": {"city": "Oslo"}},
    },
    {
        "id": "r3",
        "ts": "2026-03-01T09:00:02Z",
        "kind": "tool_result",
        "agent": "bot",
        "session": "s1",
        "goal_id": "g1",
        "tool": {"name": "get_weather", "error": "429 Too Many Requests"},
    },
    {
        "id": "r4",
        "ts": "2026-03-01T09:01:02Z",
        "kind": "message",
        "agent": "bot",
        "session": "s1",
        "role": "user",
        "content": "Never call me at +1 415-555-0134, email jane@example.com instead",
    },
    {
        "id": "r5",
        "ts": "2026-03-01T09:02:00Z",
        "kind": "outcome",
        "agent": "bot",
        "session": "s1",
        "goal_id": "g1",
        "outcome": "success",
        "content": "forecast delivered",
    },
]

BAD_LINES = [
    (b"{not json", "malformed JSON"),
    (b'{"kind": "message", "content": "no ts"}', "missing required field `ts`"),
    (b'{"ts": "2026-03-01", "kind": "teleport", "content": "x"}', "unknown kind"),
    (b'{"ts": "2026-03-01", "kind": "message", "content": 42}', "`content` must be a string"),
    (b'{"ts": "2026-03-01", "kind": "message", "content": "caf\xe9"}', "invalid UTF-8"),
    (b'{"ts": "2026-03-01", "kind": "note"}', "nothing to remember"),
    (b'"just a string"', "must be a JSON object"),
    (b'{"ts": "2026-03-01", "kind": "note", "content": "' + b"x" * 3000 + b'"}', "line longer than"),
]


def test_good_lines_land_and_every_bad_line_is_quarantined_with_file_and_line(make_engine, write_jsonl):
    lines = []
    for good, (bad, _) in zip(GOOD, BAD_LINES):
        lines += [good, bad]
    lines += [bad for bad, _ in BAD_LINES[len(GOOD) :]]
    path = write_jsonl("mixed.jsonl", lines)
    engine = make_engine(overrides={"ingest.max_line_bytes": "2000"})
    result = engine.ingest([path])
    assert (result.stored, result.rejected) == (len(GOOD), len(BAD_LINES))
    by_line = {r.line: r.error for r in result.rejects}
    expected_lines = [2, 4, 6, 8, 10, 11, 12, 13]
    assert sorted(by_line) == expected_lines
    for line, (_, fragment) in zip(expected_lines, BAD_LINES):
        assert fragment in by_line[line], (line, by_line[line])
    listed = engine.rejects()
    assert len(listed) == len(BAD_LINES) and all(r["file"] == path for r in listed)
    assert engine.stats().rejects == len(BAD_LINES)


def test_strict_raises_after_storing_the_good_lines(make_engine, write_jsonl):
    path = write_jsonl("strict.jsonl", [GOOD[0], b"{oops"])
    engine = make_engine()
    with pytest.raises(RejectedLinesError):
        engine.ingest([path], strict=True)
    assert engine.stats().raw == 1


def test_long_texts_end_a_batch_before_it_holds_batch_events(make_engine, write_jsonl, monkeypatch, tmp_path):
    """A batch is held and copied several times on its way to the store: long tool output bounds it by size."""
    from expengine.ingest import pipeline

    sizes: list[int] = []
    submit = pipeline.BatchWriter.submit
    monkeypatch.setattr(pipeline, "BATCH_CHARS", 2_000)
    monkeypatch.setattr(pipeline.BatchWriter, "submit", lambda self, rows, n: (sizes.append(n), submit(self, rows, n)))
    lines = [
        {"id": f"o{i}", "ts": "2026-03-01T09:00:00Z", "kind": "message", "agent": "bot", "session": "s1",
         "role": "user", "content": f"output {i} " + "ok " * 300}
        for i in range(7)
    ]  # fmt: skip
    result = make_engine().ingest([write_jsonl("long.jsonl", lines)])
    assert result.stored == 7
    assert sizes == [3, 3, 1]

    # a cron's ingest, which leaves LanceDB to the next open, holds smaller batches (its peak is the target)
    sizes.clear()
    monkeypatch.setattr(pipeline, "DEFERRED_BATCH_CHARS", 1_000)
    with make_engine(store=tmp_path / "deferred").session(heal=False) as store:
        deferred = pipeline.ingest(store, [write_jsonl("long.jsonl", lines)], defer_index=True)
    assert deferred.stored == 7 and sizes == [2, 2, 2, 1]


def test_ingest_is_idempotent_and_keeps_caller_ids(make_engine, write_jsonl):
    path = write_jsonl("good.jsonl", GOOD)
    engine = make_engine()
    first = engine.ingest([path])
    second = engine.ingest([path])
    assert (first.stored, first.duplicates) == (5, 0)
    assert (second.stored, second.duplicates) == (0, 5)
    ids = sorted(r[0] for r in engine.store.con.execute("SELECT id FROM records").fetchall())
    assert ids == ["r1", "r2", "r3", "r4", "r5"]
    assert engine.store.index.count("memories") == 5


def test_records_without_id_get_a_content_hash_id_that_dedupes(make_engine, write_jsonl):
    event = {"ts": "2026-03-01T10:00:00Z", "kind": "note", "content": "the staging db is read-only on Fridays"}
    path = write_jsonl("noid.jsonl", [event, event, dict(event, content="another note")])
    engine = make_engine()
    result = engine.ingest([path])
    assert (result.stored, result.duplicates) == (2, 1)
    ids = [r[0] for r in engine.store.con.execute("SELECT id FROM records").fetchall()]
    assert all(len(i) == 32 for i in ids)


def test_secrets_are_redacted_before_storage_and_embedding(make_engine, write_jsonl):
    engine = make_engine()
    result = engine.ingest([write_jsonl("secret.jsonl", GOOD)])
    assert result.redacted == 1 and result.redacted_by_kind == {"EMAIL": 1, "PHONE": 1}
    content, text = engine.store.con.execute("SELECT content, text FROM records WHERE id = 'r4'").fetchall()[0]
    for stored in (content, text):
        assert "jane@example.com" not in stored and "555-0134" not in stored and "[REDACTED:EMAIL]" in stored
    lance_text = engine.store.index.table("memories").search().where("id = 'r4'").to_list()[0]["text"]
    assert "jane@example.com" not in lance_text


def test_tool_calls_become_queryable_columns_and_rules_set_importance(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest([write_jsonl("good.jsonl", GOOD)])
    rows = engine.store.con.execute(
        "SELECT id, tool_name, json_extract_string(tool_args, '$.city'), tool_error, category, protected "
        "FROM records ORDER BY id"
    ).fetchall()
    by_id = {r[0]: r[1:] for r in rows}
    assert by_id["r2"][:2] == ("get_weather", "Oslo")
    assert by_id["r3"][2:4] == ("429 Too Many Requests", "error")
    assert by_id["r4"][4] is True  # "Never ..." is a protected phrase
    status = engine.store.con.execute("SELECT status FROM goals WHERE goal_id = 'g1'").fetchall()
    assert status == [("succeeded",)]  # the outcome record closed the open goal


def test_gzip_and_folders_are_read(make_engine, tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    with gzip.open(folder / "a.jsonl.gz", "wt", encoding="utf-8") as fh:
        for event in GOOD[:2]:
            fh.write(json.dumps(event) + "\n")
    (folder / "b.jsonl").write_text(json.dumps(GOOD[2]) + "\n", encoding="utf-8")
    (folder / "README.txt").write_text("not a log", encoding="utf-8")
    result = make_engine().ingest([str(folder)])
    assert result.stored == 3 and len(result.files) == 2


def test_missing_path_is_a_clear_error(make_engine, tmp_path):
    with pytest.raises(InputError, match="no such file"):
        make_engine().ingest([str(tmp_path / "nope.jsonl")])


def test_openai_chat_runs_become_goals_tool_calls_linked_results_and_outcomes(make_engine):
    """Two hand-made runs shaped as tau-bench writes them (tests/data): a booking that succeeded, a
    cancellation that failed."""
    path = REPO / "tests" / "data" / "openai_chat_runs.json"
    runs = json.loads(path.read_text(encoding="utf-8"))
    engine = make_engine()
    first = engine.ingest([str(path)])
    assert first.rejected == 0 and first.stored > 20
    goal = engine.store.con.execute("SELECT status, description FROM goals WHERE goal_id = 'task0/trial0'").fetchall()
    assert goal[0][0] == ("succeeded" if runs[0]["reward"] >= 1 else "failed")
    assert goal[0][1].startswith(runs[0]["traj"][1]["content"][:20])
    call = engine.store.con.execute(
        "SELECT id, tool_name, tool_args, tool_call_id FROM records WHERE kind = 'tool_call' AND session = 'task0/trial0' ORDER BY ts LIMIT 1"
    ).fetchall()[0]
    assert call[0].startswith("task0/trial0/step") and call[1] == "get_user_details"
    assert json.loads(call[2]) == {"user_id": "ada_ng_1024"}
    answered = engine.store.con.execute(
        "SELECT tool_name FROM records WHERE kind = 'tool_result' AND json_extract_string(meta, '$.call_record') = ?",
        [call[0]],
    ).fetchall()
    assert answered == [("get_user_details",)]
    again = engine.ingest([str(path)])  # stable ids: nothing new
    assert again.stored == 0 and again.duplicates == first.stored


def test_crash_between_duckdb_and_lancedb_is_healed_on_next_open(make_engine, write_jsonl, tmp_path, embedder):
    engine = make_engine()
    engine.ingest([write_jsonl("good.jsonl", GOOD)])
    # Simulate a kill after the DuckDB commit and before the LanceDB write.
    engine.store.index.delete("memories", ["r2", "r3"])
    engine.store.con.execute("INSERT INTO pending_index VALUES ('r2', 'memory'), ('r3', 'memory')")
    engine.close()
    reopened = make_engine()
    assert reopened.store.index.count("memories") == 5
    assert reopened.store.con.execute("SELECT count(*) FROM pending_index").fetchall() == [(0,)]
    assert reopened.ingest([str(tmp_path / "good.jsonl")]).duplicates == 5


def test_reindex_rebuilds_lancedb_from_duckdb(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest([write_jsonl("good.jsonl", GOOD)])
    engine.store.index.drop("memories")
    assert engine.store.index.count("memories") == 0
    assert engine.reindex() == {"memories": 5, "units": 0}
    assert engine.store.index.count("memories") == 5


def test_stats_json_contract(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest([write_jsonl("good.jsonl", GOOD)])
    stats = engine.stats().to_dict()
    for key in ("raw", "active", "dormant", "archived", "units", "rejects"):
        assert isinstance(stats[key], int)
    assert stats["raw"] == stats["active"] == 5 and stats["by_kind"]["tool_call"] == 1


def _cli(*args, store, stdin=None):
    env = dict(os.environ, HF_HUB_OFFLINE="1", NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "expengine", "--store", str(store), *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=300,
    )


def test_cli_reads_stdin_prints_one_json_object_and_exits_by_strictness(tmp_path):
    lines = (json.dumps(GOOD[0]) + "\n{bad json\n").encode()
    ok = _cli("ingest", "-", "--json", store=tmp_path / "s", stdin=lines)
    assert ok.returncode == 0, ok.stderr
    payload = json.loads(ok.stdout)
    assert payload["stored"] == 1 and payload["rejected"] == 1
    assert payload["rejects"] == [{"file": "<stdin>", "line": 2, "error": payload["rejects"][0]["error"]}]
    strict = _cli("ingest", "-", "--strict", store=tmp_path / "s2", stdin=lines)
    assert strict.returncode != 0 and b"rejected" in strict.stderr and b"Traceback" not in strict.stderr


def test_cli_missing_path_is_one_line_error_without_traceback(tmp_path):
    proc = _cli("ingest", str(tmp_path / "missing.jsonl"), store=tmp_path / "s")
    assert proc.returncode == 2
    assert b"no such file" in proc.stderr and b"Traceback" not in proc.stderr


def test_items_carry_location_for_rejects():
    item = Item("f.jsonl", 3, error="bad")
    assert (item.file, item.line, item.event) == ("f.jsonl", 3, None)


def test_the_embedding_cache_reads_each_vector_once_per_process_and_its_readers_share_it(make_engine) -> None:
    """Reading vectors from DuckDB scans the whole FLOAT[] column, so a long-lived process keeps the
    ones it read (bounded), and the server's reader threads share them."""
    import numpy as np

    from expengine.store.embeddings import VectorMemo

    engine = make_engine()
    store = engine.store
    texts = ["book a train to Beijing", "the weather API is rate limited"]
    first = store.embeddings.encode(texts)
    store.embeddings.memo = VectorMemo()  # a new process: DuckDB has the vectors, memory has none
    reader = store.reader()
    try:
        assert reader.embeddings.memo is store.embeddings.memo
        assert np.allclose(reader.embeddings.encode(texts), first)
        store.con.execute("DELETE FROM embeddings")  # the next read can only come from memory
        assert np.allclose(store.embeddings.encode(texts[::-1]), first[::-1])
        assert store.embeddings.encode(["a text never seen"]).shape == (1, first.shape[1])
    finally:
        reader.con.close()
    small = VectorMemo(capacity=2)
    small.put("m", {"a": first[0], "b": first[1]})
    small.get("m", ["a"])  # a was read last: b is the least recently used
    small.put("m", {"c": first[0]})
    assert set(small.get("m", ["a", "b", "c"])) == {"a", "c"}


def test_a_long_tool_output_is_stored_once_cut_to_its_head_tail_and_errors_and_still_found(make_engine, write_jsonl):
    """Most of an agent log's bytes are tool output: a long one keeps what `ingest.max_output_chars` allows
    (head, tail, error lines), in the result column and in the text, under the id its whole output gives."""
    lines = [f"collected module {i} of the suite" for i in range(6000)]
    lines[3100] = "E   ConnectionRefusedError: redis at localhost:6379 refused the connection"
    output = "\n".join(lines) + "\n== 1 failed, 5999 passed: flaky redis fixture =="
    event = {"ts": "2026-03-01T09:00:02Z", "kind": "tool_result", "agent": "bot", "session": "s9",
             "tool": {"name": "pytest", "result": output}}  # fmt: skip
    path = write_jsonl("long_output.jsonl", [event])
    engine = make_engine()
    limit = engine.store.config.ingest.max_output_chars
    assert len(output) > 10 * limit
    first = engine.ingest([path])
    assert (first.stored, first.outputs_shortened) == (1, 1)
    rid, result, text = engine.store.con.execute("SELECT id, tool_result, text FROM records").fetchall()[0]
    assert len(result) <= limit and len(text) <= limit + len("pytest returned: ")
    for kept in (result, text):
        assert lines[3100] in kept and kept.endswith("flaky redis fixture ==") and "collected module 3000 " not in kept
    again = engine.ingest([path])  # the id is the whole event's hash: read again, it is a duplicate
    assert (again.stored, again.duplicates) == (0, 1)
    hits = engine.query("pytest collected module of the suite", k=5, touch=False).hits
    assert [h.id for h in hits] == [rid] and lines[3100] in hits[0].text
