"""One box on the way to 1M records: ingest into one growing store (the rate at the start against the end,
and the memory it holds), the query path's pieces, and reads by id.

    python bench/million.py [--records 200000] [--chunks 10] [--encoder onnx-int8] [--workdir DIR]
                            [--out bench/results/million.json]
    python bench/million.py --query-store DIR/store-100000 [--queries 200]   # million-query.json
    python bench/million.py --ids-table 1000000                              # million-ids.json
    python bench/million.py --grown 100000 [--chunk 10000]                   # million-grown.json
    python bench/million.py --memo-table 100000                              # million-memo.json

The real ingest path (`Engine.ingest`, the int8 ONNX encoder a new store gets, every text distinct so
every one is embedded) into ONE store, `--chunks` files of bench/fleet.py's short synthetic records
(user asks, tool calls and results of 20 agents), one `ingest` call a file, as cron would feed a store
all year. Per chunk: records/s, CPU seconds per 1,000 records, and the process's peak RSS during the
chunk (sampled every 20 ms); then the last chunk's rate against the first's (target: within 10%) and the
peak RSS of the whole run. A rate that falls with the store, or an RSS that climbs chunk after chunk,
is a step that reads what the store holds rather than what the chunk brings.

`--query-store` instead times the query path on a store bench/query.py built (`--workdir DIR`): the
whole warm `Engine.query` with the bound on the sleeping turns' search (`retrieve.noted_could_reach`)
(wall, and the process's CPU: LanceDB's threads included, what a loaded machine does not distort) and without it (each query asked once untimed first, so both read its vector from the process's memo,
and in turns, each first every other query, so both see the same load), whether their answers agree,
and the pieces: the query embedding, the memories' vector search (50 candidates, refined, with and
without their texts), the full-text searches, the sleeping turns' search and the bound.

`--ids-table N` times a read of 5 records by id in a DuckDB table of N synthetic records (ids as
bench/query.py's copies spell them, a 160-character text) written as `IN (SELECT unnest(?))` and as
`db.in_ids` writes it (the ids as parameters): what a query's reads by id cost as the store grows.

`--grown N` times one `ingest` of `--chunk` fresh records into an empty store and into a store of N
records (built once, copied for each try), with the encoder replaced by a hash of the text (`HashEmbedder`:
what the store's writes cost, not the model's), under cProfile: the CPU seconds of each and the functions
whose cumulative time grew most. A cost that grows with the store shows up as the difference.

`--memo-table N` reads the records' memo (`store.rows`: the scoring columns of every record, which a warm
process reads whole after each write settles) from a store of N synthetic records, as a tuple per row
(`RowMemo`, as it was) and as columns (`RecordMemo`), each in a fresh forked process: the CPU seconds of
the read, the resident memory it added (DuckDB's cached blocks of the table included), what the memo
itself holds (a second read, traced: Python's allocations and Arrow's), the CPU ms of a lookup of 300 ids (a query's candidates and
sources; 5 not held), and whether both give the same rows.

Issue #38 asks for 1M records at >= 1,000 records/s on 2 cores; a 1M run takes ~20 minutes of both
cores at best, so a shorter `--records` measures the trend and the note extrapolates from it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, machine, table, write_json  # noqa: E402
from scale import PeakRss  # noqa: E402


def ingest_chunks(
    store: Path, files: list[Path], embedder: Any, rss: PeakRss, report: dict[str, Any], out: Path
) -> list[dict[str, Any]]:
    """Each file ingested by its own `Engine.ingest` call into `store`; one row per chunk, the report
    written to `out` after each (a run stopped early keeps the chunks it finished)."""
    from expengine import Engine

    rows = []
    total = 0
    with Engine(store=store, embedder=embedder) as engine:
        for n, path in enumerate(files, start=1):
            rss.peak = rss.rss()
            started, cpu = time.perf_counter(), time.process_time()
            result = engine.ingest([str(path)])
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
            total += result.stored
            assert result.embedded == result.stored, "a text came from the cache: the run would flatter ingest"
            row = {
                "chunk": n,
                "stored": result.stored,
                "store_records": total,
                "seconds": round(seconds, 2),
                "records_per_s": round(result.stored / seconds, 1),
                "cpu_s_per_1k": round(cpu / result.stored * 1000, 2),
                "peak_rss_mb": round(rss.peak / 2**20),
                "load": round(os.getloadavg()[0], 2),
            }
            rows.append(row)
            print(row, file=sys.stderr, flush=True)
            write_json(out, {**report, "chunks": rows, "summary": summary(rows)})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    first, last = rows[0], rows[-1]
    seconds = sum(r["seconds"] for r in rows)
    stored = sum(r["stored"] for r in rows)
    return {
        "records": stored,
        "seconds": round(seconds, 1),
        "records_per_s": round(stored / seconds, 1),
        "first_chunk_per_s": first["records_per_s"],
        "last_chunk_per_s": last["records_per_s"],
        "last_over_first": round(last["records_per_s"] / first["records_per_s"], 3),
        "cpu_last_over_first": round(last["cpu_s_per_1k"] / first["cpu_s_per_1k"], 3),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in rows),
        "rss_first_last_mb": [first["peak_rss_mb"], last["peak_rss_mb"]],
    }


def _ms(values: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values, n=100)
    return {"p50": round(cuts[49], 1), "p95": round(cuts[94], 1)}


def measure_query(store: Path, count: int) -> dict[str, Any]:
    """The warm query with and without the noted bound, alternating, and its pieces (see the docstring)."""
    from common import REPO, SHARED_DATA, load_embedder
    from query import WARM_UP, query_texts

    from expengine import Engine
    from expengine.operations import QueryArgs
    from expengine.query import retrieve, search
    from expengine.query.filters import make_filters
    from expengine.store.index import MEMORIES, UNITS

    embedder = load_embedder(store)
    queries = query_texts(REPO / "sample_logs", SHARED_DATA / "locomo" / "locomo_dev.json", count)
    bound = search.noted_could_reach

    def answer(engine: Any, q: str) -> tuple[float, float, tuple]:
        started, cpu = time.perf_counter(), time.process_time()
        r = engine.query(q, touch=False)
        took = ((time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000)
        return (*took, (r.relevant, r.best_similarity, [h.id for h in r.hits]))

    with Engine(store=store, embedder=embedder) as engine, engine.session() as db:
        engine.warm()
        for q in WARM_UP:
            engine.query(q, touch=False)
        on, off, on_cpu, same = [], [], [], 0
        for n, q in enumerate(queries):
            answer(engine, q)  # untimed: the query's vector is then the process's memo's for both
            results = {}
            for with_bound in (n % 2 == 0, n % 2 == 1):  # each goes first every other query
                search.noted_could_reach = bound if with_bound else lambda *_: True
                results[with_bound] = answer(engine, q)
            on.append(results[True][0])
            off.append(results[False][0])
            on_cpu.append(results[True][1])
            same += results[True][2] == results[False][2]
        search.noted_could_reach = bound
        units = db.unit_rows.current(db.con, db.dir, in_transaction=db.in_transaction)
        filters = make_filters(QueryArgs(text="any"))
        where = filters.memory_where()
        vectors = {q: embedder.encode([q])[0] for q in queries}

        def timed(fn: Any) -> dict[str, float]:
            out = []
            for q in queries:
                started = time.perf_counter()
                fn(q)
                out.append((time.perf_counter() - started) * 1000)
            return _ms(out)

        pieces = {
            "embed": timed(lambda q: embedder.encode([q])),
            "memories_vector_with_text": timed(lambda q: db.index.nearest(MEMORIES, vectors[q], where, 50, ("text",))),
            "memories_vector_ids_only": timed(lambda q: db.index.nearest(MEMORIES, vectors[q], where, 50)),
            "memories_fts": timed(lambda q: db.index.text_search(MEMORIES, retrieve.fts_text(q), where, 50)),
            "units_fts": timed(lambda q: db.index.text_search(UNITS, retrieve.fts_text(q), filters.unit_where(), 50)),
            "sleeping_turns_search": timed(lambda q: retrieve.noted_best(db, vectors[q], filters, units)),
            "noted_bound": timed(lambda q: retrieve.noted_could_reach(db, vectors[q], 0.3, units)),
        }
        noted = 0 if units is None else len(retrieve._noted_vectors(db, units))
    return {
        "store": str(store),
        "queries": len(queries),
        "query_with_bound": _ms(on),
        "query_with_bound_cpu": _ms(on_cpu),
        "query_without_bound": _ms(off),
        "same_answers": same,
        "noted_vectors": noted,
        "pieces": pieces,
        "load": [round(x, 2) for x in os.getloadavg()],
    }


def measure_ids(rows: int, folder: Path) -> dict[str, Any]:
    """p50/p95 of reading 5 records by id, 40 times, each way (see the docstring)."""
    import duckdb

    from expengine.store.db import in_ids

    con = duckdb.connect(str(folder / "ids.duckdb"))
    con.execute("CREATE TABLE records (id VARCHAR PRIMARY KEY, text VARCHAR NOT NULL)")
    con.execute(
        "INSERT INTO records SELECT 'sb-' || lpad((i % 3890)::VARCHAR, 6, '0') || '~r' || (i // 3890)::VARCHAR, "
        "'some text of record ' || i::VARCHAR || repeat(' filler', 20) FROM range(?) t(i)",
        [rows],
    )
    con.execute("CHECKPOINT")
    ids = [i for (i,) in con.execute("SELECT id FROM records USING SAMPLE 200 ROWS").fetchall()]

    def timed(read: Any) -> dict[str, float]:
        out = []
        for start in range(0, len(ids), 5):
            started = time.perf_counter()
            read(ids[start : start + 5])
            out.append((time.perf_counter() - started) * 1000)
        return _ms(out)

    def spelled(some: list[str]) -> None:
        where, params = in_ids("id", some)
        con.execute(f"SELECT id, text FROM records WHERE {where}", params).fetchall()

    joined = timed(
        lambda some: con.execute("SELECT id, text FROM records WHERE id IN (SELECT unnest(?))", [some]).fetchall()
    )
    out = {
        "rows": rows,
        "unnest_ms": joined,
        "in_ids_ms": timed(spelled),
        "load": [round(x, 2) for x in os.getloadavg()],
    }
    con.close()
    return out


MEMO_KINDS = ("rows", "columns")


def _memo_in_child(db: str, kind: str, ids: list[str]) -> dict[str, Any]:
    """One memo read and its lookups, in a forked process so that what it adds to RSS is its own."""
    import gc
    import hashlib

    from expengine.store.db import close_database, open_database
    from expengine.store.row_memo import RECORD_COLUMNS, RecordMemo, RowMemo

    page = os.sysconf("SC_PAGE_SIZE")

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page

    import tracemalloc

    import pyarrow as pa

    con = open_database(Path(db), read_only=True)
    memo = RowMemo("records", RECORD_COLUMNS) if kind == "rows" else RecordMemo()
    gc.collect()
    before, cpu = rss(), time.process_time()
    held = memo.load(con, Path(db).parent)
    cpu = time.process_time() - cpu
    gc.collect()
    added = rss() - before
    memo._rows = None  # read again, traced: what the memo itself holds, without DuckDB's cached blocks
    gc.collect()
    tracemalloc.start()
    arrow = pa.total_allocated_bytes()
    memo.load(con, Path(db).parent)
    gc.collect()
    holds = tracemalloc.get_traced_memory()[0] + pa.total_allocated_bytes() - arrow
    tracemalloc.stop()
    lookups = []
    for _ in range(200):
        started = time.process_time()
        rows = memo.lookup(con, Path(db).parent, ids, in_transaction=False)
        lookups.append((time.process_time() - started) * 1000)
    close_database(con, whole=False)
    assert rows is not None
    return {
        "rows": held,
        "load_cpu_s": round(cpu, 2),
        "rss_added_mb": round(added / 2**20, 1),
        "holds_mb": round(holds / 2**20, 1),
        "lookup_cpu_ms": _ms(lookups),
        "found": len(rows),
        "answers": hashlib.sha256(repr([tuple(r) for r in rows]).encode()).hexdigest()[:16],
    }


def measure_memo(rows: int, folder: Path) -> dict[str, Any]:
    """The records' memo as rows and as columns on a store of `rows` records (see the docstring)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from expengine.store.db import DB_FILE, close_database, open_database

    db = folder / DB_FILE
    con = open_database(db)  # the store's schema, by its migrations
    con.execute(
        """
        INSERT INTO records (id, content_hash, agent, ts, kind, text, importance, category, weight, state,
                             last_access, utility, merged_ids, "user", ingested_at)
        SELECT 'sb-' || lpad((i % 3890)::VARCHAR, 6, '0') || '~r' || (i // 3890)::VARCHAR, md5(i::VARCHAR),
               'agent-' || (i % 20)::VARCHAR, TIMESTAMP '2026-01-01' + to_seconds(i * 37),
               ['message', 'tool_call', 'tool_result', 'outcome'][1 + i % 4], 'text of record ' || i::VARCHAR,
               0.5, ['tool', 'error', 'success', 'preference', 'episodic'][1 + i % 5], 1.0 - (i % 97) / 100.0,
               ['active', 'active', 'active', 'dormant', 'archived'][1 + i % 5],
               CASE WHEN i % 7 = 0 THEN TIMESTAMP '2026-06-01' + to_seconds(i) END, (i % 11) / 10.0,
               CASE WHEN i % 13 = 0 THEN '["m' || i::VARCHAR || '"]' END,
               CASE WHEN i % 3 = 0 THEN 'user-' || (i % 50)::VARCHAR END, TIMESTAMP '2026-12-01'
        FROM range(?) t(i)
        """,
        [rows],
    )
    ids = [i for (i,) in con.execute("SELECT id FROM records USING SAMPLE 295 ROWS").fetchall()]
    ids += [f"absent-{n}" for n in range(5)]
    close_database(con)
    out: dict[str, Any] = {"records": rows}
    for kind in MEMO_KINDS:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
            out[kind] = pool.submit(_memo_in_child, str(db), kind, ids).result()
        print(kind, out[kind], file=sys.stderr, flush=True)
    out["same_answers"] = out["rows"]["answers"] == out["columns"]["answers"]
    out["load"] = [round(x, 2) for x in os.getloadavg()]
    return out


