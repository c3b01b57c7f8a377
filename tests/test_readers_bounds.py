"""What the readers take from a file: a byte-order mark is not data, and an openai-chat array is read
one run at a time within the line limit, so a gzip bomb cannot take memory."""

from __future__ import annotations

import codecs
import datetime as dt
import gzip
import json
import tracemalloc

import pytest

from expengine.ingest.readers import read_items

NOW = dt.datetime(2026, 3, 1)
EVENT = {"id": "e1", "ts": "2026-03-01T09:00:00Z", "kind": "message", "role": "user", "content": "first line"}
RUN = {"id": "r1", "messages": [{"role": "user", "content": "book a flight"}, {"role": "assistant", "content": "ok"}]}


def items(path, *, max_line_bytes: int = 1_000_000, fmt: str = "auto"):
    return list(read_items(str(path), fmt=fmt, max_line_bytes=max_line_bytes, agent=None, now=NOW))


def test_a_byte_order_mark_does_not_lose_the_first_jsonl_line(tmp_path):
    path = tmp_path / "bom.jsonl"
    second = dict(EVENT, id="e2", content="second line")
    path.write_bytes(codecs.BOM_UTF8 + (json.dumps(EVENT) + "\n" + json.dumps(second) + "\n").encode())
    got = items(path)
    assert [i.error for i in got] == [None, None]
    assert [i.event.id for i in got] == ["e1", "e2"]


def test_a_byte_order_mark_before_a_chat_array_is_read_as_the_array(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(codecs.BOM_UTF8 + json.dumps([RUN, dict(RUN, id="r2")]).encode())
    got = items(path)
    assert all(i.error is None for i in got) and {i.event.session for i in got} == {"r1", "r2"}


def test_a_chat_array_is_read_run_by_run_and_a_bad_run_is_one_reject(tmp_path):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([RUN, {"id": "x", "nothing": 1}, dict(RUN, id="r3")]), encoding="utf-8")
    got = items(path)
    assert [i.line for i in got if i.error] == [2]
    assert {i.event.session for i in got if i.event} == {"r1", "r3"}


@pytest.mark.parametrize(
    "body, message",
    [
        (b"[" + json.dumps(RUN).encode() + b" " + json.dumps(RUN).encode() + b"]", "expected , or ] after run 0"),
        (b"[" + json.dumps(RUN).encode() + b",", "malformed JSON"),
        (b'[{"id": "r", "messages": [{"content": "\xff"}]}]', "invalid UTF-8 in run 0"),
    ],
)
def test_a_malformed_chat_array_is_one_reject_after_the_good_runs(tmp_path, body, message):
    path = tmp_path / "bad.json"
    path.write_bytes(body)
    got = items(path)
    assert message in got[-1].error and all(i.error is None for i in got[:-1])


def test_a_run_longer_than_the_line_limit_is_refused(tmp_path):
    path = tmp_path / "long.json"
    path.write_text(json.dumps([RUN, dict(RUN, id="big", pad="x" * 5000)]), encoding="utf-8")
    got = items(path, max_line_bytes=2000)
    assert got[-1].error == "run 1 is longer than 2000 bytes (raise ingest.max_line_bytes)"
    assert {i.event.session for i in got if i.event} == {"r1"}


def test_a_gzip_bomb_of_whitespace_is_refused_in_bounded_memory(tmp_path):
    """`[`, 300 MB of spaces, `]`: about 300 kB gzipped. Read whole it took GBs; now the reader stops
    after the line limit of whitespace."""
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(b"[")
        block = b" " * (1 << 20)
        for _ in range(300):
            fh.write(block)
        fh.write(b"]")
    assert path.stat().st_size < 1_000_000
    tracemalloc.start()
    got = items(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert [i.error for i in got] == [
        "whitespace in the array is longer than 1000000 bytes (raise ingest.max_line_bytes)"
    ]
    assert peak < 50_000_000, peak  # a few chunks of 1 MiB, never the 300 MB
