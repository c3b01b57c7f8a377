"""Query commands: query, feedback, why, show."""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from ..errors import InputError
from .common import JSON_OPTION, app, call, emit_json, stdout

FORMATS = ("prompt", "table")


def _short(text: str | None, width: int = 90) -> str:
    """One line, clipped (the consoles print it verbatim: markup is off)."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@app.command()
def query(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="The situation the agent is in, or what it is about to do."),
    k: int = typer.Option(5, "-k", "--k", help="At most this many hits."),
    agent: Optional[str] = typer.Option(None, "--agent", help="Only this agent's memories and units."),
    category: Optional[str] = typer.Option(None, "--category", help="Only this category."),
    kind: Optional[str] = typer.Option(
        None,
        "--kind",
        help="A record kind (message, tool_call, tool_result, …: memories only) or rule / fact (units only).",
    ),
    outcome: Optional[str] = typer.Option(None, "--outcome", help="success or failure (memories only)."),
    since: Optional[str] = typer.Option(None, "--since", help="Not older than this (ISO-8601, UTC)."),
    until: Optional[str] = typer.Option(None, "--until", help="Not newer than this (ISO-8601, UTC)."),
    goal: Optional[str] = typer.Option(None, "--goal", help="Only memories of this goal id."),
    budget: Optional[int] = typer.Option(
        None, "--budget", help="Stop adding hits when the prompt text would pass this many tokens."
    ),
    include_dormant: bool = typer.Option(False, "--include-dormant", help="Search dormant memories too."),
    expand: Optional[bool] = typer.Option(
        None, "--expand/--no-expand", help="Show a unit's sources most relevant to the query (default: on)."
    ),
    no_touch: bool = typer.Option(
        False, "--no-touch", help="Do not reinforce or log what is shown (the store is left unchanged)."
    ),
    session: Optional[str] = typer.Option(None, "--session", help="The asking session: its outcome credits the hits."),
    goal_id: Optional[str] = typer.Option(None, "--goal-id", help="The asking goal: its outcome credits the hits."),
    fmt: Optional[str] = typer.Option(
        None, "--format", help="prompt or table (default: table on a terminal, else prompt)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Ranked knowledge units and memories for a situation. Example: expengine query "get_weather returns 429" """
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", hint="use --format prompt or --format table")
    result = call(
        ctx,
        "query",
        text=text,
        k=k,
        touch=not no_touch,
        agent=agent,
        category=category,
        kind=kind,
        outcome=outcome,
        since=since,
        until=until,
        goal=goal,
        budget=budget,
        include_dormant=include_dormant,
        expand=expand,
        session=session,
        goal_id=goal_id,
    )
    if as_json:
        emit_json(result)
        return
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


@app.command()
def feedback(
    ctx: typer.Context,
    item_id: str = typer.Argument(..., metavar="ID", help="A unit or record id."),
    helpful: Optional[bool] = typer.Option(None, "--helpful/--harmful", help="Did it help the agent?"),
    note: Optional[str] = typer.Option(None, "--note", help="Why (kept in the item's history)."),
    restore: bool = typer.Option(False, "--restore", help="Bring a quarantined unit back into queries."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Report that a unit or memory helped or harmed; persistently harmful units are quarantined."""
    result = call(ctx, "feedback", id=item_id, helpful=helpful, note=note, restore=restore)
    if as_json:
        emit_json(result)
        return
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


@app.command()
def why(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="What the agent remembers, e.g. what the user once said."),
    limit: int = typer.Option(5, "--limit", help="At most this many items."),
    revive: bool = typer.Option(False, "--revive", help="Wake what is found (active again, with a history line)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """What the memory set aside that matches TEXT (sleeping, archived, merged, superseded) and why."""
    result = call(ctx, "why", text=text, limit=limit, revive=revive)
    if as_json:
        emit_json(result)
        return
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


@app.command()
def show(
    ctx: typer.Context,
    item_id: str = typer.Argument(..., metavar="ID", help="A record or unit id."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Everything about one record or unit: scores, state, provenance, history."""
    result = call(ctx, "show", id=item_id)
    if as_json:
        emit_json(result)
        return
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
