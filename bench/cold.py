"""Where a cold `expengine query` (a new process, no server) spends its time.

    python bench/cold.py --store STORE [--runs 5] [--text "get_weather returned 429 Too Many Requests"]

Runs `python -m expengine --store STORE --direct query TEXT --no-touch --json` `--runs` times and prints
the median and best user+system CPU seconds (the floor of the wall time on an idle machine: imports are
single-threaded) and wall seconds, with the load average; then one run under `-X importtime`, its import
time split into what `import lancedb` brings (lancedb, pyarrow.dataset, pandas, lance_namespace,
pydantic, ...) and the rest, top packages first.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import timed_process  # noqa: E402

_IMPORT = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def cold_command(store: str, text: str) -> list[str]:
    return [sys.executable, "-m", "expengine", "--store", store, "--direct", "query", text, "--no-touch", "--json"]


def self_times(stderr: str) -> dict[str, float]:
    """module -> its own import seconds, from `-X importtime` output."""
    return {m[4]: int(m[1]) / 1e6 for m in map(_IMPORT.match, stderr.splitlines()) if m}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True)
    parser.add_argument("--text", default="get_weather returned 429 Too Many Requests")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    command = cold_command(args.store, args.text)
    runs = [timed_process(command) for _ in range(args.runs)]
    cpu, wall = [r["cpu_s"] for r in runs], [r["wall_s"] for r in runs]
    query = self_times(
        subprocess.run(command[:1] + ["-X", "importtime"] + command[1:], capture_output=True, text=True).stderr
    )
    probe = "import expengine.store.lance_import as l; l.import_lancedb()"
    lancedb = self_times(
        subprocess.run([sys.executable, "-X", "importtime", "-c", probe], capture_output=True, text=True).stderr
    )
    rest: dict[str, float] = collections.defaultdict(float)
    for module, seconds in query.items():
        if module not in lancedb:
            rest[module.split(".")[0]] += seconds
    print(
        json.dumps(
            {
                "runs": args.runs,
                "cpu_s": {"median": round(statistics.median(cpu), 3), "min": round(min(cpu), 3)},
                "wall_s": {"median": round(statistics.median(wall), 3), "min": round(min(wall), 3)},
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "importtime_s": {
                    "all": round(sum(query.values()), 3),
                    "what_import_lancedb_brings": round(sum(s for m, s in query.items() if m in lancedb), 3),
                    "the_rest": round(sum(rest.values()), 3),
                    "the_rest_by_package": {k: round(v, 3) for k, v in sorted(rest.items(), key=lambda kv: -kv[1])[:8]},
                },
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
