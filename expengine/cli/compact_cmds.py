"""Compaction commands: compact, snapshots, restore, pin, unpin, forget, history."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import InputError, NotFoundError
from ..lifecycle.steps import STEPS
from .common import JSON_OPTION, app, call, emit_json, open_engine, stderr, stdout, styled


@app.command(help=f"One forgetting cycle: snapshot, {', '.join(s.does for s in STEPS)}. Cron-safe.")
def compact(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan (on a throw-away copy); change nothing."),
    no_refine: bool = typer.Option(False, "--no-refine", help="Skip refinement into knowledge units."),
    max_llm_calls: Optional[int] = typer.Option(None, "--max-llm-calls", help="Cap on LLM calls for refinement."),
    full: bool = typer.Option(False, "--full", help="Re-cluster and re-check the whole store, not only what changed."),
    as_json: bool = JSON_OPTION,
) -> None:
    data = call(ctx, "compact", dry_run=dry_run, refine=not no_refine, max_llm_calls=max_llm_calls, full=full)
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
    for key in (
        "raw",
        "active",
        "dormant",
        "archived",
        "clusters",
        "merged",
        "units",
        "active_tokens",
        "hot_tokens",
        "raw_tokens",
    ):
        table.add_row(key.replace("_", " "), str(before[key]), str(after.get(key, "")))
    stdout.print(table)
    steps = Table("step", "seconds", "CPU s", "what happened", title="steps")
    for name, step in data["steps"].items():
        cpu = step.get("cpu_s")
        steps.add_row(
            name, f"{step.get('seconds', 0):.2f}", "" if cpu is None else f"{cpu:.2f}", step.get("summary", "")
        )
    stdout.print(steps)
    stdout.print(f"clustering {data['clustering']}")
    if data["dry_run"]:
        for name, step in data["steps"].items():
            for key in ("examples", "merge_examples", "dormant_examples"):
                for ex in step.get(key) or []:
                    stdout.print(f"  {name}: {ex}")
    elif data["snapshot_id"]:
        stderr.print(f"snapshot {data['snapshot_id']} (undo with: expengine restore {data['snapshot_id']})")


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
        table.add_row(
            s["id"], s["created"], s["reason"], str(s["raw"]), str(s["active"]), f"{s['size_bytes'] / 2**20:.1f}"
        )
    stdout.print(table)


@app.command()
def snapshot(
    ctx: typer.Context,
    to: str = typer.Option(..., "--to", help="Where: s3://bucket/prefix (AWS_* variables) or a folder."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Export the store's tables as Parquet (LanceDB is rebuilt from them on `restore --from`)."""
    with open_engine(ctx, create=False) as engine:
        result = engine.export(to)
    if as_json:
        emit_json(result)
        return
    stdout.print(f"exported {sum(result['tables'].values())} rows of {len(result['tables'])} tables to {to}")


