"""Refinement commands: refine; how units and trace print their answers."""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich.table import Table

from ..operations import MAX_SECONDS
from .common import JSON_OPTION, app, call, emit_json, stderr, stdout
from .operation_cmds import renders


@app.command()
def refine(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the units that would be written; change nothing."),
    max_llm_calls: Optional[int] = typer.Option(
        None, "--max-llm-calls", help="Model calls this cycle (default: refine.max_llm_calls)."
    ),
    time_limit: Optional[float] = typer.Option(
        None,
        "--time-limit",
        min=0.001,
        max=MAX_SECONDS,
        help="Seconds this cycle may take (default: refine.time_limit_s).",
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
        f"{report['units_superseded']} · sources to archive {report['archiving']} · {report['seconds']:.1f} s"
    )
    if report["llm_error"]:
        stderr.print(f"model unavailable, templates used: {report['llm_error']}")
    if report["clusters_left"]:
        stderr.print(f"{len(report['clusters_left'])} clusters left for the next cycle (budget)")
    for unit in report["units"][:20]:
        stdout.print(f"  {unit['id']} [{unit['kind']}/{unit['method']}] {unit['text']}")


@renders("units")
def units(result: dict[str, Any], arguments: dict[str, Any]) -> None:
    rows = result["units"]
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


@renders("trace")
def trace(result: dict[str, Any], arguments: dict[str, Any]) -> None:
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
