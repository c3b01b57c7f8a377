"""Commands made from their declarations (`operations.py`): the options come from the operation's
arguments dataclass (names, defaults, help), the call goes through `call` (the store's server, or
this process), and the answer is `--json` or the command's renderer. A renderer is the only
hand-written part of such a command; an operation without one prints a plain table."""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import re
import typing
from typing import Any, Callable, Optional

import typer

from ..errors import InputError
from ..operations import OPERATIONS, Operation
from .common import JSON_OPTION, app, call, emit_json, stdout

# A renderer: (the answer's JSON, the arguments given, the command's own extra options) -> prints it.
Renderer = Callable[..., None]
_RENDERERS: dict[str, tuple[Renderer, list[inspect.Parameter]]] = {}


def renders(name: str, *extra: inspect.Parameter) -> Callable[[Renderer], Renderer]:
    """Register the renderer of operation `name`, with options of the command line's own (e.g. --format)."""

    def register(render: Renderer) -> Renderer:
        _RENDERERS[name] = (render, list(extra))
        return render

    return register


def option(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)


def switches(name: str, meta: Any) -> tuple[str, str]:
    """The two flags of a yes/no/unset argument: `flag` ("--helpful/--harmful"), else --NAME/--no-NAME."""
    dashed = name.replace("_", "-")
    on, off = meta.get("flag", f"--{dashed}/--no-{dashed}").split("/")
    return on, off


def parameters(declared: type) -> tuple[list[inspect.Parameter], list[Callable[[dict[str, Any]], None]]]:
    """Typer parameters for each field of an arguments dataclass, and the folds that turn what the
    command line gave back into the fields' values (a flag that turns a True default off; the two
    flags of a yes/no/unset argument, which may not both be given)."""
    hints = typing.get_type_hints(declared)
    params: list[inspect.Parameter] = []
    folds: list[Callable[[dict[str, Any]], None]] = []
    for f in dataclasses.fields(declared):
        meta, annotation = f.metadata, hints[f.name]
        if f.default is dataclasses.MISSING:
            default: Any = typer.Argument(..., help=meta["help"], metavar=meta.get("metavar"))
        elif "off" in meta:
            flag, help_text = meta["off"]
            params.append(option(_name(flag), bool, typer.Option(False, flag, help=help_text)))
            folds.append(_turn_off(f.name, _name(flag)))
            continue
        elif annotation == Optional[bool]:
            on, off = switches(f.name, meta)
            params.append(option(_name(on), bool, typer.Option(False, on, help=meta["help"])))
            params.append(option(_name(off), bool, typer.Option(False, off, help=f"The opposite of {on}.")))
            folds.append(_yes_no(f.name, on, off))
            continue
        else:
            flags = (
                [meta["flag"], "--" + f.name.replace("_", "-")] if "flag" in meta else ["--" + f.name.replace("_", "-")]
            )
            default = typer.Option(f.default, *flags, help=meta["help"])
        if dt.datetime in typing.get_args(annotation):
            annotation = Optional[str]  # --since / --until: ISO-8601 text
        params.append(option(f.name, annotation, default))
    return params, folds


def _name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _turn_off(field: str, flag: str) -> Callable[[dict[str, Any]], None]:
    def fold(values: dict[str, Any]) -> None:
        values[field] = not values.pop(flag)

    return fold


def _yes_no(field: str, on: str, off: str) -> Callable[[dict[str, Any]], None]:
    def fold(values: dict[str, Any]) -> None:
        yes, no = values.pop(_name(on)), values.pop(_name(off))
        if yes and no:
            raise InputError(f"{on} and {off} contradict each other", hint="give one of them, or neither")
        values[field] = True if yes else False if no else None

    return fold


def command_for(op: Operation) -> Callable[..., None]:
    """The Typer command of a declared operation."""
    render, extra = _RENDERERS.get(op.name, (_plain, []))
    fields, folds = parameters(op.args)
    ctx = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    params = [ctx, *fields, *extra, option("as_json", bool, JSON_OPTION)]
    own = {p.name for p in extra}

    def command(ctx: typer.Context, as_json: bool, **values: Any) -> None:
        extras = {name: values.pop(name) for name in own}
        for fold in folds:
            fold(values)
        result = call(ctx, op.name, **values)
        if as_json:
            emit_json(result)
        else:
            render(result, values, **extras)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = op.help
    command.__name__ = op.name
    return command


def _plain(result: dict[str, Any], arguments: dict[str, Any]) -> None:
    """A list answer as a table of its rows; any other answer as one row of fields."""
    from rich.table import Table

    rows = next((v for v in result.values() if isinstance(v, list)), None) if len(result) == 1 else None
    rows = rows if rows is not None else [result]
    if not rows:
        stdout.print("none", style="dim")
        return
    columns = list(rows[0])
    cells = [[_cell(row[c]) for c in columns] for row in rows]
    widest = max(range(len(columns)), key=lambda i: max(len(r[i]) for r in cells))
    table = Table()
    for i, column in enumerate(columns):  # one line per row: the widest column clipped at 48, others at 24
        shortest = min(8, max(len(column), *(len(r[i]) for r in cells)))  # a narrow terminal clips, never hides
        table.add_column(
            column, no_wrap=True, overflow="ellipsis", min_width=shortest, max_width=48 if i == widest else 24
        )
    for row in cells:
        table.add_row(*row)
    stdout.print(table)


def _cell(value: Any) -> str:
    """One line; a time to the minute."""
    if value is None:
        return ""
    text = " ".join(str(value).split())
    return text[:16] if _TIME.match(text) else text


_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def register() -> None:
    """Every operation whose command line is made from its declaration, in declaration order."""
    for op in OPERATIONS.values():
        if op.cli:
            app.command(name=op.name)(command_for(op))