@app.command()
def restore(
    ctx: typer.Context,
    snapshot_id: Optional[str] = typer.Argument(None, help="A snapshot id from `expengine snapshots`."),
    source: Optional[str] = typer.Option(None, "--from", help="Instead: fill this new store from a `snapshot --to`."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Roll the store back to a snapshot (anything ingested after it is gone too), or fill a new one --from an export."""
    if (snapshot_id is None) == (source is None):
        raise InputError("give a snapshot id or --from URI (one of them)", hint="see `expengine snapshots`")
    if source is not None:
        with open_engine(ctx) as engine:
            imported = engine.restore_from(source)
        if as_json:
            emit_json(imported)
            return
        stdout.print(f"restored {imported['tables'].get('records', 0)} records from {source}; index rebuilt")
        return
    result = call(ctx, "restore", snapshot_id=snapshot_id)
    if as_json:
        emit_json(result)
        return
    stdout.print(
        f"restored {result['snapshot_id']}: {result['raw_after']} records ({result['active_after']} active); "
        f"runs rolled back: {', '.join(result['runs_rolled_back']) or 'none'}"
    )


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
    ids_from: Optional[str] = typer.Option(None, "--ids-from", help="A file with one record id per line; - for stdin."),
    session: List[str] = typer.Option([], "--session", help="Records of this session (repeatable)."),
    agent: List[str] = typer.Option([], "--agent", help="Records of this agent (repeatable)."),
    user: List[str] = typer.Option(
        [], "--user", help="Everything of this user: records, notes, units only they supported, queries (repeatable)."
    ),
    before: Optional[str] = typer.Option(
        None, "--before", help="Records whose event time is before this ISO date or time (UTC)."
    ),
    rejects: bool = typer.Option(
        False, "--rejects", help="Delete every quarantined input line (`expengine rejects`) instead of records."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be deleted; delete nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Delete records for real, from the store and every snapshot, with their embeddings, history and unit
    provenance (privacy requests). Filters combine with AND; through a running server too (never SQL).
    Example: expengine forget --agent bot --before 2026-01-01"""
    named = list(ids or []) + _read_ids(ids_from)
    filters: dict[str, Any] = {
        "ids": named or None,
        "sessions": session or None,
        "agents": agent or None,
        "users": user or None,
        "before": before,
    }
    if rejects:
        _forget_rejects(ctx, any(filters.values()), dry_run=dry_run, yes=yes, as_json=as_json)
        return
    plan = call(ctx, "forget", **filters, dry_run=True)
    if not plan["records"]:
        raise NotFoundError("no record matches these filters", hint="check them with `expengine show ID` or `stats`")
    if dry_run:
        emit_json(plan) if as_json else _print_forget(plan, stdout)
        return
    if not yes:
        if as_json or not sys.stdin.isatty():
            raise InputError(
                f"refusing to delete {plan['records']} record(s) without --yes",
                hint="add --yes, or --dry-run to look first",
            )
        _print_forget(plan, stderr)
        if not typer.confirm(f"delete {plan['records']} record(s) and their derived data for good?", err=True):
            raise InputError("nothing deleted", hint="add --yes to skip the question")
    result = call(ctx, "forget", ids=plan["ids"], users=user or None)
    if as_json:
        emit_json(result)
        return
    stdout.print(
        f"deleted {result['records']} records, {result['embeddings']} embeddings, {result['history']} history "
        f"rows; {result['units_updated']} units lost sources, {result['units_deleted']} units deleted; "
        f"{result['snapshots']} snapshots rewritten"
    )
    _warn_damaged(result)


def _forget_rejects(ctx: typer.Context, filtered: bool, *, dry_run: bool, yes: bool, as_json: bool) -> None:
    if filtered:
        raise InputError("--rejects takes no record filter", hint="forget rejects and records in two commands")
    plan = call(ctx, "forget", rejects=True, dry_run=True)
    if dry_run or not plan["rejects"]:
        emit_json(plan) if as_json else stdout.print(f"would delete {plan['rejects']} rejects")
        return
    if not yes:
        if as_json or not sys.stdin.isatty():
            raise InputError(f"refusing to delete {plan['rejects']} reject(s) without --yes", hint="add --yes")
        if not typer.confirm(f"delete {plan['rejects']} quarantined line(s) for good?", err=True):
            raise InputError("nothing deleted", hint="add --yes to skip the question")
    result = call(ctx, "forget", rejects=True)
    if as_json:
        emit_json(result)
        return
    stdout.print(f"deleted {result['rejects']} rejects; {result['snapshots']} snapshots rewritten")
    _warn_damaged(result)


def _warn_damaged(result: dict[str, Any]) -> None:
    """A damaged snapshot could not be rewritten: it may still hold what was forgotten, so say so."""
    for why in result.get("snapshots_damaged") or []:
        stderr.print(styled(("warning:", "bold yellow"), " ", f"{why}; not rewritten: delete its folder"))


def _read_ids(path: Optional[str]) -> list[str]:
    """One id per line from a file or stdin (`-`); blank lines are skipped."""
    if path is None:
        return []
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read --ids-from {path}: {exc.strerror}", hint="a text file with one record id per line"
        ) from exc
    return [line.strip() for line in text.splitlines() if line.strip()]


def _print_forget(plan: dict[str, Any], console: Console) -> None:
    table = Table(
        "id",
        "agent",
        "session",
        "time",
        "text",
        title=f"would delete {plan['records']} records (first {len(plan['preview'])} shown)",
    )
    for row in plan["preview"]:
        table.add_row(*(Text(str(row[key] or "")) for key in ("id", "agent", "session", "ts", "text")))
    console.print(table)
    console.print(
        f"and {plan['embeddings']} embeddings, {plan['history']} history rows; {plan['units_updated']} "
        f"units would lose sources, {plan['units_deleted']} units would be deleted; "
        f"{plan['snapshots']} snapshots rewritten",
        markup=False,
    )


@app.command()
def history(
    ctx: typer.Context,
    plot: bool = typer.Option(False, "--plot", help="Draw the growth chart in the terminal (plotext)."),
    png: Optional[Path] = typer.Option(None, "--png", help="Write the growth chart to this PNG file (matplotlib)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """The growth curve over compaction runs: raw vs active records, units and tokens."""
    from ..charts import series

    runs = call(ctx, "history")["runs"]
    curve = series(runs)
    if png is not None:
        from ..charts import png_chart

        png_chart(curve, str(png))
        stderr.print(f"wrote {png}")
    if as_json:
        emit_json({"runs": runs, "series": curve})
        return
    if not runs:
        stderr.print("no compaction runs yet")
        return
    if plot:
        from ..charts import terminal_chart

        stdout.out(
            terminal_chart(curve, width=min(stdout.width, 120), color=stdout.is_terminal and not stdout.no_color)
        )
        return
    if png is None:
        stdout.print(_history_table(runs))


def _history_table(runs: list[dict[str, Any]]) -> Table:
    """Fits 80 columns: the run's own suffix (its date is the start column), minutes not seconds;
    a cell too wide for the terminal wraps (fold), never ends in an ellipsis."""
    years = {(r["started"] or "")[:4] for r in runs}
    dated = len(years) > 1
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for header in (
        "#",
        "run",
        "started UTC" if dated else f"{years.pop()} UTC",
        "status",
        "raw",
        "active",
        "units",
        "tokens",
        "share",
    ):
        table.add_column(
            header,
            overflow="fold",
            justify="right" if header in ("#", "raw", "active", "units", "tokens", "share") else "left",
        )
    for number, run in enumerate(runs, start=1):
        raw, active = (
            run["raw"] or 0,
            run["active_after"] if run["active_after"] is not None else run["active_before"] or 0,
        )
        started = (run["started"] or "").replace("T", " ")[:16]
        table.add_row(
            str(number),
            run["run_id"].rsplit("-", 1)[-1],
            started if dated else started[5:],
            run["status"],
            str(raw),
            str(active),
            _cell(run["units"]),
            _cell(run["tokens_after"]),
            f"{100 * active / raw:.0f}%" if raw else "",
        )
    return table


def _cell(value: Any) -> str:
    return "" if value is None else str(value)
