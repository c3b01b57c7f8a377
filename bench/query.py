"""Query latency at 10k and 100k memories on compacted stores with units, in-process and through a server.

    python bench/query.py [--sizes 10000 100000] [--queries 200] [--workdir DIR] [--cold 5] [--skip-cold]
                          [--logs sample_logs] [--locomo ../shared/data/locomo/locomo_dev.json]
                          [--out bench/results/query.json] [--docs docs/benchmarks.md]

The stores are what compaction makes of real logs, at scale: `--logs` is ingested by the real
pipeline and compacted once with template refinement (rules and facts with their sources, dormant,
merged and archived memories); each store is as many copies of that base as reach the size, every
copy with its own ids, sessions and goals (sources and merges point inside the copy), tagged texts,
earlier times and noisy vectors (see `build_store`). Synthetic rows without goals, tool calls or
sessions (the previous version) gave compaction nothing to refine: 0 units. `--workdir` keeps the
base and the stores for the next run.

Measured: p50/p95 of `Engine.query(text, k=5, touch=False)` on a warm `Engine` (`Engine.warm`, as the
server does at start: the model loaded and the vectors queries compare read into memory; queries are
LoCoMo questions and user messages from the logs, so both the vector and the full-text halves have
work), the query embedding alone and the rest (query vectors precomputed), split into the LanceDB
searches, the DuckDB join and scoring, and the rule slot plus unit expansion; the same query answered
by a warm `expengine serve` over its Unix socket and over HTTP with the token; cold `expengine query`
processes answered through that server; and a cold direct `expengine query` process split into
imports, opening the store, loading the model, and the query itself.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import random
import shutil
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
    timed_process,
    update_doc_section,
    write_json,
)


def query_texts(logs: Path, locomo: Path, count: int) -> list[str]:
    """What agents ask: LoCoMo questions (worded unlike any stored text) and user messages from the logs."""
    said: list[str] = []
    for path in english_logs(logs):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line) if line.strip() else {}
            if event.get("role") == "user" and event.get("content"):
                said.append(event["content"])
    questions = [qa["question"] for conv in json.loads(locomo.read_text(encoding="utf-8")) for qa in conv["qa"]]
    said = list(dict.fromkeys(said))
    random.Random(7).shuffle(said)
    queries = questions[::7][: count // 2] + said[: count - min(len(questions[::7]), count // 2)]
    return (queries * (count // max(1, len(queries)) + 1))[:count]


def base_store(store: Path, logs: Path, embedder) -> dict:
    """`logs` ingested by the real pipeline and compacted once (refinement by templates), so the
    store has what compaction makes of real logs: rules and facts with sources, dormant and merged
    memories. Built once per `--workdir` and reused."""
    from expengine import Engine

    report = store / "bench-base.json"
    if report.exists():
        return json.loads(report.read_text())
    with Engine(store=store, embedder=embedder, overrides=dict(TEMPLATE_ONLY)) as engine:
        ingested = engine.ingest([str(p) for p in [*english_logs(logs), *sorted(logs.glob("*.json"))]])
        compacted = engine.compact(refine=True)
    out = {
        "records": ingested.stored,
        "compact_s": compacted.seconds,
        "units": compacted.after.units,
        "active": compacted.after.active,
        "dormant": compacted.after.dormant,
    }
    report.write_text(json.dumps(out))
    return out


# Columns that hold record ids (or lists of them) and must point inside their own copy.
_RECORD_SQL = """
    SELECT * REPLACE (
        id || $s AS id, content_hash || $s AS content_hash, session || $s AS session, goal_id || $s AS goal_id,
        text || $tag AS text, merged_into || $s AS merged_into, feedback_target || $s AS feedback_target,
        to_json(list_transform(from_json(merged_ids, '["VARCHAR"]'), lambda x: x || $s))::VARCHAR AS merged_ids,
        ts - $shift AS ts, last_access - $shift AS last_access, marked_at - $shift AS marked_at
    ) FROM base_records
"""
_UNIT_SQL = """
    SELECT * REPLACE (
        id || $s AS id, text || $tag AS text, cluster_key || $s AS cluster_key,
        supersedes || $s AS supersedes, superseded_by || $s AS superseded_by,
        to_json(list_transform(from_json(source_ids, '["VARCHAR"]'), lambda x: x || $s))::VARCHAR AS source_ids,
        as_of - $shift AS as_of, created - $shift AS created, updated - $shift AS updated,
        last_used - $shift AS last_used
    ) FROM base_units
