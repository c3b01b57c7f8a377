"""What a nightly snapshot costs as the store grows: N nights of new records, a snapshot each.

    python bench/snapshots.py [--nights 10] [--per-night 2000] [--logs DIR] [--out bench/results/snapshots.json]

The store starts from the real records of `--logs` (`sample_logs/` by default, ingested once). Each night
adds `--per-night` records copied from those real ones with fresh ids (no embedding: the snapshot copies
DuckDB only), changes every active record's weight the way decay does (one SQL update: the nightly change
that touches every row), then takes a snapshot; its seconds, the bytes it wrote and the bytes it lists are
printed. On the first and last night the older format's cost (the whole database copied and
xz-compressed, what every snapshot cost before) is measured on the same store for comparison.
Target: the last night's snapshot costs about what the first nights' do (it follows the night's new data,
not the store's size), while the older format's grows with the store.
"""

from __future__ import annotations

import argparse
import lzma
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, TEMPLATE_ONLY, english_logs, machine, table, write_json  # noqa: E402

NEW_ROWS = """
    INSERT INTO records BY NAME
    SELECT * EXCLUDE (n) REPLACE (id || '-n' || $night || '-' || n AS id, content_hash || '-' || $night || n AS content_hash)
    FROM (
        SELECT row_number() OVER () AS n, r.*
        FROM (SELECT * FROM records WHERE NOT contains(id, '-n')) r,
             range(1 + $per_night // (SELECT count(*) FROM records WHERE NOT contains(id, '-n'))) copies(c)
    )
    WHERE n <= $per_night
"""
DECAY = "UPDATE records SET weight = weight * 0.97 WHERE state = 'active'"


def older_format_cost(store: Any, scratch: Path) -> dict[str, float]:
    """Seconds and bytes of the older snapshot: the tables copied into a new file, then xz-compressed."""
    from expengine.store.db import BLOCK_SIZE
    from expengine.store.filters import sql_str

    copy = scratch / "older.duckdb"
    copy.unlink(missing_ok=True)
    started = time.perf_counter()
    (source,) = store.con.execute("SELECT current_database()").fetchone()
    store.con.execute(f"ATTACH {sql_str(str(copy))} AS older (BLOCK_SIZE {BLOCK_SIZE})")
    try:
        store.con.execute(f'COPY FROM DATABASE "{source}" TO older')
        store.con.execute("DELETE FROM older.embeddings")
        store.con.execute("CHECKPOINT older")
    finally:
        store.con.execute("DETACH older")
    packed = lzma.compress(copy.read_bytes(), preset=6)
    seconds = time.perf_counter() - started
    copy.unlink()
    return {"older_s": round(seconds, 3), "older_bytes": len(packed)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from expengine import Engine
    from expengine.lifecycle.snapshot import disk_bytes

    rows = []
    with tempfile.TemporaryDirectory(prefix="snapshots-bench-") as tmp:
        store_dir = Path(tmp) / "store"
        with Engine(store=store_dir, overrides={**TEMPLATE_ONLY, "snapshot.max_share": "0"}) as engine:
            engine.ingest([str(p) for p in english_logs(args.logs)])
            for night in range(1, args.nights + 1):
                with engine.session() as store:
                    store.con.execute(NEW_ROWS, {"night": night, "per_night": args.per_night})
                    store.con.execute(DECAY)
                    (records,) = store.con.execute("SELECT count(*) FROM records").fetchone()
                started = time.perf_counter()
                info = engine.snapshot(reason=f"night {night}")
                row = {
                    "night": night,
                    "records": int(records),
                    "snapshot_s": round(time.perf_counter() - started, 3),
                    "written_bytes": info.written_bytes,
                    "listed_bytes": info.size_bytes,
                    "folder_bytes": disk_bytes([store_dir / "snapshots"]),
                }
                if night in (1, args.nights):
                    with engine.session() as store:
                        row.update(older_format_cost(store, Path(tmp)))
                rows.append(row)
                print(row, flush=True)
    first, last = rows[0], rows[-1]
    return {
        "machine": machine(),
        "nights": args.nights,
        "per_night": args.per_night,
        "logs": str(args.logs),
        "rows": rows,
        "last_over_second_s": round(last["snapshot_s"] / rows[min(1, len(rows) - 1)]["snapshot_s"], 2),
        "store_growth": round(last["records"] / first["records"], 2),
        "older_growth_s": round(last.get("older_s", 0) / first.get("older_s", 1), 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=10)
    parser.add_argument("--per-night", type=int, default=2000)
    parser.add_argument("--logs", type=Path, default=REPO / "sample_logs")
    parser.add_argument("--out", type=Path, default=RESULTS / "snapshots.json")
    args = parser.parse_args(argv)
    report = run(args)
    headers = ["night", "records", "snapshot s", "written", "listed", "older s", "older bytes"]
    cells = [
        [
            r["night"],
            r["records"],
            r["snapshot_s"],
            r["written_bytes"],
            r["listed_bytes"],
            r.get("older_s", ""),
            r.get("older_bytes", ""),
        ]
        for r in report["rows"]
    ]
    print(table(headers, cells))
    print(
        f"store ×{report['store_growth']}: snapshot last/second ×{report['last_over_second_s']}, "
        f"older format last/first ×{report['older_growth_s']}"
    )
    write_json(args.out, report)


if __name__ == "__main__":
    main()
