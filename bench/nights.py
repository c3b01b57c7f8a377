"""A year of nights, shortened: does the nightly cycle cost what the night's data costs?

    python bench/nights.py [--nights 10] [--swe-runs 10] [--tau-runs 10] [--log-lines 300]
                           [--from-store PATH] [--full-every 0] [--out bench/results/nights.json]
                           [--keep PATH] [--first-night N] [--profile PATH] [--set KEY=VALUE ...]
                           [--encoder hash]

Every night ingests the same amount of new real data through the Python API, with fresh ids: the next
`--swe-runs` shared SWE-bench runs (their sb-cli grades as outcomes), the next `--tau-runs` tau-bench
airline runs (a new `trial` per pass, so new sessions) and the next `--log-lines` lines of the English
`sample_logs/` (ids, sessions and goals suffixed with the pass), each source in rotation. Then one
`compact` (templates, no LLM), the clock one night on. Printed per night: records in the store, new,
ingest seconds, the cycle's seconds and each step's, the cycle's CPU seconds and each step's (this
process's, threads included: what a loaded shared machine's wall clock blurs), the records the sweep
re-checked, how clustering ran, the DuckDB file's size after the cycle, the process's peak RSS and the
cycle's own (sampled every 20 ms while it ran).

`--from-store PATH` starts from a copy of an existing store (the synthetic variant: a bulk store of
synthetic memories, e.g. from bench/scale.py), so the nights add real data to a large store.
`--encoder hash` replaces the model by a hash of each text (bench/million.py's `HashEmbedder`), as a store
that bench/million.py built with `--encoder hash` needs: what the store's steps cost, not the model's.
`--full-every N` runs `compact --full` every N-th night instead (0: never), the baseline to compare.
`--set KEY=VALUE` overrides a config value for every night (e.g. `--set cycle.sweep_rows=400`).
`--first-night N` numbers the nights from N, with the data and clock the nights before it left off at:
with `--from-store` a store `--keep` kept after night N-1 runs its next night (to profile one late night:
`--first-night 13 --nights 1 --from-store KEPT --profile night13.prof`, cProfile of each `compact`).

Target (issue #38): the last night's cycle at most 1.3x the second night's, with the store many times
larger. Seconds are the machine's under its load (printed); the ratio is the figure.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, RESULTS, SHARED_DATA, TEMPLATE_ONLY, english_logs, machine, table, write_json  # noqa: E402

SWE = SHARED_DATA / "swe_bench_verified_mini"
TAU = SHARED_DATA / "tau_bench_airline" / "gpt-4o-airline_tasks00-39.json"
START = dt.datetime(2027, 1, 1)
NIGHT = dt.timedelta(hours=25)
ID_FIELDS = ("id", "session", "goal_id", "target", "feedback_target")


class Rotation:
    """The next `count` items of a list, wrapping round; `pass_` says how many times it wrapped."""

    def __init__(self, items: list[Any]) -> None:
        self.items, self.position = items, 0

    def take(self, count: int) -> list[tuple[int, Any]]:
        out = []
        for _ in range(count):
            out.append((self.position // len(self.items), self.items[self.position % len(self.items)]))
            self.position += 1
        return out


def _fresh(value: Any, suffix: str) -> Any:
    return f"{value}{suffix}" if isinstance(value, str) else value


def write_night(
    folder: Path, night: int, swe: Rotation, tau: Rotation, logs: Rotation, grades: dict[str, str], args
) -> dict[str, Any]:
    """The night's files under `folder`, each with ids no earlier night used."""
    parts: dict[str, Any] = {}
    runs = folder / "swe"
    graded = folder / "swe-grades.jsonl"
    lines = []
    for pass_, path in swe.take(args.swe_runs):
        session = f"{path.parent.name}-n{night}p{pass_}"
        (runs / session).mkdir(parents=True)
        (runs / session / path.name).write_bytes(path.read_bytes())
        lines.append(json.dumps({"session": session, "outcome": grades.get(path.parent.name, "failure")}))
    if lines:
        graded.write_text("\n".join(lines) + "\n", encoding="utf-8")
        parts["swe"] = (runs, graded)
    tau_runs = []
    for pass_, run in tau.take(args.tau_runs):
        tau_runs.append({**run, "trial": int(run.get("trial", 0)) + 1000 * (pass_ + 1) + night})
    if tau_runs:
        parts["tau"] = folder / "tau.json"
        parts["tau"].write_text(json.dumps(tau_runs), encoding="utf-8")
    log_lines = []
    for pass_, line in logs.take(args.log_lines):
        event = json.loads(line)
        suffix = f"-n{night}p{pass_}"
        for key in ID_FIELDS:
            event[key] = _fresh(event.get(key), suffix) if key in event else None
        event = {k: v for k, v in event.items() if v is not None or k not in ID_FIELDS}
        if isinstance(event.get("goal"), dict):
            event["goal"] = {**event["goal"], "id": _fresh(event["goal"].get("id"), suffix)}
        log_lines.append(json.dumps(event))
    if log_lines:
        parts["logs"] = folder / "logs.jsonl"
        parts["logs"].write_text("\n".join(log_lines) + "\n", encoding="utf-8")
    return parts


