"""`expengine serve` on the tau-bench store: cold CLI queries, warm API latency, and queries during a compaction.

    python bench/serve.py [--tasks N] [--queries 100] [--cold 5] [--llm] [--set KEY=VALUE]
                          [--out bench/results/serve.json]

The tau-bench airline runs are ingested into a fresh store (not compacted: the compaction under
load is the store's first, so it clusters and refines everything). Then:
- a cold `expengine --direct query` process (imports, model load, query), and a cold `expengine
  query` answered through the server (`--cold` runs; wall and CPU seconds of the client process);
- idle p50/p95 of the API query (touch=False) over the Unix socket and over HTTP with the token;
- the same query in a loop over the socket while `expengine compact` (refinement on, templates
  unless --llm) runs in the server: p50/p95, how many queries were answered, failed, and the ratio
  of the p95 during compaction to the idle p95.
Queries are the runs' task instructions. On a shared machine, wall times move with the load;
the CPU seconds of a client process, and ratios within one run, move less.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    RESULTS,
    SHARED_DATA,
    engine_overrides,
    load_embedder,
    machine,
    served,
    table,
    timed_process,
    write_json,
)
from tau import select_runs

DEFAULT_DATA = SHARED_DATA / "tau_bench_airline" / "gpt-4o-airline_tasks00-39.json"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--tasks", type=int, default=None, help="only the runs of the first N task ids")
    parser.add_argument("--queries", type=int, default=100, help="API queries for the idle percentiles")
    parser.add_argument("--cold", type=int, default=5, help="cold CLI processes through the server")
    parser.add_argument("--llm", action="store_true", help="refine with the local model instead of templates")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", type=Path, default=RESULTS / "serve.json")
    return parser.parse_args(argv)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def latencies(call: Any, texts: list[str], n: int) -> list[float]:
    out = []
    for i in range(n):
        started = time.perf_counter()
        call("query", {"text": texts[i % len(texts)], "touch": False})
        out.append((time.perf_counter() - started) * 1000)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from expengine import Engine

    args = parse_args(argv)
    runs = select_runs(json.loads(args.data.read_text(encoding="utf-8")), tasks=args.tasks, trials=None)
    texts = list(dict.fromkeys(r["info"]["task"]["instruction"] for r in runs if r.get("info")))
    overrides = engine_overrides(args)
    report: dict[str, Any] = {
        "benchmark": "serve",
        "machine": machine(),
        "runs": len(runs),
        "tasks": args.tasks,
        "refine": "llm" if args.llm else "templates",
    }
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        store = Path(tmp) / "store"
        log = Path(tmp) / "runs.json"
        log.write_text(json.dumps(runs), encoding="utf-8")
        with Engine(store=store, embedder=load_embedder(), overrides=overrides) as engine:
            report["stored"] = engine.ingest([str(log)], fmt="openai-chat").stored
        sets = [x for key, value in overrides.items() for x in ("--set", f"{key}={value}")]
        cli = [sys.executable, "-m", "expengine", "--store", str(store), *sets]
        question = texts[0]
        report["cold_direct"] = timed_process([*cli, "--direct", "query", question, "--no-touch", "--json"])

        started = time.perf_counter()
        with served(store, overrides) as (unix, tcp):
            report["server_start_s"] = round(time.perf_counter() - started, 2)
            cold = [
                timed_process([*cli[: -len(sets) or None], "query", question, "--no-touch", "--json"])
                for _ in range(args.cold)
            ]
            report["cold_via_server"] = {
                "wall_s_median": round(statistics.median(c["wall_s"] for c in cold), 3),
                "wall_s_min": min(c["wall_s"] for c in cold),
                "cpu_s_median": round(statistics.median(c["cpu_s"] for c in cold), 3),
            }
            latencies(unix.call, texts, 5)  # warm-up
            idle = {
                "socket": latencies(unix.call, texts, args.queries),
                "http": latencies(tcp.call, texts, args.queries),
            }
            report["idle_ms"] = {name: {"p50": pct(v, 0.5), "p95": pct(v, 0.95)} for name, v in idle.items()}
            report["during_compaction"] = during_compaction(unix, texts)
            report["p95_ratio"] = round(report["during_compaction"]["p95"] / report["idle_ms"]["socket"]["p95"], 2)
    write_json(args.out, report)
    print(render(report))
    print(f"results: {args.out}")
    return report


def during_compaction(client: Any, texts: list[str]) -> dict[str, Any]:
    """Query in a loop over the socket for as long as a compaction (refinement on) runs in the server."""
    outcome: dict[str, Any] = {}

    def compact() -> None:
        started = time.perf_counter()
        outcome["report"] = client.call("compact", {"refine": True})
        outcome["seconds"] = round(time.perf_counter() - started, 2)

    worker = threading.Thread(target=compact)
    worker.start()
    lat: list[float] = []
    failed = 0
    while worker.is_alive():
        started = time.perf_counter()
        try:
            client.call("query", {"text": texts[len(lat) % len(texts)], "touch": False})
            lat.append((time.perf_counter() - started) * 1000)
        except Exception:
            failed += 1
    worker.join()
    report = outcome.get("report") or {}
    return {
        "compaction_s": outcome.get("seconds"),
        "status": report.get("status"),
        "units": (report.get("after") or {}).get("units"),
        "queries": len(lat),
        "failed": failed,
        "p50": pct(lat, 0.5) if lat else None,
        "p95": pct(lat, 0.95) if lat else None,
    }


def render(r: dict[str, Any]) -> str:
    d, idle = r["during_compaction"], r["idle_ms"]
    rows = [
        ["cold `expengine --direct query` (s)", f"{r['cold_direct']['wall_s']} wall, {r['cold_direct']['cpu_s']} CPU"],
        [
            "cold `expengine query` via server (s)",
            (
                f"{r['cold_via_server']['wall_s_median']} wall (min "
                f"{r['cold_via_server']['wall_s_min']}), "
                f"{r['cold_via_server']['cpu_s_median']} CPU"
            ),
        ],
        ["API query idle, Unix socket (ms)", f"p50 {idle['socket']['p50']}, p95 {idle['socket']['p95']}"],
        ["API query idle, HTTP + token (ms)", f"p50 {idle['http']['p50']}, p95 {idle['http']['p95']}"],
        [
            "API query during compaction (ms)",
            (
                f"p50 {d['p50']}, p95 {d['p95']} ({d['queries']} answered, "
                f"{d['failed']} failed, compaction {d['compaction_s']} s, "
                f"{d['units']} units)"
            ),
        ],
        ["p95 during / idle", str(r["p95_ratio"])],
    ]
    return (
        f"tau-bench airline: {r['runs']} runs, {r['stored']} records; refinement by {r['refine']}; "
        f"{r['machine']}\n" + table(["what", "measured"], rows)
    )


if __name__ == "__main__":
    main()
