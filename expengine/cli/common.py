"""Shared CLI plumbing: the Typer app, global options, consoles, JSON output, opening the engine."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.text import Text

from ..errors import InputError
from ..operations import MAX_SECONDS
from ..results import to_json

app = typer.Typer(
    name="expengine",
    help="An offline experience engine for LLM agents: memory that shrinks as the agent learns.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
# The one rendering path: markup and emoji codes are off on both consoles, so every string (table cells, titles,
# prompts, error lines) prints verbatim, `[/x]` included. Styling goes through `styled`, never through markup.
_NO_COLOR = bool(os.environ.get("NO_COLOR")) or None
stdout = Console(no_color=_NO_COLOR, highlight=False, markup=False, emoji=False, soft_wrap=True)
# soft_wrap: an error or log line stays one line whatever the terminal width (scripts grep it)
stderr = Console(stderr=True, no_color=_NO_COLOR, highlight=False, markup=False, emoji=False, soft_wrap=True)

JSON_OPTION = typer.Option(False, "--json", help="Print exactly one JSON object to stdout.")


@app.callback()
def global_options(
    ctx: typer.Context,
    store: Optional[str] = typer.Option(
        None,
        "--store",
        envvar="EXPENGINE_HOME",
        help="Store folder (default: EXPENGINE_HOME or ~/.local/share/expengine).",
    ),
    wait: float = typer.Option(
        30.0,
        "--wait",
        min=0.0,
        max=MAX_SECONDS,
        help="Seconds to wait for a busy store (e.g. during compaction).",
    ),
    set_: list[str] = typer.Option([], "--set", "-s", help="Override a config value for this run: section.key=value."),
    direct: bool = typer.Option(
        False, "--direct", help="Open the store in this process even when `expengine serve` runs for it."
    ),
) -> None:
    """Global options apply to every command."""
    if store is not None and not store.strip():  # Path("") is the current folder: never a store by accident
        raise InputError("--store is empty", hint="pass --store DIR, or unset an empty EXPENGINE_HOME")
    overrides: dict[str, Any] = {}
    for item in set_:
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(
                f"--set expects section.key=value, got {item!r}", hint="e.g. --set decay.theta_dormant=0.3"
            )
        overrides[key.strip()] = value.strip()
    ctx.obj = {"store": store, "wait": wait, "overrides": overrides, "direct": direct}


# the operations that may make the store they name; any other on a missing store is exit 3, leaving no
# empty store folder behind a mistyped --store
CREATES_STORE = {"ingest"}


def open_engine(ctx: typer.Context, *, create: bool = True):
    """Open the store named by the global options (imports the engine lazily, so --help stays fast);
    `create=False`: a missing store is an error, not a new empty one (commands that only read)."""
    from ..engine import Engine

    obj = ctx.obj or {}
    return Engine(
        store=obj.get("store"),
        overrides=obj.get("overrides") or None,
        lock_timeout=obj.get("wait", 30.0),
        create=create,
    )


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line with some parts styled, e.g. styled(("error:", "bold red"), " ", message); text is never markup."""
    return Text.assemble(*parts)


def store_dir(ctx: typer.Context) -> Path:
    from ..config import default_store_dir

    store = (ctx.obj or {}).get("store")
    return Path(store).expanduser() if store else default_store_dir()


def server(ctx: typer.Context) -> Any:
    """The client of a server running for this store, or None (direct mode). Imports no heavy module."""
    obj = ctx.obj or {}
    if obj.get("direct"):
        return None
    from ..service.client import find_server

    client = find_server(store_dir(ctx), wait=obj.get("wait", 30.0))
    if client is not None and obj.get("overrides"):
        raise InputError(
            "--set cannot change a running server's config",
            hint="pass --set to `expengine serve`, or stop the server and add --direct",
        )
    return client


def call(ctx: typer.Context, op: str, **args: Any) -> Any:
    """Run one operation and return its JSON: through the store's server when one answers, else here.
    Both paths give the same JSON, so every command renders one way whoever answered."""
    client = server(ctx)
    if client is not None:
        return client.call(op, args)
    from ..service import ops

    ops.lookup(op)
    with open_engine(ctx, create=op in CREATES_STORE) as engine:
        return ops.run(engine, op, args)


def emit_json(payload: Any) -> None:
    """Every `--json` answer goes out here: one object, one line, through the one serialiser."""
    sys.stdout.write(to_json(payload) + "\n")


def progress_enabled() -> bool:
    return sys.stderr.isatty()
