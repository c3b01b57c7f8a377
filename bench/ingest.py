"""Ingest records/s and CPU seconds per 1,000 records: the torch encoder against ONNX in one run, with and
without embedding overlapped with writing, and a sweep of the ONNX encoder's batch size and concurrent runs.

    python bench/ingest.py [--records 10000] [--synthetic] [--encoders torch onnx] [--rounds 2]
                           [--pipelines overlapped serial] [--sweep] [--sweep-records 2000]
                           [--out bench/results/ingest.json] [--docs docs/benchmarks.md]

Events are the sample logs' events made unique (`make_events`: every text differs, so every one is
really embedded: `embedded` equals `stored`) or, with `--synthetic`, bench/fleet.py's synthetic records
(short user asks, tool calls and results of 20 agents). Each round ingests the same file into a fresh
store with each encoder in turn (so a busy spell hits both alike); the best round counts (contention
only ever slows a run). CPU seconds are the process's user + system time over the ingest, all its
threads included: on a shared machine they vary far less than the wall time. "serial" is the same pipeline with `ingest.writer.OVERLAP` off: each batch
embedded, then written. The sweep ingests `--sweep-records` records with ONNX per (batch size,
concurrent runs) on the overlapped pipeline.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from common import english_logs, machine, table, update_doc_section  # noqa: E402


def make_events(source: Path, n: int) -> list[dict]:
    base = [
        json.loads(line)
        for f in english_logs(source)
        for line in f.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    events = []
    for i in range(n):
        event = json.loads(json.dumps(base[i % len(base)]))
        event["id"] = f"bench-{i}"
        tag = f" [variant {i}]"
        event["content"] = f"{event.get('content') or ''}{tag}".strip()
        # every rendered text must differ, or the embedding cache would flatter ingest
        for section, field in (("tool", "error"), ("tool", "result"), ("goal", "description"), ("feedback", "text")):
            if isinstance(event.get(section), dict) and event[section].get(field) is not None:
                value = event[section][field]
                event[section][field] = (value if isinstance(value, str) else json.dumps(value)) + tag
        if isinstance(event.get("tool"), dict) and isinstance(event["tool"].get("args"), dict):
            event["tool"]["args"]["variant"] = i
        events.append(event)
    return events


def write_logs(folder: Path, n: int, synthetic: bool) -> list[str]:
    if synthetic:
        from fleet import synthetic_logs

        return [str(p) for p in synthetic_logs(folder / "synthetic", n)]
    log = folder / "events.jsonl"
    log.write_text("\n".join(json.dumps(e) for e in make_events(REPO / "sample_logs", n)) + "\n", encoding="utf-8")
    return [str(log)]


def ingest_once(embedder: Any, logs: list[str], store: Path, *, overlap: bool = True) -> dict[str, Any]:
    from expengine import Engine
    from expengine.ingest import writer

    writer.OVERLAP = overlap
    try:
        with Engine(store=store, embedder=embedder) as engine:
            started, cpu = time.perf_counter(), time.process_time()
            result = engine.ingest(logs)
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        writer.OVERLAP = True
    assert result.embedded == result.stored, "a text came from the cache: the run would flatter ingest"
    return {
        "stored": result.stored,
        "seconds": round(seconds, 2),
        "records_per_s": round(result.stored / seconds, 1),
        "cpu_s_per_1k": round(cpu / result.stored * 1000, 2),
        "load_average": round(os.getloadavg()[0], 1),
    }


PIPELINES = ("overlapped", "serial")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--synthetic", action="store_true", help="bench/fleet.py's synthetic records")
    parser.add_argument("--encoders", nargs="+", default=["torch", "onnx"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pipelines", nargs="+", choices=PIPELINES, default=list(PIPELINES))
    parser.add_argument("--sweep", action="store_true", help="also sweep the ONNX batch size and concurrent runs")
    parser.add_argument("--sweep-records", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "ingest.json")
    parser.add_argument("--docs", type=Path, help="also write the table into this Markdown file (its ingest section)")
    args = parser.parse_args()

    from expengine.models.embedder import get_embedder

    embedders = {e: get_embedder(encoder=e) for e in args.encoders}
    for embedder in embedders.values():
        embedder.encode(["warm up the model once"] * 8)
    runs: dict[str, list[dict[str, Any]]] = {}
    sweep: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp_dir:
        tmp = Path(tmp_dir)
        logs = write_logs(tmp, args.records, args.synthetic)
        for r in range(args.rounds):
            for encoder, embedder in embedders.items():
                for pipeline in args.pipelines:
                    name = f"{encoder}, {pipeline}"
                    run = ingest_once(
                        embedder, logs, tmp / f"store-{r}-{encoder}-{pipeline}", overlap=pipeline == "overlapped"
                    )
                    runs.setdefault(name, []).append(run)
                    print(f"{name}: {run}", file=sys.stderr)
        if args.sweep:
            sweep = run_sweep(tmp, args)
    best = {name: max(rs, key=lambda x: x["records_per_s"]) for name, rs in runs.items()}
    least_cpu = {name: min(x["cpu_s_per_1k"] for x in rs) for name, rs in runs.items()}
    report = {
        "machine": machine(),
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "records": args.records,
        "synthetic": args.synthetic,
        "runs": runs,
        "best": best,
        "sweep": sweep,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    rows = []
    for name, b in best.items():
        torch = "torch, " + name.split(", ")[1]  # against torch on the same pipeline
        rows.append(
            [
                name,
                b["stored"],
                f"{b['records_per_s']:.1f}",
                ", ".join(str(x["records_per_s"]) for x in runs[name]),
                f"{least_cpu[name]:.2f}",
                f"{b['records_per_s'] / best[torch]['records_per_s']:.2f}x" if torch in best else "-",
                f"{least_cpu[torch] / least_cpu[name]:.2f}x" if torch in best else "-",
            ]
        )
    options = "".join(
        [
            " --synthetic" if args.synthetic else "",
            f" --encoders {' '.join(args.encoders)}" if args.encoders != ["torch", "onnx"] else "",
            f" --pipelines {' '.join(args.pipelines)}" if args.pipelines != list(PIPELINES) else "",
            " --sweep" if args.sweep else "",
        ]
    )
    source = "synthetic records (bench/fleet.py)" if args.synthetic else "sample-log events made unique"
    text = (
        f"`python bench/ingest.py --records {args.records} --rounds {args.rounds}{options}` ({report['machine']}; "
        f"{dt.date.today()}; load average at the end {report['load_average']}): {args.records:,} {source}, "
        f"a fresh store per run, best of {args.rounds} interleaved rounds; CPU s per 1,000 records "
        "(user + system, all threads) the least of the rounds.\n\n"
        + table(
            [
                "encoder, pipeline",
                "stored",
                "records/s (best)",
                "rounds",
                "CPU s / 1k records",
                "records/s against torch",
                "CPU against torch",
            ],
            rows,
        )
    )
    if sweep:
        text += "\n\n" + table(
            ["ONNX batch size", "concurrent runs", "records/s", "CPU s / 1k records"],
            [[s["batch"], s["threads"], f"{s['records_per_s']:.1f}", f"{s['cpu_s_per_1k']:.2f}"] for s in sweep],
        )
    print(text)
    if args.docs:
        update_doc_section(args.docs, "ingest-synthetic" if args.synthetic else "ingest", text)


def run_sweep(tmp: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """ONNX ingest per (batch size, concurrent runs), on the overlapped pipeline."""
    from expengine.models.embedder import default_embedder_path, vector_name
    from expengine.models.onnx import OnnxEmbedder

    logs = write_logs(tmp / "sweep", args.sweep_records, args.synthetic)
    out = []
    for threads in (1, 2):
        for batch in (8, 16, 32, 64):
            name = vector_name("", "minilm", "onnx")
            embedder = OnnxEmbedder(str(default_embedder_path()), name=name, batch_size=batch, threads=threads)
            embedder.encode(["warm up"] * 4)
            run = ingest_once(embedder, logs, tmp / f"sweep-{threads}-{batch}")
            out.append({"batch": batch, "threads": threads, **run})
            print(f"sweep {batch} x {threads}: {run}", file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
