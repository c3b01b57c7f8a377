"""SWE-bench coding-agent benchmark: does the memory of yesterday's runs tell today's run what it needs?

    python bench/swe.py [--data DIR] [--train 150] [--runs N] [--seed 7] [--cycles 3]
                        [--hold-back N [--ask-held-back]] [--short-names]
                        [--threads 1] [--set KEY=VALUE] [--out PATH] [--docs MD]
                        [--save-ingested DIR | --ingested DIR]

The shared mini-swe-agent runs (`trajs/<id>/<id>.traj.json`, graded by `sb-cli-report.json`) are
split by instance, seeded: `--train` runs are ingested (`--format swe-agent` with `--outcomes`)
into a fresh store and compacted `--cycles` times; the others are never ingested and only asked.
`--hold-back N` sets N runs aside first (their own seeded shuffle, `--hold-back-seed`), so that
development never sees them: the split above is made of the others, and `--ask-held-back` asks the
N set aside instead of the split's held-out runs (the same training runs, so one `--save-ingested`
store serves both). `--short-names` asks every query a second time, naming the project by its short
name (`[django] …` beside `[django/django] …`), after the same compaction.
Reported:
- first-step knowledge: for every held-out django or sympy task, the query `[repo] <task title>`
  (k = 10, 500-token budget); the share of prompts that name the repository's test runner
  (`runtests.py`, `bin/test`);
- error recovery: at every failed command of a resolved held-out run, the query `[repo] <last 300
  characters of the error>`; the share of prompts naming the program the agent ran next, minus the
  mean share naming each other program (the lift, as in bench/tau.py);
- both beside BM25 over the raw training records, rendered and cut the same way;
- hot text (what a query can return) against the raw text, after the cycles;
- a unit audit: 20 random active units, and how many are tool restatements or chatter;
- ingest and compaction time.

`--save-ingested DIR` keeps a copy of the store as ingest left it; `--ingested DIR` starts from such a
copy instead of ingesting again (for iterating on compaction and queries: no ingest time is
measured then). The copy must hold exactly this split's training runs, so no held-out run leaks in.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    CHATTER,
    SHARED_DATA,
    Stopwatch,
    add_cycle_options,
    after_cycles,
    audit_units,
    bm25_answers,
    disk_sizes,
    engine_overrides,
    finish_args,
    lift,
    load_embedder,
    machine,
    newest_record,
    publish,
    run_cycles,
    store_size,
    table,
    torch_threads,
)

DEFAULT_DATA = SHARED_DATA / "swe_bench_verified_mini"
# what a prompt must name to tell a task in that repository how its tests run
TEST_RUNNERS = {"django/django": "runtests.py", "sympy/sympy": "bin/test"}
FIRST_STEP = {"k": 10, "budget": 500}
# "To grep (grep): first ls(…), then call grep(command=…)": what the tool schema already says
RESTATEMENT = re.compile(r"^To [\w ./-]+ \([\w./-]+\): (first .*then )?call [\w./-]+\(command=")


def load_runs(data: Path) -> tuple[list[Path], dict[str, str]]:
    """The trajectory files, and each instance's grade from the report."""
    report = json.loads((data / "sb-cli-report.json").read_text(encoding="utf-8"))
    grades = {i: "success" for i in report.get("resolved_ids", [])}
    grades.update({i: "failure" for i in report.get("unresolved_ids", []) if i not in grades})
    return sorted(data.glob("trajs/*/*.traj.json")), grades


def held_back(files: list[Path], *, count: int, seed: int) -> tuple[list[Path], list[Path]]:
    """(the runs development may use, the `count` set aside), by a seeded shuffle of their own."""
    shuffled = files[:]
    random.Random(seed).shuffle(shuffled)
    return sorted(shuffled[count:]), sorted(shuffled[:count])


def split(files: list[Path], *, train: int, runs: int | None, seed: int) -> tuple[list[Path], list[Path]]:
    """A seeded shuffle of the instances: the first `train` (of `runs`, scaled) learn, the rest are asked."""
    shuffled = files[:]
    random.Random(seed).shuffle(shuffled)
    if runs is not None:
        train = max(1, round(train * runs / len(files)))
        shuffled = shuffled[:runs]
    return shuffled[:train], shuffled[train:]


