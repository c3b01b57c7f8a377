"""The fleet on this machine: backfill with `fleet ingest` against plain `ingest`, compaction of N
stores with `fleet compact` (2 Ray workers) against the serial loop, and the tenancy check of
`serve --root`. Ray is local (2 CPUs); the machine is shared, so the speed-ups are lower bounds.

    nice -n 10 python bench/fleet.py --stores 40 --synthetic 100000 --docs docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, RESULTS, SHARED_DATA, english_logs, finish_args, load_embedder, machine, publish, table

sys.path.insert(0, str(REPO / "scripts"))  # kill_test: the kill tests' store invariants and worker kill

SAMPLE_LOGS = REPO / "sample_logs"
TAU_RUNS = SHARED_DATA / "tau_bench_airline" / "gpt-4o-airline_tasks00-39.json"


def store_logs(folder: Path, count: int) -> list[Path]:
    """The English sample logs' sessions dealt round-robin to `count` agents (`store-00`, ...): one
    file and one store each, all of similar size."""
    sessions: dict[str, list[dict[str, Any]]] = {}
    for path in english_logs(SAMPLE_LOGS):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                event = json.loads(line)
                sessions.setdefault(event.get("session") or "none", []).append(event)
    folder.mkdir(parents=True)
    out = [folder / f"store-{i:02d}.jsonl" for i in range(count)]
    groups: list[list[str]] = [[] for _ in range(count)]
    for index, name in enumerate(sorted(sessions)):
        groups[index % count] += [json.dumps({**e, "agent": f"store-{index % count:02d}"}) for e in sessions[name]]
    for path, lines in zip(out, groups):
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def tau_parts(folder: Path, count: int) -> list[Path]:
    """The shared tau-bench runs dealt round-robin into `count` openai-chat files (none without the data)."""
    if not TAU_RUNS.exists():
        return []
    runs = json.loads(TAU_RUNS.read_text(encoding="utf-8"))
    folder.mkdir(parents=True)
    out = [folder / f"tau-{i:02d}.json" for i in range(count)]
    for index, path in enumerate(out):
        path.write_text(json.dumps(runs[index::count]), encoding="utf-8")
    return out


def synthetic_logs(folder: Path, n: int, *, agents: int = 20, files: int = 8, seed: int = 0) -> list[Path]:
    """`n` native records of `agents` agents in `files` JSONL files: user asks, tool calls and results
    whose words vary (distinct texts, so nothing is a duplicate and everything is embedded)."""
    import random

    rng = random.Random(seed)
    words = "order refund flight hotel invoice account password shipment delay weather booking seat meal".split()
    tools = ["search_flights", "get_order", "refund_order", "get_weather", "book_hotel", "update_account"]
    folder.mkdir(parents=True)
    out = [folder / f"synthetic-{i}.jsonl" for i in range(files)]
    handles = [path.open("w", encoding="utf-8") for path in out]
    try:
        for i in range(n):
            agent, session = f"agent-{i % agents:02d}", f"s{i // 12}"
            ts = f"2026-0{1 + i % 9}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z"
            said = " ".join(rng.choice(words) for _ in range(8))
            event: dict[str, Any] = {"id": f"syn-{i}", "ts": ts, "agent": agent, "session": session}
            if i % 3 == 0:
                event |= {"kind": "message", "role": "user", "content": f"Please help with {said} number {i}"}
            elif i % 3 == 1:
                event |= {"kind": "tool_call", "tool": {"name": rng.choice(tools), "args": {"query": said, "n": i}}}
            else:
                event |= {"kind": "tool_result", "tool": {"name": rng.choice(tools), "result": f"{said} ok {i}"}}
            handles[i % files].write(json.dumps(event) + "\n")
    finally:
        for handle in handles:
            handle.close()
    return out


def backfill(tmp: Path, embedder: Any, *, synthetic: int = 0) -> dict[str, Any]:
    """Every English sample log (and `synthetic` records more, with the shared tau-bench runs): one
    plain `ingest` into one store, then `fleet ingest --by agent` with each runner (plain Ray tasks,
    and the Ray Data pipeline), each into a new root."""
    from expengine import Engine
    from expengine.fleet.ingest import RUNNERS, ingest_fleet

    files = [str(p) for p in english_logs(SAMPLE_LOGS)]
    if synthetic:
        files += [str(p) for p in synthetic_logs(tmp / "synthetic", synthetic)]
        if TAU_RUNS.exists():
            files.append(str(TAU_RUNS))
    started = time.perf_counter()
    with Engine(store=tmp / "plain", embedder=embedder) as engine:
        plain = engine.ingest(files)
    plain_s = time.perf_counter() - started
    plain_rate = plain.read / plain_s
    report: dict[str, Any] = {
        "records": plain.read,
        "plain": {"seconds": round(plain_s, 2), "records_per_s": round(plain_rate, 1)},
    }
    for runner in RUNNERS:
        fleet = ingest_fleet(files, root=tmp / f"by-agent-{runner}", by="agent", max_parallel=2, runner=runner)
        report[runner] = {
            "seconds": fleet.seconds,
            "records_per_s": fleet.records_per_s,
            "stores": len(fleet.stores),
            "stored": fleet.stored,
            "failed": fleet.failed,
            "ratio": round(fleet.records_per_s / plain_rate, 3),
        }
    return report


def store_ids(root: Path) -> dict[str, set[str]]:
    """Each store's record ids, read from its DuckDB file."""
    import duckdb

    from expengine.fleet import fleet_stores

    ids = {}
    for name, path in fleet_stores(root).items():
        con = duckdb.connect(str(path / "expengine.duckdb"), read_only=True)
        try:
            ids[name] = {r[0] for r in con.execute("SELECT id FROM records").fetchall()}
        finally:
            con.close()
    return ids


