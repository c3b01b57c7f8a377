"""Do unused units go dormant while used ones stay? Ten cycles of the sample-logs store, no new data.

    python bench/unit_decay.py [--cycles 10] [--every 3] [--out PATH]

`sample_logs/` is ingested and compacted once; then `--cycles` more compactions run one nightly clock
tick apart with no new data, and every `--every` cycles one query ("get_weather returned 429 Too Many
Requests", touch on) uses what it shows. After each cycle: units by status, and the status of the
units that query showed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CYCLE_SPACING, REPO, RESULTS, english_logs, load_embedder, table, write_json  # noqa: E402

QUESTION = "get_weather returned 429 Too Many Requests"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--every", type=int, default=3, help="query every N cycles (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=RESULTS / "unit_decay.json")
    args = parser.parse_args(argv)
    from expengine import Engine
    from expengine.clock import utcnow

    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="unit-decay-") as tmp,
        Engine(store=Path(tmp) / "store", embedder=load_embedder()) as engine,
    ):
        engine.ingest([str(p) for p in english_logs(REPO / "sample_logs")])
        start = utcnow()
        engine.compact(now=start + CYCLE_SPACING)
        used: set[str] = set()
        for n in range(1, args.cycles + 1):
            engine.compact(now=start + CYCLE_SPACING * (n + 1))
            if n % args.every == 0:
                used |= {h.id for h in engine.query(QUESTION, k=5).hits if h.type == "unit"}
            con = engine.store.con
            counts = dict(con.execute("SELECT status, count(*) FROM units GROUP BY status").fetchall())
            used_status = dict(
                con.execute("SELECT id, status FROM units WHERE id IN (SELECT unnest(?))", [sorted(used)]).fetchall()
            )
            rows.append(
                {"cycle": n, **counts, "used": len(used), "used_active": list(used_status.values()).count("active")}
            )
            print(rows[-1], file=sys.stderr)
    write_json(args.out, {"benchmark": "unit_decay", "rows": rows})
    headers = ["cycle", "active", "dormant", "superseded", "quarantined", "units the query used", "of them active"]
    keys = ["cycle", "active", "dormant", "superseded", "quarantined", "used", "used_active"]
    print(table(headers, [[r.get(k, 0) for k in keys] for r in rows]))
    return {"rows": rows}


if __name__ == "__main__":
    main()
