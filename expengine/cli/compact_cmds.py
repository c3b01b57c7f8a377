"""Compaction commands: compact, snapshots, restore, pin, unpin, forget, history."""

from __future__ import annotations

import sys
from typing import Any, List, Optional

import typer
from rich.table import Table

from ..errors import InputError
from .common import JSON_OPTION, app, call, emit_json, open_engine, server, stderr, stdout


@app.command()
def compact(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan (on a throw-away copy); change nothing."),
    no_refine: bool = typer.Option(False, "--no-refine", help="Skip refinement into knowledge units."),
    max_llm_calls: Optional[int] = typer.Option(None, "--max-llm-calls", help="Cap on LLM calls for refinement."),
    as_json: bool = JSON_OPTION,
) -> None:
    """One forgetting cycle: snapshot, decay, goal cleanup, cluster pruning, refine, purge. Cron-safe."""
    data = call(ctx, "compact", dry_run=dry_run, refine=not no_refine, max_llm_calls=max_llm_calls)
    if as_json:
        emit_json(data)
        return
    _print_report(data)


def _print_report(data: dict[str, Any]) -> None:
    for item in data["recovered"]:
        stderr.print(f"recovered interrupted run {item['run_id']}: {item['action']} (snapshot {item['snapshot_id']})")
    title = "compaction plan (dry run, nothing changed)" if data["dry_run"] else f"compaction {data['run_id']}"
    table = Table("", "before", "after", title=title)
    before, after = data["before"], data["after"] or {}
    for key in ("raw", "active", "dormant", "archived", "clusters", "merged", "units", "active_tokens"):
        table.add_row(key.replace("_", " "), str(before[key]), str(after.get(key, "")))
    stdout.print(table)
    steps = Table("step", "seconds", "what happened", title="steps")
    for name, step in data["steps"].items():
        steps.add_row(name, f"{step.get('seconds', 0):.2f}", _step_summary(name, step))
    stdout.print(steps)
    stdout.print(f"clustering {data['clustering']}")
    if data["dry_run"]:
        for name, step in data["steps"].items():
            for key in ("examples", "merge_examples", "dormant_examples"):
                for ex in step.get(key) or []:
                    stdout.print(f"  {name}: {ex}", markup=False)
    elif data["snapshot_id"]:
        stderr.print(f"snapshot {data['snapshot_id']} (undo with: expengine restore {data['snapshot_id']})")


def _step_summary(name: str, step: dict[str, Any]) -> str:
    if step.get("skipped"):
        return str(step["skipped"])
    if step.get("error"):
        return f"error: {step['error']}"
    if name == "decay":
        return f"{step['decayed']} decayed, {step['became_dormant']} dormant"
    if name == "goals":
        return (f"goals {step['goals_handled']}: {step['process_weakened']} process weakened, "
                f"{step['lessons_reinforced']} lessons and {step['failure_records_reinforced']} failure records reinforced, "
                f"{step['became_dormant']} dormant")
    if name == "clusters":
        return (f"{step['records_clustered']} records in {step['clusters']} clusters; {step['merged_records']} merged into "
                f"{step['merged_groups']} survivors; {step['dormant_covered']} covered and {step['dormant_empty']} empty "
                f"went dormant; {step['kept_by_floor']} kept by the keep_ratio floor")
    if name == "purge":
        return f"{step['archived']} archived, {step['waiting']} waiting out the observation window"
    if name == "snapshot":
        return str(step.get("id", ""))
    return ", ".join(f"{k}={v}" for k, v in step.items() if k != "seconds" and not isinstance(v, (list, dict)))[:200]