"""


def build_store(store: Path, base: Path, copies: int, embedder) -> dict:
    """`copies` copies of the compacted base store in one store: copy r > 0 has its ids, sessions and
    goals suffixed `~r<r>` (sources, merges and supersessions point inside the copy), its texts
    tagged " (variant r)", its times r days earlier, and each text's vector (in LanceDB and the
    embedding cache) is the base text's vector plus small noise, renormalised. Then
    `query.search.refresh_indexes` builds the FTS indexes and, above `query.index_above` rows, IVF-PQ."""
    import numpy as np
    import pyarrow as pa

    from expengine import Engine
    from expengine.store.db import arrow_view
    from expengine.store.embeddings import text_hash
    from expengine.store.index import MEMORIES, UNITS
    from expengine.store.lance_rows import memory_schema, unit_schema
    from expengine.store.reindex import refresh_indexes
    from expengine.store.vector_bytes import vector_blobs

    started = time.perf_counter()
    shutil.copytree(base, store, ignore=shutil.ignore_patterns("snapshots", "bench-*.json"), dirs_exist_ok=True)
    with Engine(store=store, embedder=embedder) as engine, engine.session() as db:
        con = db.con
        con.execute("CREATE TEMP TABLE base_records AS SELECT * FROM records")
        con.execute("CREATE TEMP TABLE base_units AS SELECT * FROM units")
        texts = [t for (t,) in con.execute("SELECT text FROM records UNION SELECT text FROM units").fetchall()]
        vectors = db.embeddings.encode(texts)
        lance = {name: db.index.table(name).to_arrow().drop_columns(["vector"]) for name in (MEMORIES, UNITS)}
        schemas = {MEMORIES: memory_schema(embedder.dim), UNITS: unit_schema(embedder.dim)}
        suffixed = {MEMORIES: ("id", "goal_id", "session"), UNITS: ("id",)}
        rng = np.random.default_rng(copies)
        for r in range(1, copies):
            params = {"s": f"~r{r}", "tag": f" (variant {r})", "shift": dt.timedelta(days=r)}
            noisy = vectors + rng.normal(scale=0.02, size=vectors.shape).astype(np.float32)
            noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
            copy = pa.table(
                {
                    "text": texts,
                    "new_text": [t + params["tag"] for t in texts],
                    "vector": pa.FixedSizeListArray.from_arrays(pa.array(noisy.ravel()), embedder.dim),
                }
            )
            cache = pa.table(
                {
                    "text_hash": [text_hash(t) for t in copy.column("new_text").to_pylist()],
                    "model": [db.embeddings.name] * len(texts),
                    "vector": vector_blobs(noisy),
                }
            )
            with arrow_view(con, "cache", cache):
                con.execute(
                    "INSERT INTO embeddings (text_hash, model, vector) SELECT text_hash, model, vector FROM cache "
                    "ON CONFLICT DO NOTHING"
                )
            con.execute(f"INSERT INTO records {_RECORD_SQL}", params)
            con.execute(f"INSERT INTO units {_UNIT_SQL}", params)
            with arrow_view(con, "copy", copy):
                for name, rows in lance.items():
                    renamed = ", ".join(f"{c} || $s AS {c}" for c in suffixed[name])
                    with arrow_view(con, "rows", rows):
                        table = con.sql(
                            f"SELECT rows.* REPLACE ({renamed}, ts - $shift AS ts, copy.new_text AS text), copy.vector "
                            "FROM rows JOIN copy USING (text)",
                            params={"s": params["s"], "shift": params["shift"]},
                        ).to_arrow_table()
                    db.index.add(name, table.select(schemas[name].names).cast(schemas[name]), replace=False)
        written = time.perf_counter() - started
        indexes = refresh_indexes(db)
        counts = dict(
            zip(
                ("records", "active", "dormant", "archived"),
                con.execute(
                    "SELECT count(*), count(*) FILTER (state = 'active'), count(*) FILTER (state = 'dormant'), "
                    "count(*) FILTER (state = 'archived') FROM records"
                ).fetchone(),
            )
        )
        counts["units"] = con.execute("SELECT count(*) FROM units WHERE status = 'active'").fetchone()[0]
        counts["indexed_memories"] = db.index.count(MEMORIES)
        counts["indexed_units"] = db.index.count(UNITS)
    return {
        **counts,
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


# the queries that warm each timed pass up, none of them a bench query
WARM_UP = [f"warm-up question {i}: what did the agent do about the weather?" for i in range(5)]


def measure_api(store: Path, queries: list[str], embedder) -> dict:
    """p50/p95 of the whole `Engine.query`, of the query embedding alone, and of the rest, split into
    its steps: the four LanceDB searches, the DuckDB join and scoring, and the rule slot plus unit
    expansion (the shown units' sources, their vectors from LanceDB, or from the embedding cache when
    archived)."""
    from expengine import Engine
    from expengine.clock import utcnow
    from expengine.operations import QueryArgs
    from expengine.query.expand import attach_evidence
    from expengine.query.filters import make_filters
    from expengine.query.retrieve import retrieve
    from expengine.query.score import attach_sources, rank, top_with_unit_slot

    def timed(engine, fn) -> list[float]:
        for q in WARM_UP:  # not the timed texts: a warm process answers a text it was asked from its memo
            fn(engine, q)
        out = []
        for q in queries:
            t0 = time.perf_counter()
            fn(engine, q)
            out.append((time.perf_counter() - t0) * 1000)
        return out

    # a session keeps the store open across the calls, and `warm` reads the vectors queries compare into
    # memory, as a long-lived server does at start
    with Engine(store=store, embedder=embedder) as engine, engine.session() as db:
        warmed = engine.warm()
        total = timed(engine, lambda e, q: e.query(q, touch=False))
        embed = timed(db, lambda d, q: embedder.encode([q]))  # what `embed_query` runs for a text not asked before
        hits = sum(len(engine.query(q, touch=False).hits) for q in queries[:20])
    precomputed = PrecomputedEmbedder(embedder, queries + WARM_UP)
    with Engine(store=store, embedder=precomputed) as engine, engine.session() as db:
        engine.warm()
        search = timed(engine, lambda e, q: e.query(q, touch=False))
        filters = make_filters(QueryArgs(text="any"))
        lance = timed(db, lambda d, q: retrieve(d, q, precomputed.encode([q])[0], filters))
        found = {q: retrieve(db, q, precomputed.encode([q])[0], filters) for q in queries + WARM_UP}

        def unit_memo_rows(d):  # the unit memo's rows, as `search.query` reads them once a query
            return d.unit_rows.current(d.con, d.dir, in_transaction=d.in_transaction)

        def score(d, q: str):
            return rank(d, found[q].fused, filters, found[q].texts, found[q].cosines, unit_memo_rows(d), now=utcnow())

        duck = timed(db, score)
        ranked = {q: score(db, q) for q in queries + WARM_UP}

        def expand(d, q: str) -> None:
            vector = precomputed.encode([q])[0]
            top = top_with_unit_slot(d, ranked[q], vector, 5, unit_memo_rows(d))
            attach_sources(d, top, found[q].texts, filters)
            attach_evidence(d, top, vector)

        expansion = timed(db, expand)
        units = sum(h.type == "unit" for q in queries[:20] for h in engine.query(q, touch=False).hits)
    return {
        "queries": len(queries),
        "vectors_warmed": warmed,
        **_percentiles(total),
        "embed": _percentiles(embed),
        "without_embedding": _percentiles(search),
        "lancedb_vector_and_fts": _percentiles(lance),
        "duckdb_join_and_score": _percentiles(duck),
        "rule_slot_and_expansion": _percentiles(expansion),
        "mean_hits": round(hits / 20, 2),
        "mean_unit_hits": round(units / 20, 2),
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


def measure_server(store: Path, queries: list[str], http_queries: list[str], cold_text: str, cold: int) -> dict:
    """p50/p95 of the query API of a warm server, over the Unix socket (`queries`) and over HTTP
    (`http_queries`: other texts, as the server answers a text it was asked from its memo); and `cold`
    CLI processes asking `cold_text` through it (wall and CPU seconds, median)."""
    out: dict = {}
    with served(store, dict(TEMPLATE_ONLY)) as (unix, tcp):
        cli = ["expengine", "--store", str(store), "query", cold_text, "--no-touch", "--json"]
        runs = [timed_process(cli) for _ in range(cold)]
        if runs:
            out["cold_cli"] = {k: round(statistics.median(r[k] for r in runs), 3) for k in ("wall_s", "cpu_s")}
            out["cold_cli"]["wall_s_min"] = min(r["wall_s"] for r in runs)
        for name, client, texts in (("socket", unix, queries), ("http", tcp, http_queries)):
            for q in WARM_UP:
                client.call("query", {"text": q, "touch": False})
            times = []
            for q in texts:
                t0 = time.perf_counter()
                client.call("query", {"text": q, "touch": False})
                times.append((time.perf_counter() - t0) * 1000)
            out[name] = _percentiles(times)
    return out


def measure_cold(store: Path, queries: list[str]) -> dict:
    """A cold `expengine query` process, timed on the first of `queries` that has hits (a LoCoMo question
    asked of a store of the sample logs is mostly "nothing relevant", which returns before the scoring)."""
    for text in queries[:20]:
        t0 = time.perf_counter()
        out = subprocess.run(
            ["expengine", "--store", str(store), "query", text, "--no-touch", "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        wall = time.perf_counter() - t0
        if json.loads(out.stdout)["hits"]:
            break
    else:
        raise AssertionError("none of the first 20 cold queries found anything")
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
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--logs", type=Path, default=REPO / "sample_logs")
    parser.add_argument("--locomo", type=Path, default=SHARED_DATA / "locomo" / "locomo_dev.json")
    parser.add_argument("--workdir", type=Path, help="keep the stores here and reuse them (default: a temp folder)")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold direct CLI process")
    parser.add_argument("--cold", type=int, default=5, help="cold CLI processes answered through the server")
    parser.add_argument("--out", type=Path, default=RESULTS / "query.json")
    parser.add_argument("--docs", type=Path, help="also write the table into this Markdown file (its query section)")
    args = parser.parse_args()

    embedder = load_embedder(args.workdir / "base" if args.workdir else None)
    # the HTTP pass and the cold CLI through the server ask texts of their own (see `measure_server`)
    texts = query_texts(args.logs, args.locomo, 2 * args.queries + 1)
    queries, http_queries, server_cold_text = texts[: args.queries], texts[args.queries : -1], texts[-1]
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        base = base_store(workdir / "base", args.logs, embedder)
        report = {"machine": machine(), "base": base, "sizes": {}}
        for n in args.sizes:
            store, copies = workdir / f"store-{n}", -(-n // base["records"])
            built_file = store / "bench-built.json"
            if not built_file.exists():
                shutil.rmtree(store, ignore_errors=True)
                built_file.parent.mkdir(parents=True)
                built_file.write_text(json.dumps(build_store(store, workdir / "base", copies, embedder)))
            built = json.loads(built_file.read_text())
            api = measure_api(store, queries, embedder)
            server = measure_server(store, queries, http_queries, server_cold_text, args.cold)
            cold = None if args.skip_cold else measure_cold(store, queries)
            report["sizes"][str(n)] = {
                "memories": built["records"],
                "copies": copies,
                **built,
                "api": api,
                "server": server,
                "cold_cli": cold,
            }
            print(f"{n}: {json.dumps(report['sizes'][str(n)])}", file=sys.stderr)
    write_json(args.out, report)
    text = report_text(report, args)
    print(text)
    if args.docs:
        update_doc_section(args.docs, "query", text)
    print(f"saved {args.out}")


def _pair(p: dict) -> str:
    return f"{p['p50_ms']} / {p['p95_ms']}"


def report_text(report: dict, args: argparse.Namespace) -> str:
    """The Markdown section for docs/benchmarks.md: how it was run, then one row per store size."""
    base = report["base"]
    rows = []
    for s in report["sizes"].values():
        api, cold = s["api"], s["cold_cli"]
        rows.append(
            [
                f"{s['memories']:,} ({s['indexed_memories']:,} indexed, {s['active']:,} active)",
                f"{s['units']:,}",
                "IVF-PQ" if s["indexes"]["memories"]["vector_index"] else "exact",
                _pair(api),
                _pair(api["embed"]),
                _pair(api["without_embedding"]),
                _pair(api["lancedb_vector_and_fts"]),
                _pair(api["duckdb_join_and_score"]),
                _pair(api["rule_slot_and_expansion"]),
                _pair(s["server"]["socket"]),
                _pair(s["server"]["http"]),
                "-" if cold is None else f"{cold['cli_wall_s']} s ({cold['dominated_by']})",
                "-"
                if "cold_cli" not in s["server"]
                else f"{s['server']['cold_cli']['wall_s']} s wall, {s['server']['cold_cli']['cpu_s']} s CPU",
            ]
        )
    head = (
        f"`python bench/query.py --sizes {' '.join(map(str, args.sizes))} --queries {args.queries}` "
        f"({report['machine']}; {dt.date.today().isoformat()}). Each store is copies of `sample_logs/` ingested "
        f"and compacted once with template refinement ({base['records']:,} records -> {base['units']} units, "
        f"{base['active']:,} active, {base['dormant']:,} dormant), with copy-suffixed ids, tagged texts and "
        "noisy vectors; queries are LoCoMo questions and user messages from the logs, `k=5, touch=False`, "
        "unit expansion on. Times in ms, p50 / p95; the API columns are in-process on a warm `Engine`."
    )
    headers = [
        "memories",
        "units",
        "vector index",
        "API query",
        "embedding",
        "rest",
        "LanceDB searches",
        "DuckDB join + score",
        "rule slot + expansion",
        "socket",
        "HTTP",
        "cold CLI, direct",
        "cold CLI via server",
    ]
    return f"{head}\n\n{table(headers, rows)}"


if __name__ == "__main__":
    main()
