"""tau-bench airline benchmark: do repeated agent runs distil into units that name the right tools?

    python bench/tau.py [--data PATH] [--tasks N] [--trials N] [--cycles 3] [--k 5] [--budget 1000]
                        [--threads 1] [--llm] [--set KEY=VALUE] [--out PATH]

The 160 runs (40 tasks x 4 trials, gpt-4o, openai-chat format) are ingested into one fresh store
and compacted `--cycles` times, one nightly clock tick apart. Reported:
- store size after ingest and after each cycle: raw records, active, dormant, archived, units;
- merged trials: survivors whose `merged_ids` (with the survivor itself) span two or more trials
  of the same task, and how many of the 40 tasks have one; the same for units' `source_ids`;
- for every failed run (reward 0): whether a query made from its task instruction
  (`info.task.instruction`, touch=False, k hits within the budget) returns a unit or memory whose
  text names the tool of one of the task's gold `info.task.actions` — before and after compaction,
  also counting only hits that do not come solely from that very run, and asking for rules only
  (`kind="rule"`, what an agent that wants a procedure would ask);
- ten sample units.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    SHARED_DATA,
    Stopwatch,
    add_cycle_options,
    after_cycles,
    audit_units,
    engine_overrides,
    finish_args,
    lift,
    load_embedder,
    machine,
    newest_record,
    publish,
    render_audit,
    run_cycles,
    store_size,
    table,
    torch_threads,
)

DEFAULT_DATA = SHARED_DATA / "tau_bench_airline" / "gpt-4o-airline_tasks00-39.json"
RECORD_ID = re.compile(r"^task(\d+)/trial(\d+)/")
SAMPLE_UNITS = 10


def select_runs(runs: list[dict[str, Any]], *, tasks: int | None, trials: int | None) -> list[dict[str, Any]]:
    """The runs of the first `tasks` task ids (in file order), at most `trials` of each: a slice that
    keeps repeated trials together, which merging across trials needs."""
    wanted = list(dict.fromkeys(r.get("task_id") for r in runs))[:tasks]
    kept, per_task = [], defaultdict(int)
    for run in runs:
        task = run.get("task_id")
        if task in wanted and (trials is None or per_task[task] < trials):
            per_task[task] += 1
            kept.append(run)
    return kept


def task_and_trial(record_id: str) -> tuple[int, int] | None:
    """'task7/trial2/step15' → (7, 2): the openai-chat reader's stable ids name the run."""
    match = RECORD_ID.match(record_id)
    return (int(match.group(1)), int(match.group(2))) if match else None


def cross_trial_groups(groups: list[list[str]]) -> dict[str, Any]:
    """Of groups of record ids (a survivor with what merged into it, a unit's sources): those that span
    two or more trials of one task, and which tasks they cover."""
    spanning, tasks = 0, set()
    for ids in groups:
        trials = defaultdict(set)
        for record_id in ids:
            parsed = task_and_trial(record_id)
            if parsed:
                trials[parsed[0]].add(parsed[1])
        crossing = {task for task, seen in trials.items() if len(seen) >= 2}
        spanning += bool(crossing)
        tasks |= crossing
    return {"groups": len(groups), "spanning_trials": spanning, "tasks": len(tasks), "task_ids": sorted(tasks)}


def merged_trials(engine: Any) -> dict[str, Any]:
    rows = engine.store.con.execute("SELECT id, merged_ids FROM records WHERE merged_ids IS NOT NULL").fetchall()
    groups = [[rid, *json.loads(merged or "[]")] for rid, merged in rows]
    merges = cross_trial_groups([g for g in groups if len(g) > 1])
    units = cross_trial_groups([u["source_ids"] for u in engine.units(status="active")])
    return {"merges": merges, "units": units}


def names_tool(text: str, tools: set[str]) -> bool:
    return any(re.search(rf"\b{re.escape(tool)}\b", text or "") for tool in tools)


