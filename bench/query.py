"""Query latency at 10k and 100k memories, and the wall time of a cold `expengine query` process.

    python bench/query.py [--sizes 10000 100000] [--unique 3000] [--queries 200] [--no-compact]
                          [--logs sample_logs] [--locomo ../shared/data/locomo/locomo_dev.json]
                          [--out bench/results/query.json]

Stores are synthetic from real text: `--unique` distinct texts (sample-log contents and LoCoMo
turns) are embedded once with the packaged model; each stored memory is one of them with a
variant tag appended, and its vector is that text's vector plus small noise, renormalised. Rows go
straight to DuckDB and LanceDB (what ingest would write, without re-embedding 100k texts), then
`query.search.refresh_indexes` builds the FTS index and, above `query.index_above` rows, IVF-PQ.

Each store is then compacted once (refinement by templates), as real stores are: queries search
units and active memories and expand units into their sources (`--no-compact` skips it).

Measured: p50/p95 of `Engine.query(text, touch=False)` with the model loaded (queries are LoCoMo
questions and sample-log texts, so both the vector and the full-text halves have work), the share
of the query embedding alone and of everything else (with the query vectors precomputed; split into the LanceDB searches and the
DuckDB join and scoring), the same query answered by a warm `expengine serve` over its Unix socket
and over HTTP with the token, and a cold `expengine query` process split into imports, opening the
store, loading the model, and the query itself.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    REPO,
    RESULTS,
    SHARED_DATA,
    TEMPLATE_ONLY,
    english_logs,
    load_embedder,
    machine,
    served,
    table,
    write_json,
)

AGENTS = ("support-bot", "coding-assistant", "companion", "locomo")
KINDS = ("message", "observation", "tool_result", "tool_call")


def real_texts(logs: Path, locomo: Path, unique: int) -> tuple[list[str], list[str]]:
    """Distinct texts to store, and query strings (LoCoMo questions plus held-out log texts)."""
    texts: list[str] = []
    for path in english_logs(logs):
        for line in path.read_text(encoding="utf-8").splitlines():
            content = json.loads(line).get("content") if line.strip() else None
            if content:
                texts.append(content)
    questions: list[str] = []
    if locomo.exists():
        for conv in json.loads(locomo.read_text(encoding="utf-8")):
            c = conv["conversation"]
            texts += [
                f"{t['speaker']}: {t['text']}"
                for k, v in c.items()
                if k.startswith("session_") and isinstance(v, list)
                for t in v
            ]
            questions += [qa["question"] for qa in conv["qa"]]
    distinct = list(dict.fromkeys(texts))
    random.Random(7).shuffle(distinct)
    queries = questions[::7][:100] + distinct[unique : unique + 100]
    return distinct[:unique], queries


def build_store(store: Path, n: int, texts: list[str], vectors, embedder) -> dict:
    import numpy as np
    import pyarrow as pa

    from expengine import Engine
    from expengine.query.search import refresh_indexes
    from expengine.store.db import arrow_view, utcnow
    from expengine.store.index import MEMORIES, memory_schema

    rng = np.random.default_rng(n)
    now = utcnow()
    started = time.perf_counter()
    with Engine(store=store, embedder=embedder) as engine:
        for start in range(0, n, 20_000):
            idx = np.arange(start, min(n, start + 20_000))
            base = idx % len(texts)
            noisy = vectors[base] + rng.normal(scale=0.02, size=(len(idx), vectors.shape[1])).astype(np.float32)
            noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
            rows = {
                "id": [f"m{i}" for i in idx],
                "content_hash": [f"h{i}" for i in idx],
                "agent": [AGENTS[i % len(AGENTS)] for i in idx],
                "session": [f"s{i // 50}" for i in idx],
                "goal_id": [f"g{i // 20}" if i % 3 == 0 else None for i in idx],
                "ts": [now - dt.timedelta(minutes=int(n - i)) for i in idx],
                "kind": [KINDS[i % len(KINDS)] for i in idx],
                "outcome": [("success", "failure", None)[i % 3] for i in idx],
                "text": [f"{texts[b]} (variant {i})" for b, i in zip(base, idx)],
                "importance": [0.5] * len(idx),
                "category": [("fact", "process", "chatter")[i % 3] for i in idx],
                "ingested_at": [now] * len(idx),
            }
            batch = pa.table(rows)
            with arrow_view(engine.store.con, "incoming", batch) as con:
                con.execute(f"INSERT INTO records ({', '.join(batch.column_names)}) SELECT * FROM incoming")
            lance = pa.table(
                {
                    **{
                        k: rows[k]
                        for k in ("id", "agent", "kind", "category", "outcome", "goal_id", "session", "ts", "text")
                    },
                    "state": ["active"] * len(idx),
                    "vector": pa.FixedSizeListArray.from_arrays(pa.array(noisy.ravel()), embedder.dim),
                }
            )
            schema = memory_schema(embedder.dim)
            engine.store.index.add(MEMORIES, lance.select(schema.names).cast(schema), replace=False)
        written = time.perf_counter() - started
        indexes = refresh_indexes(engine.store)
    return {
        "write_s": round(written, 1),
        "index_s": round(time.perf_counter() - started - written, 1),
        "indexes": indexes,
    }


class PrecomputedEmbedder:
    """The real embedder, except that the benchmark queries' vectors are looked up: this times
    everything but the query embedding (which is measured on its own)."""

    def __init__(self, embedder, texts: list[str]):
        self.name, self.dim, self._embedder = embedder.name, embedder.dim, embedder
        self._vectors = dict(zip(texts, embedder.encode(texts)))

    def encode(self, texts: list[str]):
        import numpy as np

        if all(t in self._vectors for t in texts):
            return np.stack([self._vectors[t] for t in texts])
        return self._embedder.encode(texts)


def _percentiles(values: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values, n=100)
    return {"p50_ms": round(cuts[49], 1), "p95_ms": round(cuts[94], 1), "max_ms": round(max(values), 1)}


def measure_api(store: Path, queries: list[str], embedder) -> dict:
    """p50/p95 of the whole `Engine.query`, of the query embedding alone, and of the rest."""
    from expengine import Engine
    from expengine.query.search import embed_query, make_filters, rank, retrieve

    def timed(engine, fn) -> list[float]:
        for q in queries[:5]:
            fn(engine, q)
        out = []
        for q in queries:
            t0 = time.perf_counter()
            fn(engine, q)
            out.append((time.perf_counter() - t0) * 1000)
        return out

    # a session keeps the store open across the calls, as a long-lived server does
    with Engine(store=store, embedder=embedder) as engine, engine.session() as db:
        total = timed(engine, lambda e, q: e.query(q, touch=False))
        embed = timed(db, lambda d, q: embed_query(d, q))
        hits = sum(len(engine.query(q, touch=False).hits) for q in queries[:20])
    precomputed = PrecomputedEmbedder(embedder, queries)
    with Engine(store=store, embedder=precomputed) as engine, engine.session() as db:
        search = timed(engine, lambda e, q: e.query(q, touch=False))
        filters = make_filters()
        lance = timed(db, lambda d, q: retrieve(d, q, precomputed.encode([q])[0], filters)[0])
        fused = {q: retrieve(db, q, precomputed.encode([q])[0], filters)[0] for q in queries}
        duck = timed(db, lambda d, q: rank(d, fused[q], filters))
    return {
        "queries": len(queries),
        **_percentiles(total),
        "embed": _percentiles(embed),
        "without_embedding": _percentiles(search),
        "lancedb_vector_and_fts": _percentiles(lance),
        "duckdb_join_and_score": _percentiles(duck),
        "mean_hits": round(hits / 20, 2),
    }


COLD_PROBE = r"""
import sys, time, json
t0 = time.perf_counter()
import expengine.cli
t1 = time.perf_counter()
from expengine import Engine
import duckdb, lancedb, pyarrow
t2 = time.perf_counter()
engine = Engine(store=sys.argv[1])
t3 = time.perf_counter()
engine.embedder.encode(["x"])
t4 = time.perf_counter()
engine.query(sys.argv[2], touch=False)
t5 = time.perf_counter()
print(json.dumps({"import_cli_s": t1 - t0, "import_engine_duckdb_lancedb_s": t2 - t1, "open_store_s": t3 - t2,
                  "load_model_s": t4 - t3, "query_s": t5 - t4}))