def compaction(tmp: Path, stores: int, embedder: Any) -> dict[str, Any]:
    """`stores` stores made from the sample logs and the shared tau-bench runs (a share of each per
    store), compacted one after another in this process and
    then by `fleet compact` with 2 workers (a copy of the same stores). Also returns the logs and
    each store's ids, for the fault runs."""
    from expengine import Engine
    from expengine.fleet.cycles import compact_fleet
    from expengine.fleet.ingest import ingest_fleet

    logs = [str(p) for p in store_logs(tmp / "sessions", stores)]
    made = ingest_fleet(logs, root=tmp / "serial", by="agent")
    for row, part in zip(made.stores, tau_parts(tmp / "tau", len(made.stores))):
        with Engine(store=tmp / "serial" / row.store, embedder=embedder) as engine:
            made.read += engine.ingest([str(part)]).read
    for name in ("cold", "fleet", "faults"):
        shutil.copytree(tmp / "serial", tmp / name, symlinks=True)
    ids = store_ids(tmp / "serial")
    started = time.perf_counter()
    for row in made.stores:
        with Engine(store=tmp / "serial" / row.store, embedder=embedder) as engine:
            engine.compact(refine=False)
    serial_s = time.perf_counter() - started
    cold = compact_fleet(tmp / "cold", max_parallel=2, refine=False)
    warm_workers()  # as the serial loop's process has its model loaded
    fleet = compact_fleet(tmp / "fleet", max_parallel=2, refine=False)
    hot = [r.hot_share_after for r in fleet.stores if r.hot_share_after is not None]
    return {
        "stores": len(made.stores),
        "records": made.read,
        "serial_s": round(serial_s, 2),
        "fleet_s": fleet.seconds,
        "speedup": round(serial_s / fleet.seconds, 2),
        "fleet_cold_s": cold.seconds,
        "cold_speedup": round(serial_s / cold.seconds, 2),
        "failed": fleet.failed,
        "per_store_s": round(serial_s / max(len(made.stores), 1), 3),
        "mean_hot_share_after": round(sum(hot) / len(hot), 4) if hot else None,
        "root": tmp / "fleet",
        "logs": logs,
        "ids": ids,
    }


def warm_workers(count: int = 2) -> None:
    """Start `count` Ray workers and load the embedding model in each (both at once, so each lands on
    its own worker), as a long-running cluster's workers would be: the first fleet command of a
    cold local Ray pays for them, a nightly run over thousands of stores does once."""
    import ray

    from expengine.config import Config
    from expengine.fleet.runtime import cached_embedder

    def load() -> int:
        return int(cached_embedder(Config().embedder).dim)

    ray.get([ray.remote(load).options(num_cpus=1).remote() for _ in range(count)])


