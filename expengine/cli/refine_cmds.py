"""Refinement commands: refine, units, trace."""

from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from .common import JSON_OPTION, app, call, emit_json, stderr, stdout


@app.command()
def refine(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the units that would be written; change nothing."),
    max_llm_calls: Optional[int] = typer.Option(
        None, "--max-llm-calls", help="Model calls this cycle (default: refine.max_llm_calls)."
    ),
    time_limit: Optional[float] = typer.Option(
        None, "--time-limit", help="Seconds this cycle may take (default: refine.time_limit_s)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Turn changed clusters into grounded knowledge units. Example: expengine refine --dry-run"""
    report = call(ctx, "refine", dry_run=dry_run, max_llm_calls=max_llm_calls, time_limit_s=time_limit)
    if as_json:
        emit_json(report)
        return
    verb = "would write" if dry_run else "wrote"
    by_method = report["units_by_method"]
    stdout.print(
        f"{verb} {report['units_written']} units ({by_method.get('llm', 0)} by the model, "
        f"{by_method.get('template', 0)} from templates) from {report['clusters_refined']} of "
        f"{report['clusters_total']} clusters · unchanged {report['clusters_unchanged']} · superseded "
        f"{report['units_superseded']} · archived {report['archived']} · {report['seconds']:.1f} s"
    )
    if report["llm_error"]:
        stderr.print(f"model unavailable, templates used: {report['llm_error']}")
    if report["clusters_left"]:
        stderr.print(f"{len(report['clusters_left'])} clusters left for the next cycle (budget)")
    for unit in report["units"][:20]:
        stdout.print(f"  {unit['id']} [{unit['kind']}/{unit['method']}] {unit['text']}")


@app.command()
def units(
    ctx: typer.Context,
    agent: Optional[str] = typer.Option(None, "--agent", help="Only this agent's units."),
    user: Optional[str] = typer.Option(None, "--user", help="Only this user's personal units (notes, facts)."),
    status: Optional[str] = typer.Option(None, "--status", help="active, dormant, superseded or quarantined."),
    kind: Optional[str] = typer.Option(None, "--kind", help="rule, fact or note."),
    as_json: bool = JSON_OPTION,
) -> None:
    """List knowledge units with support, confidence and utility."""
    rows = call(ctx, "units", agent=agent, user=user, status=status, kind=kind)["units"]
    if as_json:
        emit_json({"units": rows})
        return
    if not rows:
        stderr.print("no units (run `expengine refine` or `expengine compact`)")
        return
    table = Table("id", "kind", "status", "support", "confidence", "utility", "method", "text")
    for u in rows:
        table.add_row(
            u["id"],
            u["kind"],
            u["status"],
            str(u["support"]),
            f"{u['confidence']:.2f}",
            f"{u['utility']:.2f}",
            u["method"],
            u["text"][:100],
        )
    stdout.print(table)


@app.command()
def trace(
    ctx: typer.Context,
    unit_id: str = typer.Argument(..., help="A unit id (see `expengine units`)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show a unit and every raw record it came from, archived ones included."""
    result = call(ctx, "trace", id=unit_id)
    if as_json:
        emit_json(result)
        return
    unit = result["unit"]
    stdout.print(
        f"{unit['id']} [{unit['kind']}, {unit['status']}, {unit['method']}] support {unit['support']} "
        f"confidence {unit['confidence']:.2f}"
    )
    stdout.print(unit["text"])
    table = Table("record", "ts", "state", "kind", "text")
    for r in result["records"]:
        table.add_row(r["id"], str(r["ts"])[:16], r["state"], r["kind"], r["text"][:100])
    stdout.print(table)
    if result["missing_source_ids"]:
        stderr.print(f"missing sources: {', '.join(result['missing_source_ids'])}")