def failed_run_checks(
    engine: Any, runs: list[dict[str, Any]], *, k: int, budget: int, now: dt.datetime
) -> list[dict[str, Any]]:
    """One query per failed run, from its task instruction, asked at `now`; does a hit name a gold tool?"""
    checks = []
    for run in runs:
        if run.get("reward", 0) > 0:
            continue
        task = (run.get("info") or {}).get("task") or {}
        tools = {a.get("name") for a in task.get("actions") or [] if a.get("name")}
        instruction = task.get("instruction") or ""
        entry: dict[str, Any] = {"task_id": run.get("task_id"), "trial": run.get("trial"), "gold_tools": sorted(tools)}
        if not tools or not instruction.strip():
            entry["skipped"] = "no gold actions" if not tools else "no instruction"
            checks.append(entry)
            continue
        own = f"task{run.get('task_id')}/trial{run.get('trial', 0)}/"
        result = engine.query(instruction, k=k, touch=False, budget=budget, expand=True, now=now)
        naming = [h for h in result.hits if names_tool(h.text, tools)]
        from_elsewhere = [h for h in naming if not all(s.startswith(own) for s in h.source_ids)]
        rules = engine.query(instruction, k=k, touch=False, budget=budget, expand=False, kind="rule", now=now)
        entry.update(
            hits=len(result.hits),
            units=sum(h.type == "unit" for h in result.hits),
            found=bool(naming),
            found_unit=any(h.type == "unit" for h in naming),
            found_memory=any(h.type == "memory" for h in naming),
            found_outside_own_run=bool(from_elsewhere),
            found_asking_rules_only=any(names_tool(h.text, tools) for h in rules.hits),
            first_match=None
            if not naming
            else {"id": naming[0].id, "type": naming[0].type, "text": naming[0].text[:200]},
            top_hits=[{"id": h.id, "type": h.type, "text": h.text[:120]} for h in result.hits[:3]],
        )
        checks.append(entry)
    return checks


def summarise_checks(checks: list[dict[str, Any]]) -> dict[str, Any]:
    asked = [c for c in checks if "skipped" not in c]
    share = lambda key: round(sum(c[key] for c in asked) / len(asked), 4) if asked else None
    return {
        "failed_runs": len(checks),
        "asked": len(asked),
        "skipped": len(checks) - len(asked),
        "found": share("found"),
        "found_unit": share("found_unit"),
        "found_memory": share("found_memory"),
        "found_outside_own_run": share("found_outside_own_run"),
        "found_asking_rules_only": share("found_asking_rules_only"),
    }


def sample_units(engine: Any, n: int = SAMPLE_UNITS) -> list[dict[str, Any]]:
    """The n best units, skipping repeats of one wording (units of different clusters often differ only
    in their counts), so the sample shows variety."""
    picked, seen = [], set()
    for unit in engine.units(status="active"):
        wording = re.sub(r"\d+", "#", unit["text"])
        if wording in seen:
            continue
        seen.add(wording)
        picked.append(
            {
                "id": unit["id"],
                "kind": unit["kind"],
                "method": unit["method"],
                "support": unit["support"],
                "confidence": unit["confidence"],
                "success_rate": unit["success_rate"],
                "text": unit["text"],
            }
        )
        if len(picked) == n:
            break
    return picked


TOOL_NAMES = re.compile(r'"name":\s*"(\w+)"')