"""


def compact_store(store: Path, embedder) -> dict:
    """One compaction with template refinement: units, dormant sources, merged survivors."""
    from expengine import Engine

    with Engine(store=store, embedder=embedder, overrides=dict(TEMPLATE_ONLY)) as engine:
        report = engine.compact(refine=True)
    return {
        "compact_s": report.seconds,
        "units": report.after.units,
        "active": report.after.active,
        "dormant": report.after.dormant,
    }


def measure_server(store: Path, queries: list[str]) -> dict:
    """p50/p95 of the query API of a warm server, over the Unix socket and over HTTP."""
    out = {}
    with served(store, dict(TEMPLATE_ONLY)) as (unix, tcp):
        for name, client in (("socket", unix), ("http", tcp)):
            for q in queries[:5]:
                client.call("query", {"text": q, "touch": False})
            times = []
            for q in queries:
                t0 = time.perf_counter()
                client.call("query", {"text": q, "touch": False})
                times.append((time.perf_counter() - t0) * 1000)
            out[name] = _percentiles(times)
    return out


def measure_cold(store: Path, text: str) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run(
        ["expengine", "--store", str(store), "query", text, "--no-touch", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - t0
    assert json.loads(out.stdout)["hits"], "the cold query found nothing"
    t0 = time.perf_counter()
    parts = json.loads(
        subprocess.run(
            [sys.executable, "-c", COLD_PROBE, str(store), text], capture_output=True, text=True, check=True
        ).stdout
    )
    probe_wall = time.perf_counter() - t0
    parts = {k: round(v, 2) for k, v in parts.items()}
    parts["interpreter_start_s"] = round(probe_wall - sum(parts.values()), 2)
    return {"cli_wall_s": round(wall, 2), "breakdown": parts, "dominated_by": max(parts, key=parts.get)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--unique", type=int, default=3000, help="distinct real texts embedded (the rest are variants)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-compact", dest="compact", action="store_false", help="query the store as built")
    parser.add_argument("--logs", type=Path, default=REPO / "sample_logs")
    parser.add_argument("--locomo", type=Path, default=SHARED_DATA / "locomo" / "locomo_dev.json")
    parser.add_argument("--out", type=Path, default=RESULTS / "query.json")
    args = parser.parse_args()

    embedder = load_embedder()
    texts, queries = real_texts(args.logs, args.locomo, args.unique)
    queries = (queries * (args.queries // max(1, len(queries)) + 1))[: args.queries]
    t0 = time.perf_counter()
    vectors = embedder.encode(texts)
    embed_s = time.perf_counter() - t0
    report = {"machine": machine(), "unique_texts": len(texts), "embed_unique_s": round(embed_s, 1), "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            store = Path(tmp) / f"store-{n}"
            built = build_store(store, n, texts, vectors, embedder)
            compacted = compact_store(store, embedder) if args.compact else None
            api = measure_api(store, queries, embedder)
            cold = measure_cold(store, queries[0])
            server = measure_server(store, queries)
            report["sizes"][str(n)] = {
                "memories": n,
                **built,
                "compacted": compacted,
                "api": api,
                "server": server,
                "cold_cli": cold,
            }
            print(f"{n}: {json.dumps(report['sizes'][str(n)])}", file=sys.stderr)
    write_json(args.out, report)
    print(
        table(
            [
                "memories",
                "units",
                "vector index",
                "p50 ms",
                "p95 ms",
                "embed p50/p95 ms",
                "rest p50/p95 ms",
                "socket p50/p95 ms",
                "HTTP p50/p95 ms",
                "cold CLI s",
                "cold dominated by",
            ],
            [
                [
                    s["memories"],
                    (s["compacted"] or {}).get("units", "-"),
                    s["indexes"]["memories"]["vector_index"],
                    s["api"]["p50_ms"],
                    s["api"]["p95_ms"],
                    f"{s['api']['embed']['p50_ms']}/{s['api']['embed']['p95_ms']}",
                    f"{s['api']['without_embedding']['p50_ms']}/{s['api']['without_embedding']['p95_ms']}",
                    f"{s['server']['socket']['p50_ms']}/{s['server']['socket']['p95_ms']}",
                    f"{s['server']['http']['p50_ms']}/{s['server']['http']['p95_ms']}",
                    s["cold_cli"]["cli_wall_s"],
                    s["cold_cli"]["dominated_by"],
                ]
                for s in report["sizes"].values()
            ],
        )
    )
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
