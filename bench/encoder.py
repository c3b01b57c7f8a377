"""The encoders side by side in one run: torch (sentence-transformers), ONNX fp32 and ONNX int8.

    python bench/encoder.py speed   [--queries 200] [--records 2000] [--cold 5] [--out PATH]
    python bench/encoder.py quality [--conversations N] [--users N] [--out PATH]

`speed`, for each encoder: agreement with torch (cosine of 400 sample-log texts), the query embedding
alone (one question at a time, LoCoMo questions, on one thread as `query.retrieve.embed_query` runs
it: p50 and p95), a cold `expengine query` without a server on a store of the English sample logs
(wall and CPU seconds of the whole process, median of `--cold` runs; whether torch was imported),
and ingest records/s of `--records` unique events drawn from the English sample logs (bench/ingest.py's
events) into a fresh store. `quality`, for each encoder: the before-compaction retrieval figures of
bench/locomo.py (`--cycles 0 --no-ablation`), bench/tau.py --holdout --cycles 0 and bench/memorybank.py's
English-to-Chinese agreement (`--cycles 0`); the other benchmarks' own JSON files are not touched.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from common import SHARED_DATA, english_logs, machine, write_json  # noqa: E402

ENCODERS = ("torch", "onnx-int8", "onnx")
COLD_QUERY = "how do I get a refund for a damaged item"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def sample_texts(n: int) -> list[str]:
    texts = []
    for path in english_logs(REPO / "sample_logs"):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line) if line.strip() else {}
            text = event.get("content") or json.dumps(event.get("tool") or "")
            if text:
                texts.append(text)
    return texts[:: max(1, len(texts) // n)][:n]


def questions(n: int) -> list[str]:
    data = json.loads((SHARED_DATA / "locomo" / "locomo_dev.json").read_text(encoding="utf-8"))
    return [q["question"] for sample in data for q in sample["qa"]][:n]


def embed_times(embedder: Any, texts: list[str]) -> dict[str, float]:
    torch = sys.modules.get("torch")
    previous = torch.get_num_threads() if torch else 0
    if torch:
        torch.set_num_threads(1)  # as embed_query does for a torch encoder
    try:
        embedder.encode(["warm up"])
        took = []
        for text in texts:
            started = time.perf_counter()
            embedder.encode([text])
            took.append((time.perf_counter() - started) * 1000)
    finally:
        if torch:
            torch.set_num_threads(previous)
    return {"p50_ms": round(percentile(took, 50), 2), "p95_ms": round(percentile(took, 95), 2)}


def cold_query(store: Path, encoder: str, runs: int) -> dict[str, Any]:
    """A fresh `expengine query` process, as a cron job or script runs it."""
    probe = (
        "import resource, sys, time; t = time.perf_counter(); from expengine.cli import main; sys.argv = "
        f"['expengine', '--store', {str(store)!r}, '--direct', '--set', 'embedder.encoder={encoder}', 'query', "
        f"{COLD_QUERY!r}];\ntry: main()\nexcept SystemExit: pass\n"
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules, file=sys.stderr)"
    )
    walls, cpus, loaded = [], [], ""
    for _ in range(runs):
        before = os.times()
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), check=True)
        walls.append(time.perf_counter() - started)
        after = os.times()
        cpus.append(after.children_user + after.children_system - before.children_user - before.children_system)
        loaded = done.stderr.strip().splitlines()[-1]
    torch_loaded, st_loaded = (part == "True" for part in loaded.split())
    return {
        "wall_s": round(statistics.median(walls), 2),
        "cpu_s": round(statistics.median(cpus), 2),
        "torch_imported": torch_loaded,
        "sentence_transformers_imported": st_loaded,
    }


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def ingest_rate(embedder: Any, records: int, tmp: Path) -> float:
    from ingest import make_events

    from expengine import Engine

    log = tmp / f"events-{embedder.name}.jsonl"
    log.write_text("\n".join(json.dumps(e) for e in make_events(REPO / "sample_logs", records)) + "\n")
    with Engine(store=tmp / f"ingest-{time.monotonic_ns()}", embedder=embedder) as engine:
        started = time.perf_counter()
        result = engine.ingest([str(log)])
        return round(result.stored / (time.perf_counter() - started), 1)


def speed(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from expengine import Engine
    from expengine.models.embedder import get_embedder

    texts, asked = sample_texts(400), questions(args.queries)
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-encoder-") as tmp_dir:
        tmp = Path(tmp_dir)
        for encoder in ENCODERS:
            store = tmp / f"cold-{encoder}"
            with Engine(store=store, overrides={"embedder.encoder": encoder, "llm.mode": "template"}) as engine:
                engine.ingest([str(p) for p in english_logs(REPO / "sample_logs")])
            rows[encoder] = {"cold_query": cold_query(store, encoder, args.cold)}
        reference = get_embedder(encoder="torch").encode(texts)
        for encoder in ENCODERS:
            embedder = get_embedder(encoder=encoder)
            cosine = (embedder.encode(texts) * reference).sum(axis=1)
            rows[encoder]["cosine_to_torch"] = {
                "min": round(float(cosine.min()), 4),
                "mean": round(float(np.mean(cosine)), 4),
            }
            rows[encoder]["query_embedding"] = embed_times(embedder, asked)
            rows[encoder]["ingest_records_per_s"] = ingest_rate(embedder, args.records, tmp)
            print(encoder, json.dumps(rows[encoder]), file=sys.stderr)
    return rows


def quality(args: argparse.Namespace) -> dict[str, Any]:
    """One benchmark at a time over all encoders (cheapest first), saving after each, so a run cut short
    still pairs the encoders on what it reached."""
    import locomo
    import memorybank
    import tau

    from expengine.models.embedder import get_embedder

    out = Path(tempfile.mkdtemp(prefix="bench-encoder-quality-"))
    conversations = ["--conversations", str(args.conversations)] if args.conversations else []

    def locomo_row(encoder: str) -> dict[str, Any]:
        lc = locomo.parse_args(["--cycles", "0", "--no-ablation", "--out", str(out / "locomo.json"), *conversations])
        summary = locomo.run(lc, embedder=get_embedder(encoder=encoder), echo=False)["summary"]
        keys = ("evidence_recall", "answer_recall")
        return {method: {k: entry["overall"][k] for k in keys} for method, entry in summary.items()}

    def memorybank_row(encoder: str) -> dict[str, Any]:
        return memorybank.run(memorybank.DEFAULT_DATA, args.users, 5, "auto", 0, encoder=encoder)

    def tau_row(encoder: str) -> dict[str, Any]:
        ta = tau.parse_args(["--holdout", "--cycles", "0", "--out", str(out / "tau.json")])
        report = tau.run(ta, embedder=get_embedder(encoder=encoder), echo=False)
        return {
            "failed_run_found": report["failed_run_queries"]["before compaction"]["found"],
            "holdout_memory_lift": report["leave_tasks_out"]["memory"],
        }

    rows: dict[str, Any] = {}
    for bench, measure in (("locomo", locomo_row), ("memorybank", memorybank_row), ("tau", tau_row)):
        for encoder in ENCODERS:
            rows.setdefault(bench, {})[encoder] = measure(encoder)
            print(bench, encoder, json.dumps(rows[bench][encoder]), file=sys.stderr, flush=True)
            write_json(args.out.with_suffix(".partial.json"), rows)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("speed", "quality"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--conversations", type=int, default=None, help="LoCoMo: only the first N")
    parser.add_argument("--users", type=int, default=None, help="MemoryBank: only the first N")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    args.out = args.out or REPO / "bench" / "results" / f"encoder-{args.part}.json"
    rows = speed(args) if args.part == "speed" else quality(args)
    report = {"command": " ".join(["python bench/encoder.py", *sys.argv[1:]]), "machine": machine(), args.part: rows}
    write_json(args.out, report)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
