"""The fleet on this machine: backfill with `fleet ingest` against plain `ingest`, compaction of N
stores with `fleet compact` (2 Ray workers) against the serial loop, and the tenancy check of
`serve --root`. Ray is local (2 CPUs); the machine is shared, so the speed-ups are lower bounds.

    nice -n 10 python bench/fleet.py --stores 12 --docs docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, RESULTS, SHARED_DATA, english_logs, finish_args, load_embedder, machine, publish, table

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
    plain `ingest` into one store, then `fleet ingest --by agent`."""
    from expengine import Engine
    from expengine.fleet.ingest import ingest_fleet

    files = [str(p) for p in english_logs(SAMPLE_LOGS)]
    if synthetic:
        files += [str(p) for p in synthetic_logs(tmp / "synthetic", synthetic)]
        if TAU_RUNS.exists():
            files.append(str(TAU_RUNS))
    started = time.perf_counter()
    with Engine(store=tmp / "plain", embedder=embedder) as engine:
        plain = engine.ingest(files)
    plain_s = time.perf_counter() - started
    fleet = ingest_fleet(files, root=tmp / "by-agent", by="agent", max_parallel=2)
    return {
        "records": plain.read,
        "plain": {"seconds": round(plain_s, 2), "records_per_s": round(plain.read / plain_s, 1)},
        "fleet": {"seconds": fleet.seconds, "records_per_s": fleet.records_per_s, "stores": len(fleet.stores)},
        "ratio": round(fleet.records_per_s / (plain.read / plain_s), 3),
    }


def compaction(tmp: Path, stores: int, embedder: Any) -> dict[str, Any]:
    from expengine import Engine
    from expengine.fleet.compact import compact_fleet
    from expengine.fleet.ingest import ingest_fleet

    made = ingest_fleet([str(p) for p in store_logs(tmp / "sessions", stores)], root=tmp / "serial", by="agent")
    shutil.copytree(tmp / "serial", tmp / "fleet", symlinks=True)
    started = time.perf_counter()
    for row in made.stores:
        with Engine(store=tmp / "serial" / row.store, embedder=embedder) as engine:
            engine.compact(refine=False)
    serial_s = time.perf_counter() - started
    fleet = compact_fleet(tmp / "fleet", max_parallel=2, refine=False)
    hot = [r.hot_share_after for r in fleet.stores if r.hot_share_after is not None]
    return {
        "stores": len(made.stores),
        "records": made.read,
        "serial_s": round(serial_s, 2),
        "fleet_s": fleet.seconds,
        "speedup": round(serial_s / fleet.seconds, 2),
        "failed": fleet.failed,
        "per_store_s": round(serial_s / max(len(made.stores), 1), 3),
        "mean_hot_share_after": round(sum(hot) / len(hot), 4) if hot else None,
        "root": tmp / "fleet",
    }


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", type=int, default=12, help="stores to compact (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=RESULTS / "fleet.json")
    parser.add_argument("--docs", type=Path, help="rewrite the fleet section of this Markdown file")
    parser.add_argument(
        "--synthetic", type=int, default=0, help="backfill this many synthetic records more, and the tau-bench runs"
    )
    parser.add_argument("--quiet", action="store_true")
    args = finish_args(parser, argv, script="fleet.py")
    import ray

    embedder = load_embedder()
    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray_start = time.perf_counter() - started
    try:
        with tempfile.TemporaryDirectory(prefix="expengine-fleet-bench-") as tmp:
            filled = backfill(Path(tmp), embedder, synthetic=args.synthetic)
            compacted = compaction(Path(tmp), args.stores, embedder)
            tenants = tenancy(compacted.pop("root"))
    finally:
        ray.shutdown()
    report = {
        "machine": machine(),
        "command": args.command,
        "ray_start_s": round(ray_start, 2),
        "backfill": filled,
        "compaction": compacted,
        "tenancy": tenants,
    }
    text = "\n".join(
        [
            "## Fleet (bench/fleet.py)",
            "",
            f"`{args.command}` on {report['machine']}, local Ray with 2 CPUs (started in {ray_start:.1f} s, "
            "not counted below). The 2 cores are shared with other work, so the parallel figures are lower bounds.",
            "",
            table(
                ["measure", "plain / serial", "fleet (2 workers)", "ratio"],
                [
                    [
                        f"backfill, {filled['records']} records (records/s)",
                        filled["plain"]["records_per_s"],
                        filled["fleet"]["records_per_s"],
                        filled["ratio"],
                    ],
                    [
                        f"compaction of {compacted['stores']} stores (s)",
                        compacted["serial_s"],
                        compacted["fleet_s"],
                        compacted["speedup"],
                    ],
                ],
            ),
            "",
            f"Tenancy: {tenants['tenants']} tenants, own reads answered {tenants['own_ok']}/{tenants['tenants']}, "
            f"cross-tenant reads refused with 403 {tenants['cross_403']}/{tenants['cross_requests']}.",
        ]
    )
    publish(report, args, section="fleet", text=text, echo=not args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