class HashEmbedder:
    """Unit vectors drawn from a hash of each text: as cheap as an encoder can be, distinct per text."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def encode(self, texts: list[str]) -> Any:
        import hashlib

        import numpy as np

        out = np.empty((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            out[row] = np.random.default_rng(seed).standard_normal(self.dim, dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def measure_grown(records: int, chunk: int, folder: Path) -> dict[str, Any]:
    """CPU seconds and profile of one chunk into an empty store and into one of `records` (see the docstring)."""
    import cProfile
    import pstats
    import shutil

    from fleet import synthetic_logs

    from expengine import Engine

    files = synthetic_logs(folder / "logs", records + chunk, files=records // chunk + 1)
    fresh, built = files[records // chunk], files[: records // chunk]
    build_cpu = time.process_time()
    for store, feed in (("empty", []), ("grown", built)):
        with Engine(store=folder / store, embedder=HashEmbedder()) as engine:
            for path in feed:
                engine.ingest([str(path)])
            engine.stats()
    build_cpu = time.process_time() - build_cpu
    out: dict[str, Any] = {"records": records, "chunk": chunk, "build_cpu_s": round(build_cpu, 1)}
    cumulative: dict[str, dict[str, float]] = {}
    for store in ("empty", "grown"):
        shutil.copytree(folder / store, folder / f"try-{store}")
        with Engine(store=folder / f"try-{store}", embedder=HashEmbedder()) as engine:
            profile = cProfile.Profile(time.process_time)
            cpu = time.process_time()
            profile.enable()
            stored = engine.ingest([str(fresh)]).stored
            profile.disable()
            out[f"{store}_cpu_s"] = round(time.process_time() - cpu, 2)
            out[f"{store}_stored"] = stored
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        cumulative[store] = {f"{f}:{line}({name})": row[3] for (f, line, name), row in stats.items()}
    grew = {
        name: round(seconds - cumulative["empty"].get(name, 0.0), 2) for name, seconds in cumulative["grown"].items()
    }
    out["grew_most_s"] = dict(sorted(grew.items(), key=lambda kv: -kv[1])[:15])
    out["load"] = [round(x, 2) for x in os.getloadavg()]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--encoder", default="onnx-int8", help="or `hash`: the store's own costs (`HashEmbedder`)")
    parser.add_argument("--workdir", type=Path, help="keep the store here (default: a temp folder)")
    parser.add_argument(
        "--out", type=Path, help="default bench/results/million.json, or million-{query,ids,grown,memo}.json"
    )
    parser.add_argument("--query-store", type=Path, help="time the query path on this bench/query.py store instead")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ids-table", type=int, help="time reads by id in a DuckDB table of this many rows instead")
    parser.add_argument("--grown", type=int, help="profile one chunk into an empty store and one of this many")
    parser.add_argument("--chunk", type=int, default=10_000, help="records of the --grown chunk")
    parser.add_argument("--memo-table", type=int, help="read the records' memo of this many records instead")
    args = parser.parse_args(argv)
    modes = {"-ids": args.ids_table, "-query": args.query_store, "-grown": args.grown, "-memo": args.memo_table}
    mode = next((name for name, asked in modes.items() if asked), "")
    args.out = args.out or RESULTS / f"million{mode}.json"
    in_a_folder = {
        "-ids": lambda folder: measure_ids(args.ids_table, folder),
        "-memo": lambda folder: measure_memo(args.memo_table, folder),
        "-grown": lambda folder: measure_grown(args.grown, args.chunk, folder),
    }
    if mode in in_a_folder:
        with tempfile.TemporaryDirectory(prefix=f"bench{mode}-") as tmp:
            measured = {"machine": machine(), "argv": sys.argv[1:], **in_a_folder[mode](Path(tmp))}
        write_json(args.out, measured)
        print(measured)
        return
    if args.query_store:
        timed = {"machine": machine(), "argv": sys.argv[1:], **measure_query(args.query_store, args.queries)}
        write_json(args.out, timed)
        print(timed)
        return

    from fleet import synthetic_logs

    from expengine.models.embedder import get_embedder

    embedder = HashEmbedder() if args.encoder == "hash" else get_embedder(encoder=args.encoder)
    embedder.encode(["warm up the model once"] * 8)
    rss = PeakRss()
    with tempfile.TemporaryDirectory(prefix="bench-million-") as tmp:
        workdir = args.workdir or Path(tmp)
        files = synthetic_logs(workdir / "logs", args.records, files=args.chunks)
        report: dict[str, Any] = {"machine": machine(), "argv": sys.argv[1:], "encoder": args.encoder}
        rows = ingest_chunks(workdir / "store", files, embedder, rss, report, args.out)
    report |= {"load_end": [round(x, 2) for x in os.getloadavg()], "chunks": rows, "summary": summary(rows)}
    write_json(args.out, report)
    print(
        table(
            ["chunk", "store records", "records/s", "CPU s / 1k", "peak RSS MB", "load"],
            [
                [
                    r["chunk"],
                    f"{r['store_records']:,}",
                    r["records_per_s"],
                    r["cpu_s_per_1k"],
                    r["peak_rss_mb"],
                    r["load"],
                ]
                for r in rows
            ],
        )
    )
    print(report["summary"])


if __name__ == "__main__":
    main()