def read_run(path: Path) -> list[Any]:
    from expengine.ingest.readers import read_items

    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    items = read_items(
        str(path), fmt="swe-agent", max_line_bytes=1 << 20, max_document_bytes=1 << 27, agent=None, now=now
    )
    return [i.event for i in items if i.event is not None]


def task_title(events: list[Any]) -> str:
    goal = next(e for e in events if e.kind == "goal")
    return next((line.strip() for line in (goal.goal_description or "").splitlines() if line.strip()), "")


def named(repo: str, *, short: bool) -> str:
    """How a query names the repository: `django/django`, or `django` (its short name) with `short`."""
    return repo.rsplit("/", 1)[-1] if short else repo


def first_step_queries(held_out: list[Path], *, short: bool = False) -> list[tuple[str, str]]:
    """(query, the repository's test runner) for each held-out django or sympy task."""
    out = []
    for path in held_out:
        events = read_run(path)
        repo = events[0].meta.get("repo")
        if repo in TEST_RUNNERS:
            out.append((f"[{named(repo, short=short)}] {task_title(events)}", TEST_RUNNERS[repo]))
    return out


def recovery_steps(held_out: list[Path], grades: dict[str, str], *, short: bool = False) -> list[tuple[str, str]]:
    """(query, program run next) at every failed command of the resolved held-out runs."""
    steps = []
    for path in held_out:
        events = read_run(path)
        if grades.get(events[0].session) != "success":
            continue
        repo = named(events[0].meta.get("repo") or "", short=short)
        calls = [e for e in events if e.kind == "tool_call"]
        failed = {e.meta.get("call_record"): e for e in events if e.kind == "tool_result" and e.tool_error}
        for call, following in zip(calls, calls[1:]):
            result = failed.get(call.id)
            if result is not None:
                steps.append((f"[{repo}] {result.tool_error[-300:]}", following.tool_name))
    return steps


def check_ingested(engine: Any, train: list[Path]) -> None:
    """A reused store holds this split's training runs and nothing else (no held-out run)."""
    sessions = {s for (s,) in engine.store.con.execute("SELECT DISTINCT session FROM records").fetchall()}
    wanted = {p.parent.name for p in train}
    if sessions != wanted:
        raise SystemExit(
            f"--ingested store holds other runs than this split's {len(wanted)} training runs "
            f"({len(sessions - wanted)} extra, {len(wanted - sessions)} missing): save it with the same --train/--runs/--seed"
        )


def names(prompt: str, program: str) -> bool:
    return re.search(rf"(?<![\w/.-]){re.escape(program)}(?![\w-])", prompt) is not None


def first_step_share(prompts: list[str], queries: list[tuple[str, str]]) -> dict[str, Any]:
    named = sum(runner in p for p, (_, runner) in zip(prompts, queries))
    return {"queries": len(queries), "names_test_runner": round(named / max(len(queries), 1), 4)}


