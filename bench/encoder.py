"""The encoders side by side in one run: torch (sentence-transformers), ONNX fp32 and ONNX int8.

    python bench/encoder.py speed   [--queries 200] [--records 2000] [--rounds 2] [--cold 5] [--out PATH]
    python bench/encoder.py quality [--conversations N] [--users N] [--out PATH]

`speed`, for each encoder, interleaved so that a busy spell hits all alike: agreement with torch
(cosine of 400 sample-log texts), the query embedding alone (LoCoMo questions, each embedded by every
encoder in turn, one thread as `query.retrieve.embed_query` runs it: p50 and p95), ingest records/s
of `--records` unique events drawn from the English sample logs (bench/ingest.py's events) into a
fresh store (best of `--rounds`, alternating), and a cold `expengine query` without a server on a
store of the English sample logs (wall and CPU seconds of the whole process, median of `--cold`
rounds; whether torch was imported). `quality`, for each encoder: the before-compaction retrieval figures of
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


def embed_times(embedders: dict[str, Any], texts: list[str]) -> dict[str, dict[str, float]]:
    """Each question embedded by every encoder in turn, so a busy spell hits all of them alike."""
    torch = sys.modules.get("torch")
    previous = torch.get_num_threads() if torch else 0
    if torch:
        torch.set_num_threads(1)  # as embed_query does for a torch encoder
    took: dict[str, list[float]] = {name: [] for name in embedders}
    try:
        for embedder in embedders.values():
            embedder.encode(["warm up"])
        for text in texts:
            for name, embedder in embedders.items():
                started = time.perf_counter()
                embedder.encode([text])
                took[name].append((time.perf_counter() - started) * 1000)
    finally:
        if torch:
            torch.set_num_threads(previous)
    return {
        name: {"p50_ms": round(percentile(t, 50), 2), "p95_ms": round(percentile(t, 95), 2)} for name, t in took.items()
    }


def cold_queries(stores: dict[str, Path], runs: int) -> dict[str, dict[str, Any]]:
    """A fresh `expengine query` process per encoder, as a cron job or script runs it, in rounds."""
    walls: dict[str, list[float]] = {name: [] for name in stores}
    cpus: dict[str, list[float]] = {name: [] for name in stores}
    loaded: dict[str, str] = {}
    for _ in range(runs):
        for encoder, store in stores.items():
            probe = (
                "import sys; from expengine.cli import main; sys.argv = ['expengine', '--store', "
                f"{str(store)!r}, '--direct', '--set', 'embedder.encoder={encoder}', 'query', {COLD_QUERY!r}]\n"
                "try: main()\nexcept SystemExit: pass\n"
                "print('torch' in sys.modules, 'sentence_transformers' in sys.modules, file=sys.stderr)"
            )
            before = os.times()
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), check=True)
            walls[encoder].append(time.perf_counter() - started)
            after = os.times()
            cpus[encoder].append(
                after.children_user + after.children_system - before.children_user - before.children_system
            )
            loaded[encoder] = done.stderr.strip().splitlines()[-1]
    return {
        encoder: {
            "wall_s": round(statistics.median(walls[encoder]), 2),
            "cpu_s": round(statistics.median(cpus[encoder]), 2),
            "torch_imported": loaded[encoder].split()[0] == "True",
            "sentence_transformers_imported": loaded[encoder].split()[1] == "True",
        }
        for encoder in stores
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
    import shutil

    import numpy as np

    from expengine import Engine
    from expengine.models.embedder import get_embedder

    texts, asked = sample_texts(400), questions(args.queries)
    embedders = {encoder: get_embedder(encoder=encoder) for encoder in ENCODERS}
    rows: dict[str, Any] = {encoder: {} for encoder in ENCODERS}
    reference = embedders["torch"].encode(texts)
    for encoder, embedder in embedders.items():
        cosine = (embedder.encode(texts) * reference).sum(axis=1)
        rows[encoder]["cosine_to_torch"] = {
            "min": round(float(cosine.min()), 4),
            "mean": round(float(np.mean(cosine)), 4),
        }
    for encoder, times in embed_times(embedders, asked).items():
        rows[encoder]["query_embedding"] = times
    with tempfile.TemporaryDirectory(prefix="bench-encoder-") as tmp_dir:
        tmp = Path(tmp_dir)
        rates: dict[str, list[float]] = {encoder: [] for encoder in ENCODERS}
        for _ in range(args.rounds):  # in rounds, best of each: contention only ever slows a run down
            for encoder, embedder in embedders.items():
                rates[encoder].append(ingest_rate(embedder, args.records, tmp))
        for encoder in ENCODERS:
            rows[encoder]["ingest_records_per_s"] = max(rates[encoder])
            rows[encoder]["ingest_rounds"] = rates[encoder]
        # the sample store: torch and fp32 ONNX share vectors, so one copy each; int8 re-embeds (reindex)
        stores = {encoder: tmp / f"cold-{encoder}" for encoder in ENCODERS}
        onnx = {"llm.mode": "template", "embedder.encoder": "onnx"}  # fp32 ("auto" gives a new store int8)
        with Engine(store=stores["onnx"], overrides=onnx) as engine:
            engine.ingest([str(p) for p in english_logs(REPO / "sample_logs")])
        for encoder in ("torch", "onnx-int8"):
            shutil.copytree(stores["onnx"], stores[encoder], ignore=shutil.ignore_patterns(".lock"))
        with Engine(store=stores["onnx-int8"], overrides={"embedder.encoder": "onnx-int8"}) as engine:
            engine.reindex()
        for encoder, cold in cold_queries(stores, args.cold).items():
            rows[encoder]["cold_query"] = cold
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
    parser.add_argument("--rounds", type=int, default=2, help="ingest runs per encoder, alternating")
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
