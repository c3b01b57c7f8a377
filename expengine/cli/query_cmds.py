"""Query commands: query, feedback, why, show."""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import sys
import typing
from typing import Any, Callable, Optional

import typer

from ..errors import InputError
from ..query.args import QueryArgs
from .common import JSON_OPTION, app, call, emit_json, stdout

FORMATS = ("prompt", "table")


def _short(text: str | None, width: int = 90) -> str:
    """One line, clipped (the consoles print it verbatim: markup is off)."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _query_options(run: Callable[..., None]) -> Callable[..., None]:
    """`run(ctx, arguments, fmt, as_json)` as a Typer command whose options are made from
    `QueryArgs`' fields: their names, defaults and help, so the CLI never drifts from the library."""
    hints = typing.get_type_hints(QueryArgs)
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    renamed: dict[str, str] = {}  # option name -> QueryArgs field it turns off
    for f in dataclasses.fields(QueryArgs):
        meta, annotation = f.metadata, hints[f.name]
        if f.default is dataclasses.MISSING:
            default: Any = typer.Argument(..., help=meta["help"])
        elif "off" in meta:
            flag, help_text = meta["off"]
            name = flag.lstrip("-").replace("-", "_")
            renamed[name] = f.name
            params.append(_option(name, bool, typer.Option(False, flag, help=help_text)))
            continue
        else:
            flag = "--" + f.name.replace("_", "-")
            flags = [meta["flag"], flag] if "flag" in meta else [flag]
            if annotation == Optional[bool]:
                flags = [f"{flag}/--no-{f.name.replace('_', '-')}"]
            default = typer.Option(f.default, *flags, help=meta["help"])
        if dt.datetime in typing.get_args(annotation):
            annotation = Optional[str]  # --since / --until: ISO-8601 text
        params.append(_option(f.name, annotation, default))
    params.append(
        _option(
            "fmt",
            Optional[str],
            typer.Option(None, "--format", help="prompt or table (default: table on a terminal, else prompt)."),
        )
    )
    params.append(_option("as_json", bool, JSON_OPTION))

    def command(ctx: typer.Context, fmt: Optional[str], as_json: bool, **values: Any) -> None:
        for option, turned_off in renamed.items():
            values[turned_off] = not values.pop(option)
        run(ctx, values, fmt, as_json)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = run.__doc__
    command.__name__ = run.__name__
    return command


def _option(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


@app.command()
@_query_options
def query(ctx: typer.Context, arguments: dict[str, Any], fmt: Optional[str], as_json: bool) -> None:
    """Ranked knowledge units and memories for a situation. Example: expengine query "get_weather returns 429" """
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", hint="use --format prompt or --format table")
    result = call(ctx, "query", **arguments)
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
    helped: bool = typer.Option(False, "--helpful", help="It helped the agent."),
    harmed: bool = typer.Option(False, "--harmful", help="It misled or harmed the agent."),
    note: Optional[str] = typer.Option(None, "--note", help="Why (kept in the item's history)."),
    restore: bool = typer.Option(False, "--restore", help="Bring a quarantined unit back into queries."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Report that a unit or memory helped or harmed; persistently harmful units are quarantined."""
    if helped and harmed:
        raise InputError("--helpful and --harmful contradict each other", hint="give one of them, or neither")
    helpful = True if helped else False if harmed else None
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
