"""How query, feedback, why and show print their answers (their options come from operations.py)."""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from ..errors import InputError
from .common import stdout
from .operation_cmds import option, renders

FORMATS = ("prompt", "table")


def _short(text: str | None, width: int = 90) -> str:
    """One line, clipped (the consoles print it verbatim: markup is off)."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@renders(
    "query",
    option(
        "fmt",
        Optional[str],
        typer.Option(None, "--format", help="prompt or table (default: table on a terminal, else prompt)."),
    ),
)
def query(result: dict[str, Any], arguments: dict[str, Any], fmt: Optional[str]) -> None:
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", hint="use --format prompt or --format table")
    if (fmt or ("table" if sys.stdout.isatty() else "prompt")) == "prompt":
        if result["prompt"]:
            sys.stdout.write(result["prompt"] + "\n")
        return
    _print_table(result)


def _print_table(result: dict[str, Any]) -> None:
    from rich import box
    from rich.table import Table

    if not result["hits"]:
        stdout.print("no hits" if result.get("relevant", True) else "nothing relevant", style="dim")
        return
    table = Table(title=f"query: {_short(result['query'], 60)}  ({result['took_ms']:.0f} ms)", box=box.SIMPLE_HEAD)
    for column in ("#", "id", "type", "score", "sim", "W", "rec", "util"):
        wraps = column in ("id", "type")
        table.add_column(column, no_wrap=not wraps, overflow="fold", justify="left" if wraps else "right")
    table.add_column("text (sources)", ratio=1, min_width=36, overflow="fold")
    for n, hit in enumerate(result["hits"], start=1):
        p, sources = hit["parts"], hit["source_ids"]
        text = _short(hit["text"]) + (f" ({len(sources)} sources)" if len(sources) > 1 else "")
        for ev in hit["expanded"]:
            text += f"\n  ↳ {_short(ev['id'])} ({ev['state']}): {_short(ev['text'], 80)}"
        kind = hit["kind"] if hit["state"] == "active" else f"{hit['kind']} ({hit['state']})"
        table.add_row(
            str(n),
            _short(hit["id"]),
            f"{hit['type']} {kind}",
            f"{hit['score']:.3f}",
            f"{p['similarity']:.2f}",
            f"{p['weight']:.2f}",
            f"{p['recency']:.2f}",
            f"{p['utility']:+.2f}",
            text,
        )
    stdout.print(table)


@renders("feedback")
def feedback(result: dict[str, Any], arguments: dict[str, Any]) -> None:
    helpful = arguments["helpful"]
    verdict = "no report" if helpful is None else ("helpful" if helpful else "harmful")
    line = (
        f"{result['type']} {_short(result['id'])}: {verdict} · utility {result['utility']:+.2f} · "
        f"status {result['status']}"
    )
    if result["quarantined"]:
        line += " · quarantined (excluded from query; restore with --restore)"
    if result["restored"]:
        line += " · restored"
    stdout.print(line)


@renders("why")
def why(result: dict[str, Any], arguments: dict[str, Any]) -> None:
    text = arguments["text"]
    if not result["items"]:
        stdout.print("nothing set aside matches", style="dim")
        return
    from rich.table import Table

    table = Table("id", "type", "status", "sim", "W", "when", "what happened", "text", title=_short(text, 60))
    for item in result["items"]:
        into = item["merged_into"] or item["superseded_by"]
        happened = f"{item['step'] or '?'}: {_short(item['reason'], 60)}" + (f" → {into}" if into else "")
        status = item["status"] + (" → active" if item["revived"] else "")
        when = (item["when"] or "")[:16]
        table.add_row(
            item["id"],
            item["type"],
            status,
            f"{item['similarity']:.2f}",
            f"{item['weight']:.3g}",
            when,
            happened,
            _short(item["text"], 70),
        )
    stdout.print(table)


@renders("show")
def show(result: dict[str, Any], arguments: dict[str, Any]) -> None:
    from rich.table import Table

    fields = Table(title=f"{result['type']} {_short(result['id'])}", show_header=False)
    fields.add_column("field", style="bold")
    fields.add_column("value")
    for key, value in result["item"].items():
        if value not in (None, "", "[]"):
            fields.add_row(key, _short(str(value), 200))
    for key, value in result["scores"].items():
        fields.add_row(f"score: {key}", f"{value:.4g}")
    if result["merged_into"]:
        fields.add_row("merged into", result["merged_into"])
    if len(result["source_ids"]) > 1 or result["type"] == "unit":
        fields.add_row("stands for", ", ".join(result["source_ids"]))
    for unit in result["cited_by"]:
        fields.add_row("cited by", f"{unit['id']} ({unit['kind']}, {unit['status']}): {_short(unit['text'], 80)}")
    for source in result["sources"]:
        fields.add_row("source", f"{source['id']} ({source['state']}): {_short(source['text'], 80)}")
    stdout.print(fields)
    if result["history"]:
        history = Table("when", "action", "detail", "run", title="history")
        for row in result["history"]:
            history.add_row(str(row["happened_at"])[:19], row["action"], _short(row["detail"], 80), row["run_id"] or "")
        stdout.print(history)