def ingest_night(engine: Any, parts: dict[str, Any]) -> int:
    stored = 0
    if "swe" in parts:
        runs, graded = parts["swe"]
        stored += engine.ingest([str(runs)], fmt="swe-agent", outcomes=[str(graded)]).stored
    if "tau" in parts:
        stored += engine.ingest([str(parts["tau"])], fmt="openai-chat").stored
    if "logs" in parts:
        stored += engine.ingest([str(parts["logs"])]).stored
    return stored


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=10)
    parser.add_argument("--swe-runs", type=int, default=10, help="SWE-bench runs a night")
    parser.add_argument("--tau-runs", type=int, default=10, help="tau-bench runs a night")
    parser.add_argument("--log-lines", type=int, default=300, help="sample_logs lines a night")
    parser.add_argument("--from-store", type=Path, help="start from a copy of this store (synthetic variant)")
    parser.add_argument("--full-every", type=int, default=0, help="compact --full every N-th night (0: never)")
    parser.add_argument("--out", type=Path, default=RESULTS / "nights.json")
    parser.add_argument("--keep", type=Path, help="copy the last night's store here (to profile a cycle on it)")
    parser.add_argument("--first-night", type=int, default=1, help="number the nights from N (after a kept store)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--profile", type=Path, help="cProfile each night's compact into this file (the last kept)")
    parser.add_argument("--encoder", choices=("model", "hash"), default="model", help="hash: the store's costs only")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from million import HashEmbedder
    from scale import PeakRss

    from expengine import Engine

    report = grades = None
    embedder = HashEmbedder() if args.encoder == "hash" else None
    rss = PeakRss()
    if not SWE.is_dir() or not TAU.is_file():
        raise SystemExit(f"nights needs the shared data under {SHARED_DATA}")
    data = json.loads((SWE / "sb-cli-report.json").read_text(encoding="utf-8"))
    grades = {i: "success" for i in data.get("resolved_ids", [])}
    grades.update({i: "failure" for i in data.get("unresolved_ids", []) if i not in grades})
    swe = Rotation(sorted(SWE.glob("trajs/*/*.traj.json")))
    tau = Rotation(json.loads(TAU.read_text(encoding="utf-8")))
    logs = Rotation(
        [
            line
            for p in english_logs(REPO / "sample_logs")
            for line in p.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
    )
    report = {
        "machine": machine(),
        "load_at_start": os.getloadavg()[0],
        "per_night": {"swe_runs": args.swe_runs, "tau_runs": args.tau_runs, "log_lines": args.log_lines},
        "from_store": str(args.from_store) if args.from_store else None,
        "overrides": args.overrides,
        "encoder": args.encoder,
        "nights": [],
    }
    overrides: dict[str, Any] = dict(TEMPLATE_ONLY)
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set needs KEY=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    with tempfile.TemporaryDirectory(prefix="bench-nights-") as tmp:
        store = Path(tmp) / "store"
        if args.from_store:
            shutil.copytree(args.from_store, store)
        before = args.first_night - 1  # the data the nights before --first-night took
        swe.position, tau.position, logs.position = (
            before * args.swe_runs,
            before * args.tau_runs,
            before * args.log_lines,
        )
        for night in range(args.first_night, args.first_night + args.nights):
            folder = Path(tmp) / f"night{night}"
            parts = write_night(folder, night, swe, tau, logs, grades, args)
            full = bool(args.full_every) and night % args.full_every == 0
            with Engine(store=store, overrides=overrides, embedder=embedder) as engine:
                started = time.perf_counter()
                new = ingest_night(engine, parts)
                ingest_s = time.perf_counter() - started
                profiler = cProfile.Profile(time.process_time) if args.profile else None  # CPU seconds, as reported
                cpu = time.process_time()
                rss.peak = rss.rss()
                if profiler:
                    profiler.enable()
                cycle = engine.compact(now=START + NIGHT * night, full=full)
                cycle_cpu = time.process_time() - cpu
                cycle_peak = rss.peak
                if profiler:
                    profiler.disable()
                    profiler.dump_stats(args.profile)
                raw = cycle.after.raw if cycle.after else None
            shutil.rmtree(folder)
            row = {
                "night": night,
                "records": raw,
                "new": new,
                "ingest_s": round(ingest_s, 2),
                "cycle_s": cycle.seconds,
                "cycle_cpu_s": round(cycle_cpu, 2),
                "steps_s": {name: step.get("seconds") for name, step in cycle.steps.items()},
                "steps_cpu_s": {name: step.get("cpu_s") for name, step in cycle.steps.items()},
                "swept": cycle.swept,
                "clustering": cycle.clustering,
                "clusters": {
                    key: cycle.steps.get(step, {}).get(key)
                    for step, key in (
                        ("clusters", "partitions_incremental"),
                        ("clusters", "clusters_replanned"),
                        ("refine", "clusters_total"),
                        ("refine", "clusters_unchanged"),
                        ("refine", "clusters_refined"),
                    )
                }
                | {"clusters_left": len(cycle.steps.get("refine", {}).get("clusters_left") or [])},
                "units": cycle.after.units if cycle.after else None,
                "active": cycle.after.active if cycle.after else None,
                "peak_rss_mib": peak_rss_mib(),
                "cycle_peak_rss_mib": round(cycle_peak / 2**20, 1),
                "db_mib": round((store / "expengine.duckdb").stat().st_size / 2**20, 2),
                "load": round(os.getloadavg()[0], 1),
            }
            report["nights"].append(row)
            print(json.dumps(row), flush=True)
            write_json(args.out, summarise(report))  # each night: a run cut short keeps the nights it ran
        if args.keep:
            shutil.copytree(store, args.keep, dirs_exist_ok=True)
    return report


def summarise(report: dict[str, Any]) -> dict[str, Any]:
    """The last night's cycle against the second's, and the store's growth between them."""
    nights = report["nights"]
    if len(nights) >= 2:
        second, last = nights[1], nights[-1]
        report["last_over_second"] = round(last["cycle_s"] / max(second["cycle_s"], 1e-9), 2)
        report["store_growth"] = round(last["records"] / max(second["records"], 1), 2)
        if "cycle_cpu_s" in second:
            report["last_over_second_cpu"] = round(last["cycle_cpu_s"] / max(second["cycle_cpu_s"], 1e-9), 2)
        if "steps_cpu_s" in second:
            report["step_cpu_last_over_second"] = {
                step: round((cpu or 0) / max(second["steps_cpu_s"].get(step) or 0, 1e-3), 2)
                for step, cpu in last["steps_cpu_s"].items()
            }
    return report


def render(report: dict[str, Any]) -> str:
    steps = sorted(
        {s for n in report["nights"] for s in n["steps_s"]},
        key=lambda s: list(report["nights"][-1]["steps_s"]).index(s) if s in report["nights"][-1]["steps_s"] else 99,
    )
    rows = [
        [
            n["night"],
            n["records"],
            n["new"],
            n["ingest_s"],
            n["cycle_s"],
            n.get("cycle_cpu_s"),
            *(n["steps_s"].get(s) for s in steps),
            n["peak_rss_mib"],
            n.get("cycle_peak_rss_mib"),
            n["load"],
            n["clustering"][:40],
        ]
        for n in report["nights"]
    ]
    text = table(
        [
            "night",
            "records",
            "new",
            "ingest s",
            "cycle s",
            "cycle CPU s",
            *(f"{s} s" for s in steps),
            "peak MiB",
            "cycle peak MiB",
            "load",
            "clustering",
        ],
        rows,
    )
    if any("steps_cpu_s" in n for n in report["nights"]):
        text += "\n\nCPU seconds per step (this process's, threads included)\n" + table(
            ["night", "swept", "cycle CPU s", *steps],
            [
                [n["night"], n.get("swept"), n.get("cycle_cpu_s"), *(n.get("steps_cpu_s", {}).get(s) for s in steps)]
                for n in report["nights"]
            ],
        )
    if "last_over_second" in report:
        text += (
            f"\nlast night's cycle / second night's: {report['last_over_second']}x "
            f"(target ≤ 1.3x) with the store {report['store_growth']}x larger"
        )
    if "last_over_second_cpu" in report:
        text += f"; in CPU seconds (robust to the machine's load): {report['last_over_second_cpu']}x"
    return text


def main(argv: list[str] | None = None) -> None:
    print(render(run(parse_args(argv))))


if __name__ == "__main__":
    main()