def unit_audit(engine: Any) -> dict[str, Any]:
    audit = audit_units(engine.units(status="active"))
    unusable = [u for u in audit["sample"] if RESTATEMENT.search(u["text"]) or CHATTER.search(u["text"])]
    return {**audit, "unusable": len(unusable)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the runs' folder (default: %(default)s)")
    parser.add_argument("--train", type=int, default=150, help="runs to learn from (default: %(default)s of 246)")
    parser.add_argument("--runs", type=int, default=None, help="only N runs in all (quick runs), split alike")
    parser.add_argument("--seed", type=int, default=7, help="the split's seed (default: %(default)s)")
    parser.add_argument("--hold-back", type=int, default=0, help="runs set aside before the split (default: none)")
    parser.add_argument("--hold-back-seed", type=int, default=11, help="their shuffle's seed (default: %(default)s)")
    parser.add_argument("--ask-held-back", action="store_true", help="ask the runs set aside, not the split's")
    parser.add_argument("--short-names", action="store_true", help="ask again naming [django], not [django/django]")
    add_cycle_options(parser, name="swe", k_default=10, k_help="hits per error query (default: %(default)s)")
    reuse = parser.add_mutually_exclusive_group()
    reuse.add_argument("--save-ingested", type=Path, help="keep a copy of the store as ingest left it in DIR")
    reuse.add_argument("--ingested", type=Path, help="start from a --save-ingested copy instead of ingesting")
    parser.set_defaults(budget=500)
    return finish_args(parser, argv, script="swe.py")


def run(args: argparse.Namespace, *, embedder: Any = None, echo: bool = True) -> dict[str, Any]:
    with torch_threads(args.threads):
        return _run(args, embedder=embedder, echo=echo)


def _run(args: argparse.Namespace, *, embedder: Any, echo: bool) -> dict[str, Any]:
    from expengine import Engine

    if not (args.data / "sb-cli-report.json").exists():
        raise SystemExit(f"SWE-bench runs not found: {args.data} (pass --data DIR)")
    files, grades = load_runs(args.data)
    if args.ask_held_back and not args.hold_back:
        raise SystemExit("--ask-held-back needs --hold-back N")
    files, aside = held_back(files, count=args.hold_back, seed=args.hold_back_seed)
    train, held_out = split(files, train=args.train, runs=args.runs, seed=args.seed)
    if args.ask_held_back:
        held_out = aside
    watch = Stopwatch()
    with watch.section("model load"):
        embedder = embedder or load_embedder()
    namings = {"": False, ", short name": True} if args.short_names else {"": False}
    asked = {
        suffix: (first_step_queries(held_out, short=short), recovery_steps(held_out, grades, short=short))
        for suffix, short in namings.items()
    }
    first, steps = asked[""]
    programs = {p for _, p in steps} | {e.tool_name for f in train for e in read_run(f) if e.kind == "tool_call"}
    report: dict[str, Any] = {
        "benchmark": "SWE-bench Verified mini-swe-agent runs",
        "command": args.command,
        "data": str(args.data),
        "machine": machine(),
        "train_runs": len(train),
        "held_out_runs": len(held_out),
        "asked": "the runs held back" if args.ask_held_back else "the split's held-out runs",
        "project_named": "owner/name and short name" if args.short_names else "owner/name",
    }
    with tempfile.TemporaryDirectory(prefix="swe-bench-") as tmp:
        folder = Path(tmp) / "train"
        for path in train:
            (folder / path.parent.name).mkdir(parents=True)
            (folder / path.parent.name / path.name).write_bytes(path.read_bytes())
        graded = Path(tmp) / "grades.jsonl"
        graded.write_text(
            "".join(json.dumps({"session": p.parent.name, "outcome": grades[p.parent.name]}) + "\n" for p in train),
            encoding="utf-8",
        )
        store = Path(tmp) / "store"
        raw = sum(p.stat().st_size for p in train)
        report["raw_log_bytes"] = raw
        if args.ingested:
            shutil.copytree(args.ingested, store)
        with Engine(store=store, embedder=embedder, overrides=engine_overrides(args)) as engine:
            if args.ingested:
                check_ingested(engine, train)
                report["ingested"] = str(args.ingested)
            else:
                with watch.section("ingest"):
                    report["stored"] = engine.ingest([str(folder)], fmt="swe-agent", outcomes=[str(graded)]).stored
                report["ingest_records_per_s"] = round(report["stored"] / watch.seconds["ingest"], 1)
        if args.save_ingested:
            shutil.rmtree(args.save_ingested, ignore_errors=True)
            shutil.copytree(store, args.save_ingested)
        with Engine(store=store, embedder=embedder, overrides=engine_overrides(args)) as engine:
            report["sizes"] = {"after ingest": store_size(engine)}
            report["disk"] = {"after ingest": disk_sizes(store, raw)}
            bm25 = {}
            with watch.section("baseline (BM25)"):
                for suffix, (first, steps) in asked.items():
                    bm25[suffix] = (
                        [p for p, _ in bm25_answers(engine, [q for q, _ in first], budget=500, depth=50)],
                        [p for p, _ in bm25_answers(engine, [q for q, _ in steps], budget=args.budget, depth=50)],
                    )
            start = newest_record(engine)
            with watch.section("compaction"):
                report["cycles"] = run_cycles(engine, args.cycles, start=start)
            now = after_cycles(start, args.cycles)
            report["disk"][f"after {args.cycles} cycles"] = disk_sizes(store, raw)
            report["sizes"]["after compaction"] = store_size(engine)
            report["first_step"], report["error_recovery"] = {}, {}
            for suffix, (first, steps) in asked.items():
                with watch.section("queries"):
                    memory_first = [engine.query(q, touch=False, now=now, **FIRST_STEP).prompt for q, _ in first]
                    memory_steps = [
                        engine.query(q, k=args.k, touch=False, budget=args.budget, now=now).prompt for q, _ in steps
                    ]
                    # what the SessionStart hook injects for the task's project (the same call, without the process)
                    hook_first = [
                        engine.agent_context("session-start", project=q[1 : q.index("]")])["text"] for q, _ in first
                    ]
                bm25_first, bm25_steps = bm25[suffix]
                report["first_step"][f"memory{suffix}"] = first_step_share(memory_first, first)
                report["first_step"][f"BM25 over raw training runs{suffix}"] = first_step_share(bm25_first, first)
                report["first_step"][f"SessionStart hook{suffix}"] = first_step_share(hook_first, first)
                report["error_recovery"][f"memory{suffix}"] = lift(memory_steps, steps, programs, names=names)
                report["error_recovery"][f"BM25 over raw training runs{suffix}"] = lift(
                    bm25_steps, steps, programs, names=names
                )
                report["first_step"][f"examples{suffix}"] = [
                    {"query": q, "prompt": p[:1200]} for (q, _), p in list(zip(first, memory_first))[:3]
                ]
            report["unit_audit"] = unit_audit(engine)
            report["environment_units"] = [
                u["text"] for u in engine.units(status="active") if u.get("category") == "environment"
            ]
    report["seconds"] = watch.to_dict()
    return publish(report, args, section="swe", text=render(report), echo=echo)


def render(report: dict[str, Any]) -> str:
    size = report["sizes"]["after compaction"]
    lines = [
        f"`{report['command']}`: {report['train_runs']} runs learned from, {report['held_out_runs']} asked "
        f"({report['asked']}, project named by {report['project_named']}; {report['machine']}).",
        "",
        "| method | first-step prompts naming the test runner | error queries | names next program | "
        "names another (mean) | lift |",
        "|---|---|---|---|---|---|",
    ]
    for name in report["error_recovery"]:
        f, e = report["first_step"][name], report["error_recovery"][name]
        lines.append(
            f"| {name} | {f['names_test_runner']:.3f} of {f['queries']} | {e['steps']} | {e['names_next']:.3f} | "
            f"{e['names_other']:.3f} | {e['lift']:+.3f} |"
        )
    lines += [
        "",
        table(
            ["store", "raw", "active", "units", "hot tokens / raw tokens"],
            [
                [name, s["raw"], s["active"], s["units"], f"{s['hot_tokens']} / {s['raw_tokens']} = {s['hot_share']}"]
                for name, s in report["sizes"].items()
            ],
        ),
        "",
        f"Hot text after {len(report['cycles'])} cycles: {size['hot_share']} of raw.",
        "",
        f"Disk, against {report['raw_log_bytes']:,} bytes of training runs: "
        + "; ".join(
            f"{k} {d['store_bytes'] / 1e6:.1f} MB ({d['times_raw']}x; DuckDB {d['duckdb_bytes'] / 1e6:.1f} MB, "
            f"LanceDB {d['lance_bytes'] / 1e6:.1f} MB, snapshots {d['snapshot_bytes'] / 1e6:.1f} MB)"
            for k, d in report["disk"].items()
        )
        + ".",
        "",
        "Environment units:",
        *[f"- {' '.join(t.split())[:220]}" for t in report["environment_units"]],
        "",
        f"Unit audit: {report['unit_audit']['unusable']} of {report['unit_audit']['sampled']} random active units "
        f"are tool restatements or chatter ({report['unit_audit']['active_units']} active units).",
        *[f"- [{u['category']}] {' '.join(u['text'].split())[:200]}" for u in report["unit_audit"]["sample"]],
        "",
        "Seconds: " + ", ".join(f"{k} {v}" for k, v in report["seconds"].items()) + ".",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    run(parse_args())
