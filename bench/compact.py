"""How compaction shrinks memory, and what one cycle costs as the store grows.

    python bench/compact.py [--tau PATH] [--logs DIR] [--cycles 10] [--synthetic 10000,100000]
                            [--no-refine-variant] [--skip-real] [--out bench/results/compact.json]

Real data: the tau-bench airline runs (160 agent runs, openai-chat format) and `sample_logs/` are
ingested into fresh temporary stores, then compacted `--cycles` times one nightly clock tick apart
(`compact(now=...)`, so every cycle is due to re-cluster), once without refinement and once with
refinement by templates (no LLM; the units it writes may archive their sources); raw records and
active memories after cycles 1, 3 and 10, units, merges and the seconds of every step are printed.
Synthetic: stores of N memories with clustered random unit vectors (no embedding model: vectors go
straight into the embedding cache, DuckDB and LanceDB) time one cycle without refinement, and its dry
run first (target: the dry run costs less than the real cycle and plans the same after-counts).
Target: after 3 cycles on tau-bench, active ≤ 35% of raw; one cycle over 100k memories < 2 minutes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    REPO,
    RESULTS,
    SHARED_DATA,
    TEMPLATE_ONLY,
    english_logs,
    machine,
    run_cycles,
    table,
    write_json,
)

TAU = SHARED_DATA / "tau_bench_airline" / "gpt-4o-airline_tasks00-39.json"
# Cycles tick forward from the real clock, one night apart; every step stamps that clock (`marked_at`
# too), so the observation window before purge is measured on it.
START = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
REPORTED_CYCLES = (1, 3, 10)


def real_dataset(name: str, paths: list[str], *, cycles: int, variants: dict[str, bool], embedder) -> dict:
    """Ingest once, then run the cycles on a fresh copy of that store for each variant (refine on/off)."""
    import shutil

    from expengine import Engine

    result: dict = {"dataset": name, "variants": {}}
    with tempfile.TemporaryDirectory(prefix=f"bench-compact-{name}-") as tmp:
        base = Path(tmp) / "base"
        with Engine(store=base, embedder=embedder) as engine:
            started = time.perf_counter()
            result["stored"] = engine.ingest(paths).stored
            result["ingest_seconds"] = round(time.perf_counter() - started, 1)
            result["raw"] = raw = engine.stats().raw
        for variant, refine in variants.items():
            store = Path(tmp) / variant
            shutil.copytree(base, store)
            with Engine(store=store, embedder=embedder, overrides=TEMPLATE_ONLY if refine else None) as engine:
                summaries = run_cycles(engine, cycles, start=START, refine=refine)
            picked = {n: summaries[n - 1] for n in REPORTED_CYCLES if n <= len(summaries)}
            result["variants"][variant] = {
                "refine": refine,
                "active_after": {n: s["active"] for n, s in picked.items()},
                "active_share_after": {n: round(s["active"] / raw, 4) for n, s in picked.items()},
                "units_after": {n: s["units"] for n, s in picked.items()},
                "merged_after": {n: s["merged"] for n, s in picked.items()},
                "cycles": summaries,
            }
    return result


class VectorsOnly:
    """Stands in for the embedding model: every vector is already cached, so encode must never run."""

    name = "synthetic-vectors"

    def __init__(self, dim: int):
        self.dim = dim

    def encode(self, texts):
        raise AssertionError(f"synthetic store asked to embed {len(texts)} texts")


def build_synthetic(store: Path, n: int, *, dim: int = 384, agents: int = 4, seed: int = 0):
    """N memories around n/20 topics per store; a few exact repeats so merging has work."""
    import pyarrow as pa

    from expengine import Engine
    from expengine.clock import utcnow
    from expengine.store.db import arrow_view
    from expengine.store.embeddings import text_hash
    from expengine.store.index import MEMORIES
    from expengine.store.lance_rows import memory_rows
    from expengine.store.vector_bytes import vector_blobs

    rng = np.random.default_rng(seed)
    topics = max(1, n // 20)
    centers = rng.normal(size=(topics, dim)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    topic = rng.integers(0, topics, size=n)
    noise = rng.uniform(0.01, 0.05, size=(n, 1)).astype(np.float32)
    vectors = centers[topic] + noise * rng.normal(size=(n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vocab = np.array([f"w{i}" for i in range(5000)])
    categories = np.array(["fact", "process", "chatter", "tool", "note", "observation", "preference", "error"])
    now = utcnow()
    texts, rows = [], []
    for i in range(n):
        words = " ".join(vocab[rng.integers(0, 5000, size=int(rng.integers(6, 16)))])
        text = f"topic {topic[i]} memory {i}: {words}"
        texts.append(text)
        rows.append(
            {
                "id": f"syn-{i:07d}",
                "content_hash": text_hash(text),
                "agent": f"agent-{i % agents}",
                "session": f"s{i // 50}",
                "ts": START + dt.timedelta(seconds=int(i)),
                "kind": "note",
                "content": text,
                "text": text,
                "importance": float(rng.uniform(0.1, 0.9)),
                "category": str(categories[i % len(categories)]),
                "protected": False,
                "ingested_at": now,
            }
        )
    engine = Engine(store=store, embedder=VectorsOnly(dim))
    con = engine.store.con
    for start in range(0, n, 20000):
        chunk = rows[start : start + 20000]
        table_ = pa.Table.from_pylist(chunk)
        with arrow_view(con, "incoming", table_):
            con.execute(f"INSERT INTO records ({', '.join(table_.column_names)}) SELECT * FROM incoming")
        emb = pa.table(
            {
                "text_hash": [text_hash(t) for t in texts[start : start + 20000]],
                "model": [VectorsOnly.name] * len(chunk),
                "vector": vector_blobs(vectors[start : start + 20000]),
            }
        )
        with arrow_view(con, "incoming_vectors", emb):
            con.execute(
                "INSERT INTO embeddings (text_hash, model, vector) SELECT text_hash, model, vector FROM incoming_vectors "
                "ON CONFLICT DO NOTHING"
            )
        engine.store.index.add(MEMORIES, memory_rows(chunk, vectors[start : start + 20000], dim), replace=False)
    engine.store.index.refresh_text_index(MEMORIES)
    return engine


def synthetic(n: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"bench-compact-syn{n}-") as tmp:
        started = time.perf_counter()
        engine = build_synthetic(Path(tmp), n)
        build_s = time.perf_counter() - started
        import sklearn.cluster  # noqa: F401  (before timing: the dry run goes first and must not pay the import)

        try:
            night = START + dt.timedelta(days=1)
            dry = engine.compact(refine=False, dry_run=True, now=night)  # the plan first, as an operator would
            report = engine.compact(refine=False, now=night)
        finally:
            engine.close()
    return {
        "memories": n,
        "build_seconds": round(build_s, 1),
        "cycle_seconds": report.seconds,
        "dry_run_seconds": dry.seconds,
        "dry_run_share_of_cycle": round(dry.seconds / report.seconds, 3),
        "dry_run_matches": dry.after == report.after,
        "step_seconds": {k: v.get("seconds") for k, v in report.steps.items()},
        "clusters": report.after.clusters,
        "merged": report.after.merged,
        "active_after": report.after.active,
        "k_rule": report.steps["clusters"].get("k_rule"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tau", type=Path, default=TAU, help="tau-bench airline runs (openai-chat JSON)")
    parser.add_argument("--logs", type=Path, default=REPO / "sample_logs", help="folder of native JSONL logs")
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--synthetic", default="10000,100000", help="comma-separated store sizes; empty to skip")
    parser.add_argument(
        "--no-refine-variant",
        action="store_true",
        help="on the real data, only run cycles without refinement (default: both, refinement by templates)",
    )
    parser.add_argument("--skip-real", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "compact.json")
    args = parser.parse_args()

    results: dict = {"machine": machine(), "cycles": args.cycles, "datasets": [], "synthetic": []}
    variants = {"no_refine": False} if args.no_refine_variant else {"no_refine": False, "refine_templates": True}
    if not args.skip_real:
        from common import load_embedder

        embedder = load_embedder()
        for name, paths in (
            ("tau-bench-airline", [str(args.tau)]),
            ("sample_logs", [str(p) for p in english_logs(args.logs)]),
        ):
            result = real_dataset(name, paths, cycles=args.cycles, variants=variants, embedder=embedder)
            results["datasets"].append(result)
            print(f"\n{name}: {result['raw']} raw records (ingest {result['ingest_seconds']} s)")
            for variant, data in result["variants"].items():
                print(f"\n{name}, {variant}:")
                print(
                    table(
                        ["cycle", "active", "share", "units", "dormant", "archived", "merged", "seconds", "clustering"],
                        [
                            [
                                s["cycle"],
                                s["active"],
                                round(s["active"] / result["raw"], 3),
                                s["units"],
                                s["dormant"],
                                s["archived"],
                                s["merged"],
                                s["seconds"],
                                s["clustering"][:40],
                            ]
                            for s in data["cycles"]
                        ],
                    )
                )
                print("step seconds, cycle 1:", data["cycles"][0]["step_seconds"])
    for n in [int(x) for x in args.synthetic.split(",") if x.strip()]:
        result = synthetic(n)
        results["synthetic"].append(result)
        print(
            f"\nsynthetic {n}: one cycle {result['cycle_seconds']} s, its dry run {result['dry_run_seconds']} s "
            f"({result['dry_run_share_of_cycle']:.0%}, same after-counts: {result['dry_run_matches']}) "
            f"(build {result['build_seconds']} s); "
            f"steps {result['step_seconds']}; {result['clusters']} clusters, {result['merged']} merged, "
            f"{result['active_after']} active"
        )
    tau = next((d for d in results["datasets"] if d["dataset"] == "tau-bench-airline"), None)
    shares = {v: d["active_share_after"].get(3) for v, d in (tau or {}).get("variants", {}).items()}
    results["targets"] = {
        "tau_active_share_after_3_cycles": shares,
        "tau_target_met": {v: share is not None and share <= 0.35 for v, share in shares.items()},
        "cycle_100k_seconds": next(
            (s["cycle_seconds"] for s in results["synthetic"] if s["memories"] == 100_000), None
        ),
        "dry_run_below_cycle": {s["memories"]: s["dry_run_seconds"] < s["cycle_seconds"] for s in results["synthetic"]},
    }
    write_json(args.out, results)
    print(f"\ntargets: {results['targets']}\nsaved {args.out}")


if __name__ == "__main__":
    main()