def eval_steps(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(query, next tool) at every tool call of the successful runs: the query is the user's first message
    plus the latest user message before the call."""
    steps = []
    for run in runs:
        if run.get("reward", 0) < 1:
            continue
        users: list[str] = []
        for message in run["traj"]:
            if message.get("role") == "user" and message.get("content"):
                users.append(message["content"])
            for call in message.get("tool_calls") or []:
                if users:
                    query = users[0] if len(users) == 1 else f"{users[0]} {users[-1]}"
                    steps.append((query, call["function"]["name"]))
    return steps


def bm25_prompts(engine: Any, queries: list[str], *, budget: int) -> list[str]:
    """BM25 over the raw training records, rendered and cut like a query answer."""
    from common import bm25_answers

    return [prompt for prompt, _ in bm25_answers(engine, queries, budget=budget, depth=50)]


def leave_tasks_out(
    args: argparse.Namespace,
    runs: list[dict[str, Any]],
    embedder: Any,
    *,
    train_tasks: int = 30,
    k: int = 10,
    budget: int = 500,
) -> dict[str, Any]:
    """Learn from the runs of the first `train_tasks` task ids (compacted `--cycles` times), evaluate on the
    others' successful runs, never ingested: does the prompt name the tool called next (lift over the rest)?"""
    from expengine import Engine

    task_ids = list(dict.fromkeys(r.get("task_id") for r in runs))
    train = [r for r in runs if r.get("task_id") in task_ids[:train_tasks]]
    held = [r for r in runs if r.get("task_id") in task_ids[train_tasks:]]
    tools = set(TOOL_NAMES.findall(json.dumps([m.get("tool_calls") for r in runs for m in r["traj"]])))
    steps = eval_steps(held)
    queries = [q for q, _ in steps]
    with tempfile.TemporaryDirectory(prefix="tau-holdout-") as tmp:
        log = Path(tmp) / "train.json"
        log.write_text(json.dumps(train), encoding="utf-8")
        with Engine(store=Path(tmp) / "store", embedder=embedder, overrides=engine_overrides(args)) as engine:
            engine.ingest([str(log)], fmt="openai-chat")
            baseline = lift(bm25_prompts(engine, queries, budget=budget), steps, tools)
            start = newest_record(engine)
            run_cycles(engine, args.cycles, start=start)
            now = after_cycles(start, args.cycles)
            memory = [engine.query(q, k=k, touch=False, budget=budget, now=now).prompt for q in queries]
            rules = [engine.query(q, k=k, touch=False, budget=budget, kind="rule", now=now).prompt for q in queries]
            audit = audit_units(engine.units(status="active"))
    return {
        "train_runs": len(train),
        "held_out_runs": len(held),
        "k": k,
        "budget_tokens": budget,
        "memory": lift(memory, steps, tools),
        "rules only": lift(rules, steps, tools),
        "BM25 over raw training runs": baseline,
        "unit_audit": audit,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="tau-bench runs JSON (default: %(default)s)")
    parser.add_argument("--tasks", type=int, default=None, help="only the runs of the first N task ids")
    parser.add_argument("--trials", type=int, default=None, help="only the first N trials of each task")
    parser.add_argument(
        "--holdout",
        action="store_true",
        help="also learn from tasks 0-29 and measure the next-tool lift on tasks 30-39 (never ingested)",
    )
    add_cycle_options(
        parser, name="tau", k_default=5, k_help="hits per query (default: %(default)s, the query default)"
    )
    return finish_args(parser, argv, script="tau.py")


def run(args: argparse.Namespace, *, embedder: Any = None, echo: bool = True) -> dict[str, Any]:
    with torch_threads(args.threads):
        return _run(args, embedder=embedder, echo=echo)


def _run(args: argparse.Namespace, *, embedder: Any, echo: bool) -> dict[str, Any]:
    from expengine import Engine

    if not args.data.exists():
        raise SystemExit(f"tau-bench data not found: {args.data} (pass --data PATH)")
    runs = select_runs(json.loads(args.data.read_text(encoding="utf-8")), tasks=args.tasks, trials=args.trials)
    watch = Stopwatch()
    with watch.section("model load"):
        embedder = embedder or load_embedder()
    report: dict[str, Any] = {
        "benchmark": "tau-bench airline",
        "data": str(args.data),
        "machine": machine(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "runs": len(runs),
        "tasks": len({r.get("task_id") for r in runs}),
        "failed_runs": sum(1 for r in runs if r.get("reward", 0) <= 0),
    }
    with tempfile.TemporaryDirectory(prefix="tau-bench-") as tmp:
        log = Path(tmp) / "runs.json"
        log.write_text(json.dumps(runs), encoding="utf-8")
        with Engine(store=Path(tmp) / "store", embedder=embedder, overrides=engine_overrides(args)) as engine:
            with watch.section("ingest"):
                result = engine.ingest([str(log)], fmt="openai-chat")
            report["stored"] = result.stored
            report["sizes"] = {"after ingest": store_size(engine)}
            start = newest_record(engine)
            with watch.section("queries"):
                before = failed_run_checks(engine, runs, k=args.k, budget=args.budget, now=start)
            with watch.section("compaction"):
                report["cycles"] = run_cycles(engine, args.cycles, start=start)
            report["sizes"]["after compaction"] = store_size(engine)
            with watch.section("queries"):
                now = after_cycles(start, args.cycles)
                after = failed_run_checks(engine, runs, k=args.k, budget=args.budget, now=now)
            report["merged_trials"] = merged_trials(engine)
            report["failed_run_queries"] = {
                "before compaction": summarise_checks(before),
                "after compaction": summarise_checks(after),
                "per_run_after": after,
            }
            report["sample_units"] = sample_units(engine)
    if args.holdout:
        with watch.section("leave tasks out"):
            report["leave_tasks_out"] = leave_tasks_out(args, runs, embedder)
    report["seconds"] = watch.to_dict()
    return publish(report, args, section="tau", text=render(report), echo=echo)


def render(report: dict[str, Any]) -> str:
    header = (
        f"`{report['settings']['command']}`: {report['runs']} runs of {report['tasks']} tasks, "
        f"{report['failed_runs']} failed, {report['stored']} records ({report['machine']})."
    )
    ingest = report["sizes"]["after ingest"]
    size_rows = [
        [
            "after ingest",
            ingest["raw"],
            ingest["active"],
            ingest["dormant"],
            ingest["archived"],
            ingest["units"],
            ingest["share_of_raw"],
        ]
    ]
    size_rows += [
        [
            f"after cycle {c['cycle']}",
            ingest["raw"],
            c["active"],
            c["dormant"],
            c["archived"],
            c["units"],
            round((c["active"] + c["units"]) / ingest["raw"], 4) if ingest["raw"] else None,
        ]
        for c in report["cycles"]
    ]
    blocks = [
        header,
        "### Store size\n\n"
        + table(["when", "raw", "active", "dormant", "archived", "units", "(active + units) / raw"], size_rows),
    ]
    merged = report["merged_trials"]
    blocks.append(
        "### Repeated trials merged\n\n"
        + table(
            ["what", "groups", "spanning 2+ trials of a task", f"tasks covered (of {report['tasks']})"],
            [
                [
                    "merged survivors (records.merged_ids)",
                    merged["merges"]["groups"],
                    merged["merges"]["spanning_trials"],
                    merged["merges"]["tasks"],
                ],
                [
                    "active units (source_ids)",
                    merged["units"]["groups"],
                    merged["units"]["spanning_trials"],
                    merged["units"]["tasks"],
                ],
            ],
        )
    )
    queries = report["failed_run_queries"]
    blocks.append(
        "### Failed runs: does a query from the task instruction name a gold tool?\n\n"
        + table(
            [
                "when",
                "failed runs asked",
                "found",
                "in a unit",
                "in a memory",
                "not only from the run itself",
                "asking for rules only (kind=rule)",
            ],
            [
                [
                    when,
                    q["asked"],
                    q["found"],
                    q["found_unit"],
                    q["found_memory"],
                    q["found_outside_own_run"],
                    q["found_asking_rules_only"],
                ]
                for when, q in ((w, queries[w]) for w in ("before compaction", "after compaction"))
            ],
        )
    )
    units = "\n".join(
        f"{i}. [{u['kind']}, support {u['support']}, {u['method']}] {u['text'][:300]}"
        for i, u in enumerate(report["sample_units"], 1)
    )
    blocks.append("### Sample units\n\n" + (units or "(none)"))
    held = report.get("leave_tasks_out")
    if held:
        blocks.append(
            f"### Leave tasks out: learn from {held['train_runs']} runs, query at each tool call of the "
            f"successful held-out runs (k={held['k']}, {held['budget_tokens']}-token prompt)\n\n"
            + table(
                ["method", "steps", "names the next tool", "names another tool (mean)", "lift"],
                [
                    [name, m["steps"], m["names_next"], m["names_other"], m["lift"]]
                    for name, m in ((n, held[n]) for n in ("memory", "rules only", "BM25 over raw training runs"))
                ],
            )
        )
        blocks.append(render_audit(held["unit_audit"], "tasks 0-29 store"))
    blocks.append("Seconds: " + ", ".join(f"{k} {v}" for k, v in report["seconds"].items()) + ".")
    return "\n\n".join(blocks)


if __name__ == "__main__":
    run(parse_args())
