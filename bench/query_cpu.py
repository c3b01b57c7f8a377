"""The warm query's CPU after retrieval at 100k, and its answers on fixed LanceDB candidates, to compare
two versions of the code.

    python bench/query_cpu.py --store DIR/store-100000 [--candidates FILE] [--code CHECKOUT] [--queries 200]
                              [--reps 3] [--out bench/results/query-cpu.json]
    python bench/query_cpu.py --compare A.json B.json

LanceDB's IVF-PQ search does not give the same candidates run after run on bench/query.py's stores (its
copies' vectors differ by small noise and tie in PQ distance): two runs of one version gave the same
hits for 129 of the 200 bench queries. So two versions are compared on the same candidates: the first
run saves each query's retrieval (`retrieve.retrieve`'s result, and the sleeping turns' search where a
query asks it) to `--candidates`, and every later run, of this checkout or another (`--code OTHER`:
its `expengine` is imported instead of this one's), reads them. Each bench query is then answered
(`Engine.query(text, k=5, touch=False)` on a clock fixed for all runs, in a warm `Engine`) `--reps`
times: the main thread's and the process's CPU ms (p50 / p95), for all queries and for those with an
answer (the others stop after retrieval), and the answers (relevance, hits with their scores and
evidence, the prompt) go to `--out`. `--compare` says in how many of the queries two such files agree.
Without `--candidates` the whole query is timed, LanceDB's searches and the embedding included (the
process's memo answers a text's vector from the second time it is asked: `--reps 1` embeds every one).
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import pickle
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, SHARED_DATA, load_embedder, machine, write_json  # noqa: E402
from query import WARM_UP, query_texts  # noqa: E402

# the clock every run ranks on (recency moves with it)
NOW = dt.datetime(2026, 12, 7, 12, 0)
ANSWER = ("relevant", "best", "hits", "prompt")


def fixed_retrieval(path: Path) -> dict:
    """Make `search` take each query's candidates from `path` (saved as plain tuples: a version whose
    `Retrieved` has fewer fields reads the first ones, one with more gets them empty), or save them
    there at the end where it does not exist. The saved entries."""
    from expengine.query import search
    from expengine.query.retrieve import Retrieved

    saved: dict = pickle.loads(path.read_bytes()) if path.exists() else {}
    retrieve, noted_best = search.retrieve, search.noted_best

    def fixed(store: Any, text: str, vector: Any, filters: Any) -> Any:
        if ("retrieve", text) not in saved:
            saved[("retrieve", text)] = tuple(retrieve(store, text, vector, filters))
        fields = copy.deepcopy(saved[("retrieve", text)])  # the query changes its candidates
        return Retrieved(*(*fields, {})[: len(Retrieved._fields)])

    def fixed_noted(store: Any, vector: Any, filters: Any, units: Any = None) -> float:
        key = ("noted", vector.tobytes())
        if key not in saved:
            saved[key] = noted_best(store, vector, filters, units)
        return saved[key]

    search.retrieve, search.noted_best = fixed, fixed_noted
    return saved


def _ms(values: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values, n=100)
    return {"p50": round(cuts[49], 2), "p95": round(cuts[94], 2)}


def measure(store: Path, candidates: Path | None, count: int, reps: int) -> dict:
    from expengine import Engine

    had_candidates = candidates is not None and candidates.exists()
    saved = fixed_retrieval(candidates) if candidates is not None else {}
    embedder = load_embedder(store)
    queries = query_texts(REPO / "sample_logs", SHARED_DATA / "locomo" / "locomo_dev.json", count)
    rows = []
    with Engine(store=store, embedder=embedder) as engine, engine.session():
        engine.warm()
        for text in WARM_UP:
            engine.query(text, touch=False)
        for _ in range(reps):
            for text in queries:
                thread, process = time.thread_time(), time.process_time()
                r = engine.query(text, touch=False, now=NOW)
                thread, process = (time.thread_time() - thread) * 1000, (time.process_time() - process) * 1000
                hits = [(h.type, h.id, h.score, [(e.id, e.similarity, e.quoted) for e in h.expanded]) for h in r.hits]
                rows.append(
                    {"thread_ms": thread, "process_ms": process, "query": text, "relevant": r.relevant}
                    | {"best": r.best_similarity, "hits": hits, "prompt": r.prompt}
                )
    if candidates is not None and not had_candidates:
        candidates.write_bytes(pickle.dumps(saved))
    answered = [r for r in rows if r["relevant"]]
    return {
        "machine": machine(),
        "store": str(store),
        "candidates": None if candidates is None else str(candidates),
        "fresh_candidates": not had_candidates,
        "queries": len(queries),
        "reps": reps,
        "answered": len(answered) // reps,
        "thread_ms": _ms([r["thread_ms"] for r in rows]),
        "process_ms": _ms([r["process_ms"] for r in rows]),
        "answered_thread_ms": _ms([r["thread_ms"] for r in answered]),
        "answered_process_ms": _ms([r["process_ms"] for r in answered]),
        "load": [round(x, 2) for x in os.getloadavg()],
        "answers": [{k: r[k] for k in ("query", *ANSWER)} for r in rows],
    }


def compare(a: Path, b: Path) -> dict:
    left, right = (json.loads(p.read_text())["answers"] for p in (a, b))
    differ = [n for n, (x, y) in enumerate(zip(left, right, strict=True)) if any(x[k] != y[k] for k in ANSWER)]
    return {"answers": len(left), "same": len(left) - len(differ), "differ_at": differ[:20]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, help="a store bench/query.py built (`--workdir DIR`: DIR/store-100000)")
    parser.add_argument(
        "--candidates", type=Path, help="the saved retrievals: read where it exists, else written (none: live)"
    )
    parser.add_argument("--code", type=Path, help="the checkout whose expengine answers (default: this one)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "query-cpu.json")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("A", "B"))
    args = parser.parse_args()
    if args.compare:
        print(json.dumps(compare(*args.compare)))
        return
    if args.store is None:
        parser.error("--store is needed, or --compare A B")
    if args.code:
        sys.path.insert(0, str(args.code.resolve()))
    report = measure(args.store, args.candidates, args.queries, args.reps)
    report["code"] = str(args.code or Path(__file__).resolve().parents[1])
    write_json(args.out, report)
    print(json.dumps({k: v for k, v in report.items() if k != "answers"}))


if __name__ == "__main__":
    main()
