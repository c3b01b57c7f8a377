"""A cold `expengine query` (a new process, no server) loads only what answering needs: no torch,
sentence-transformers or transformers (the ONNX encoder), nor `onnx` (the int8 model is quantised once,
at its first use, not per query), and no lancedb (reads go through pylance; `store.index`), so not the
REST client of Lance namespaces either. docs/benchmarks.md, "Cold query"."""

from __future__ import annotations

import json

import pytest
from helpers import BOOKING, CHATTER, CLI_THEN_MODULES, REFUND, run_offline_python

from expengine import Engine

pytestmark = pytest.mark.slow


def test_a_cold_cli_query_loads_no_torch_and_no_rest_client(write_jsonl, tmp_path):
    store = tmp_path / "store"
    with Engine(store=store, overrides={"llm.mode": "template"}) as engine:
        engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND + CHATTER)])
        engine.compact(refine=False)
    done = run_offline_python(
        "-c",
        CLI_THEN_MODULES,
        "--store",
        str(store),
        "--direct",
        "query",
        "refund past the window",
        "--no-touch",
        "--json",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["hits"], done.stdout[-2000:]
    held = json.loads(done.stderr.strip().splitlines()[-1])
    # the query did read the Lance datasets and run the ONNX encoder (so the check is about a real
    # query), and never imported lancedb, which only writes need
    assert held == ["lance", "onnxruntime"], held