def faults(tmp: Path, logs: list[str], ids: dict[str, set[str]], embedder: Any) -> dict[str, Any]:
    """SIGKILL a Ray worker (by the pid it writes at the pause point) in the middle of one store's
    `fleet compact`, then of one store's `fleet ingest` write; Ray retries the task. Then every store
    must be compacted exactly once (the killed one's first run rolled back), hold exactly its records
    once with the kill test's invariants (`check_store`), and a rerun of the backfill store nothing."""
    from kill_test import check_store, kill_paused_worker

    from expengine import Engine
    from expengine.fleet.cycles import compact_fleet
    from expengine.fleet.ingest import ingest_fleet
    from expengine.store.pause import PAUSE_ENV, PAUSE_MARKER

    def paused(root: Path, point: str, victim: str) -> Path:
        for name in ids:  # the hook pauses once per marker: every store but the victim runs straight through
            if name != victim:
                (root / name).mkdir(parents=True, exist_ok=True)
                (root / name / (PAUSE_MARKER + point)).write_text("")
        return root / victim / (PAUSE_MARKER + point)

    def unpause(root: Path, point: str) -> None:
        for name in ids:
            (root / name / (PAUSE_MARKER + point)).unlink(missing_ok=True)

    victim = sorted(ids)[len(ids) // 2]
    root = tmp / "faults"
    marker = paused(root, "decay", victim)
    started = time.perf_counter()
    killed, compacted = kill_paused_worker(
        lambda: compact_fleet(root, max_parallel=2, refine=False, worker_env={PAUSE_ENV: "decay"}), marker
    )
    compact_s = time.perf_counter() - started
    unpause(root, "decay")
    problems = {n: p for n in ids if (p := check_store(root / n, ids[n], embedder))}
    once = 0
    for name in ids:
        with Engine(store=root / name, embedder=embedder) as engine:
            statuses = [r["status"] for r in engine.history()]
        once += statuses == (["rolled_back", "completed"] if name == victim else ["completed"])
    compact_report = {
        "stores": len(ids),
        "killed_pid": killed,
        "victim": victim,
        "failed": compacted.failed,
        "compacted_once": once,
        "invariant_problems": problems,
        "seconds": round(compact_s, 2),
    }

    root = tmp / "faults-ingest"
    marker = paused(root, "ingest-batch", victim)
    started = time.perf_counter()
    killed, filled = kill_paused_worker(
        lambda: ingest_fleet(logs, root=root, by="agent", worker_env={PAUSE_ENV: "ingest-batch"}), marker
    )
    ingest_s = time.perf_counter() - started
    unpause(root, "ingest-batch")
    again = ingest_fleet(logs, root=root, by="agent")
    problems = {n: p for n in ids if (p := check_store(root / n, ids[n], embedder))}
    ingest_report = {
        "stores": len(ids),
        "killed_pid": killed,
        "victim": victim,
        "failed": filled.failed,
        "stored": filled.stored,
        "rerun_stored": again.stored,
        "rerun_duplicates": again.duplicates,
        "expected": sum(map(len, ids.values())),
        "invariant_problems": problems,
        "seconds": round(ingest_s, 2),
    }
    return {"compact": compact_report, "ingest": ingest_report}


def tenancy(root: Path) -> dict[str, Any]:
    """Three tenants: each reads its own store (hits of its own only); every cross read is 403."""
    from starlette.testclient import TestClient

    from expengine.fleet import fleet_stores
    from expengine.fleet.tenants import Tenants, build_app
    from expengine.service.client import TOKEN_FILE

    names = list(fleet_stores(root))[:3]
    tenants = Tenants(root, max_open=2)
    tenants.load_tokens()
    tokens = {n: (root / n / TOKEN_FILE).read_text().strip() for n in names}
    own = cross_403 = 0
    with TestClient(build_app(tenants)) as client:
        for name in names:
            for store in names:
                answer = client.post(
                    f"/v1/{store}/query",
                    json={"text": "what went wrong", "k": 10},
                    headers={"Authorization": f"Bearer {tokens[name]}"},
                )
                if store != name:
                    cross_403 += answer.status_code == 403
                    continue
                own += answer.status_code == 200
    pairs = len(names) * (len(names) - 1)
    return {"tenants": len(names), "own_ok": own, "cross_requests": pairs, "cross_403": cross_403}


def fault_text(broken: dict[str, Any]) -> str:
    c, i = broken["compact"], broken["ingest"]
    return (
        f"Faults: a Ray worker SIGKILLed (by pid) in the middle of compacting `{c['victim']}`: "
        f"{c['compacted_once']}/{c['stores']} stores compacted exactly once (the killed run rolled back, "
        f"then completed), {c['failed']} failed, stores with broken invariants: {len(c['invariant_problems'])}. "
        f"Killed while writing `{i['victim']}` in `fleet ingest` (tasks runner): {i['failed']} failed; "
        f"the rerun stored {i['rerun_stored']} and found {i['rerun_duplicates']}/{i['expected']} already there; "
        f"stores with missing, extra or duplicated records or broken invariants: {len(i['invariant_problems'])}."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", type=int, default=40, help="stores to compact (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=RESULTS / "fleet.json")
    parser.add_argument("--docs", type=Path, help="rewrite the fleet section of this Markdown file")
    parser.add_argument(
        "--synthetic", type=int, default=0, help="backfill this many synthetic records more, and the tau-bench runs"
    )
    parser.add_argument("--only", choices=["compaction"], help="run this part alone and print it")
    parser.add_argument("--quiet", action="store_true")
    args = finish_args(parser, argv, script="fleet.py")
    import ray

    embedder = load_embedder()
    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray_start = time.perf_counter() - started
    load_before = os.getloadavg()[1]
    try:
        with tempfile.TemporaryDirectory(prefix="expengine-fleet-bench-") as tmp:
            if args.only == "compaction":  # a quick rerun of one part: printed, nothing published
                compacted = compaction(Path(tmp), args.stores, embedder)
                print(json.dumps({k: v for k, v in compacted.items() if k not in ("root", "logs", "ids")}, indent=1))
                return 0
            filled = backfill(Path(tmp), embedder, synthetic=args.synthetic)
            compacted = compaction(Path(tmp), args.stores, embedder)
            tenants = tenancy(compacted.pop("root"))
            broken = faults(Path(tmp), compacted.pop("logs"), compacted.pop("ids"), embedder)
    finally:
        ray.shutdown()
    load = [round(load_before, 1), round(os.getloadavg()[1], 1)]
    report = {
        "machine": machine(),
        "load_5min": load,
        "command": args.command,
        "ray_start_s": round(ray_start, 2),
        "backfill": filled,
        "compaction": compacted,
        "tenancy": tenants,
        "faults": broken,
    }
    text = "\n".join(
        [
            "## Fleet (bench/fleet.py)",
            "",
            f"`{args.command}` on {report['machine']}, local Ray with 2 CPUs (started in {ray_start:.1f} s, "
            f"not counted below). The 2 cores are shared with other work (5-minute load {load[0]} at the start, "
            f"{load[1]} at the end), so the parallel figures are lower bounds.",
            "",
            table(
                ["measure", "plain / serial", "fleet, tasks", "fleet, Ray Data", "ratio (tasks / data)"],
                [
                    [
                        f"backfill, {filled['records']} records (records/s)",
                        filled["plain"]["records_per_s"],
                        filled["tasks"]["records_per_s"],
                        filled["data"]["records_per_s"],
                        f"{filled['tasks']['ratio']} / {filled['data']['ratio']}",
                    ],
                    [
                        f"compaction of {compacted['stores']} stores (s), workers warm",
                        compacted["serial_s"],
                        compacted["fleet_s"],
                        "",
                        compacted["speedup"],
                    ],
                    [
                        f"compaction of {compacted['stores']} stores (s), workers cold",
                        compacted["serial_s"],
                        compacted["fleet_cold_s"],
                        "",
                        compacted["cold_speedup"],
                    ],
                ],
            ),
            "",
            f"Tenancy: {tenants['tenants']} tenants, own reads answered {tenants['own_ok']}/{tenants['tenants']}, "
            f"cross-tenant reads refused with 403 {tenants['cross_403']}/{tenants['cross_requests']}.",
            "",
            fault_text(broken),
        ]
    )
    publish(report, args, section="fleet", text=text, echo=not args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
