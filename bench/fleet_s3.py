"""A store's LanceDB on S3 (moto's server on 127.0.0.1) against the same store with its local `lance/`
folder: ingest, a warm query, compaction, a snapshot and its restore (which rebuilds an index on S3
from the restored DuckDB, where a local one is hard-linked back), and the bytes on each side.

    nice -n 10 python bench/fleet_s3.py --docs docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, RESULTS, english_logs, finish_args, load_embedder, machine, publish, table

sys.path.insert(0, str(REPO / "tests"))  # fleet_helpers.moto_server: the tests' S3 server
QUERIES = ("book a flight", "refund for a cancelled order", "what went wrong with the payment", "weather tomorrow")


def timed(run: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    value = run()
    return value, round(time.perf_counter() - started, 2)


def one_store(store: Path, files: list[str], embedder: Any) -> dict[str, Any]:
    from expengine import Engine

    with Engine(store=store, embedder=embedder) as engine:
        ingested, ingest_s = timed(lambda: engine.ingest(files))
        engine.query(QUERIES[0], touch=False)  # tables opened, vectors cached
        seconds = []
        for _ in range(3):
            for text in QUERIES:
                _, took = timed(lambda: engine.query(text, touch=False))
                seconds.append(took)
        _, compact_s = timed(lambda: engine.compact(refine=False))
        snapshot, snapshot_s = timed(lambda: engine.snapshot())
        _, restore_s = timed(lambda: engine.restore(snapshot.id))
        stats = engine.stats()
    return {
        "records": ingested.read,
        "ingest_s": ingest_s,
        "query_median_ms": round(1000 * statistics.median(seconds), 1),
        "compact_s": compact_s,
        "snapshot_s": snapshot_s,
        "snapshot_bytes": snapshot.size_bytes,
        "restore_s": restore_s,
        "indexed": stats.indexed_memories + stats.indexed_units,
        "local_bytes": stats.size_bytes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "fleet_s3.json")
    parser.add_argument("--docs", type=Path, help="rewrite the fleet_s3 section of this Markdown file")
    parser.add_argument("--quiet", action="store_true")
    args = finish_args(parser, argv, script="fleet_s3.py")
    from fleet_helpers import moto_server

    embedder = load_embedder()
    files = [str(p) for p in english_logs(REPO / "sample_logs")]
    with tempfile.TemporaryDirectory(prefix="expengine-fleet-s3-") as tmp:
        base = Path(tmp)
        with moto_server(base / "moto.log", bucket="bench") as s3:
            local = one_store(base / "local", files, embedder)
            (base / "remote").mkdir()
            (base / "remote" / "config.toml").write_text('[index]\nuri = "s3://bench/index/remote"\n')
            remote = one_store(base / "remote", files, embedder)
            listed = s3.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix="index/")
            remote["s3_bytes"] = sum(o["Size"] for page in listed for o in page.get("Contents", []))
    report = {"machine": machine(), "command": args.command, "local": local, "s3": remote}
    rows = [
        [key, local[key], remote[key]]
        for key in ("records", "ingest_s", "query_median_ms", "compact_s", "snapshot_s", "snapshot_bytes", "restore_s")
    ]
    rows.append(["index bytes on S3", "", remote["s3_bytes"]])
    text = "\n".join(
        [
            "## LanceDB on S3 (bench/fleet_s3.py)",
            "",
            f"`{args.command}` on {report['machine']}: one store of the English sample logs with its index in "
            '`lance/` and one with `[index] uri = "s3://..."` on moto\'s S3 server (127.0.0.1). A snapshot of the '
            "second holds DuckDB only; its restore rebuilds the index from DuckDB (vectors from the embedding cache).",
            "",
            table(["measure", "local lance/", "index on S3"], rows),
        ]
    )
    publish(report, args, section="fleet_s3", text=text, echo=not args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
