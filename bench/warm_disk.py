"""A plain `Engine.query` between other processes' writes, and the store's size on disk.

    python bench/warm_disk.py [--logs sample_logs] [--cycles 3] [--queries 200] [--workdir DIR]
                              [--out bench/results/warm_disk.json] [--queries-only] [--unseen]

The sample logs are ingested into a fresh store and compacted `--cycles` times one nightly clock tick
apart (templates only). After each cycle the store folder (snapshots included), its LanceDB folder
and its snapshots are measured against the raw log bytes. Then, on the compacted store, p50/p95 of
`Engine.query(text, k=5, touch=False)` as an embedding agent makes it (no `session()`: the store lock
is taken and let go on every call) against the same queries inside one `engine.session()`, in wall and CPU time (this process's threads: steadier on a busy machine).
`--queries-only` times the queries alone on the store `--workdir` already holds (to compare two
versions of the code on one store, one after the other). The store is measured again after the queries.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    CYCLE_SPACING,
    REPO,
    RESULTS,
    TEMPLATE_ONLY,
    disk_sizes,
    load_embedder,
    machine,
    run_cycles,
    write_json,
)

START = dt.datetime(2026, 6, 1, 3, 0)


def query_texts(logs: Path, count: int) -> list[str]:
    said = []
    for path in sorted(logs.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line) if line.strip() else {}
            if event.get("role") == "user" and isinstance(event.get("content"), str):
                said.append(event["content"][:300])
    said = list(dict.fromkeys(said))
    return (said * (count // max(1, len(said)) + 1))[:count]


def percentiles(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {
        "p50": round(statistics.median(values), 1),
        "p95": round(values[min(len(values) - 1, int(0.95 * len(values)))], 1),
    }


def measure_queries(store: Path, queries: list[str], embedder, *, unseen: bool = False) -> dict:
    """Plain calls, then the same inside a session, after a warm-up pass. The timed passes ask the warm-up's
    texts again (a warm process has their vectors in memory), or with `unseen` texts no earlier pass asked
    (`queries` is then three passes long: plain, session, warm-up), so that each call embeds its text."""
    from expengine import Engine

    def timed(engine, texts: list[str]) -> dict:
        wall, cpu = [], []
        for q in texts:
            started, used = time.perf_counter(), time.process_time()
            engine.query(q, k=5, touch=False)
            wall.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - used) * 1000)
        return {"wall": percentiles(wall), "cpu": percentiles(cpu)}

    third = len(queries) // 3
    plain_texts, session_texts, warmup_texts = (
        (queries[:third], queries[third : 2 * third], queries[2 * third :]) if unseen else (queries,) * 3
    )
    with Engine(store=store, embedder=embedder, overrides=TEMPLATE_ONLY) as engine:
        engine.warm()
        timed(engine, warmup_texts)  # one pass to warm caches and the OS page cache
        plain = timed(engine, plain_texts)
        with engine.session():
            session = timed(engine, session_texts)
    return {"plain": plain, "session": session}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logs", type=Path, default=REPO / "sample_logs")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workdir", type=Path, help="build the store here (default: a temp folder)")
    parser.add_argument("--out", type=Path, default=RESULTS / "warm_disk.json")
    parser.add_argument(
        "--unseen",
        action="store_true",
        help="time texts no earlier pass asked (each embedded), rather than the warm-up pass's again",
    )
    parser.add_argument(
        "--queries-only", action="store_true", help="only time the queries, on the store already in --workdir"
    )
    args = parser.parse_args()
    from expengine import Engine

    logs = sorted(p for p in args.logs.iterdir() if p.is_file())
    raw = sum(p.stat().st_size for p in logs)
    texts = query_texts(args.logs, args.queries * (3 if args.unseen else 1))
    if args.unseen and len(set(texts)) < len(texts):
        parser.error(f"--unseen needs {3 * args.queries} distinct user messages in --logs; pass fewer --queries")
    embedder = load_embedder(args.workdir / "store" if args.workdir else None)
    if args.queries_only:
        before = disk_sizes(args.workdir / "store", raw)
        timings = measure_queries(args.workdir / "store", texts, embedder, unseen=args.unseen)
        print(
            json.dumps({**timings, "before_queries": before, "after_queries": disk_sizes(args.workdir / "store", raw)})
        )
        return
    work = args.workdir or Path(tempfile.mkdtemp(prefix="expengine-warm-"))
    store = work / "store"
    report: dict = {"machine": machine(), "raw_log_bytes": raw, "cycles": []}
    with Engine(store=store, embedder=embedder, overrides=TEMPLATE_ONLY) as engine:
        engine.ingest([str(p) for p in logs])
        report["after_ingest"] = disk_sizes(store, raw)
        for n in range(args.cycles):
            run_cycles(engine, 1, start=START + CYCLE_SPACING * n)
            report["cycles"].append({"cycle": n + 1, **disk_sizes(store, raw)})
            print(f"cycle {n + 1}: {report['cycles'][-1]}", file=sys.stderr)
    report["query_ms"] = measure_queries(store, texts, embedder, unseen=args.unseen)
    report["after_queries"] = disk_sizes(store, raw)  # a query must not make the store grow
    write_json(args.out, report)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