@app.command()
def snapshots(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List snapshots, newest first."""
    found = call(ctx, "snapshots")["snapshots"]
    if as_json:
        emit_json({"snapshots": found})
        return
    if not found:
        stderr.print("no snapshots yet (each compaction takes one)")
        return
    table = Table("id", "created (UTC)", "reason", "raw", "active", "MiB")
    for s in found:
        table.add_row(s["id"], s["created"], s["reason"], str(s["raw"]), str(s["active"]), f"{s['size_bytes'] / 2**20:.1f}")
    stdout.print(table)


@app.command()
def restore(ctx: typer.Context, snapshot_id: str = typer.Argument(..., help="A snapshot id from `expengine snapshots`."),
            as_json: bool = JSON_OPTION) -> None:
    """Roll the store back to a snapshot (anything ingested after it is gone too)."""
    result = call(ctx, "restore", snapshot_id=snapshot_id)
    if as_json:
        emit_json(result)
        return
    stdout.print(f"restored {result['snapshot_id']}: {result['raw_after']} records ({result['active_after']} active); "
                 f"runs rolled back: {', '.join(result['runs_rolled_back']) or 'none'}")


@app.command()
def pin(ctx: typer.Context, record_id: str = typer.Argument(...), as_json: bool = JSON_OPTION) -> None:
    """Pin a memory: it never decays and is never merged away, pruned or purged."""
    result = call(ctx, "pin", id=record_id)
    emit_json(result) if as_json else stdout.print(f"pinned {record_id} ({result['state']})")


@app.command()
def unpin(ctx: typer.Context, record_id: str = typer.Argument(...), as_json: bool = JSON_OPTION) -> None:
    """Unpin a memory: it decays like any other again."""
    result = call(ctx, "unpin", id=record_id)
    emit_json(result) if as_json else stdout.print(f"unpinned {record_id}")


@app.command()
def forget(
    ctx: typer.Context,
    ids: List[str] = typer.Argument(None, help="Record ids to delete."),
    where: Optional[str] = typer.Option(None, "--where", help="SQL filter over records, e.g. \"session = 's1'\"."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Delete records for real, with their embeddings, history and unit provenance (privacy requests)."""
    client = server(ctx)
    if client is not None:  # requests never carry SQL: the server takes ids only
        if where:
            raise InputError("--where is SQL, which a running server does not take",
                             hint="pass record ids, or stop the server and add --direct")
        _confirm(len(ids or []), yes=yes, as_json=as_json)
        data = client.call("forget", {"ids": ids or []})
    else:
        from ..service import ops

        with open_engine(ctx) as engine:
            targets = engine.forget_targets(ids=ids or None, where=where)
            if not targets:
                raise InputError("no record matches", hint="check the ids or the --where filter")
            _confirm(len(targets), yes=yes, as_json=as_json)
            data = ops.run(engine, "forget", {"ids": targets})
    if as_json:
        emit_json(data)
        return
    stdout.print(f"deleted {data['records']} records, {data['embeddings']} embeddings, {data['history']} history rows; "
                 f"{data['units_updated']} units lost sources, {data['units_deleted']} units deleted")


def _confirm(count: int, *, yes: bool, as_json: bool) -> None:
    if yes:
        return
    if as_json or not sys.stdin.isatty():
        raise InputError(f"refusing to delete {count} record(s) without --yes", hint="add --yes")
    if not typer.confirm(f"delete {count} record(s) and their derived data for good?", err=True):
        raise InputError("nothing deleted", hint="add --yes to skip the question")


@app.command()
def history(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """The growth curve over compaction runs: raw vs active records, units and tokens."""
    runs = call(ctx, "history")["runs"]
    if as_json:
        emit_json({"runs": runs})
        return
    if not runs:
        stderr.print("no compaction runs yet")
        return
    table = Table("run", "started (UTC)", "status", "raw", "active", "units", "tokens", "active share")
    for run in runs:
        raw, active = run["raw"] or 0, run["active_after"] if run["active_after"] is not None else run["active_before"] or 0
        bar = "█" * round(20 * active / raw) if raw else ""
        table.add_row(run["run_id"], (run["started"] or "")[:19], run["status"], str(raw), str(active),
                      _cell(run["units"]), _cell(run["tokens_after"]),
                      f"{bar} {100 * active / raw:.0f}%" if raw else "")
    stdout.print(table)


def _cell(value: Any) -> str:
    return "" if value is None else str(value)
