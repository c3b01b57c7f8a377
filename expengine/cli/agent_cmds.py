"""Commands about coding agents' logs where they live: `sources` lists them; `ingest --from-agents`
(in store_cmds) reads what is new in them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import InputError, NoStoreError
from ..ingest.discovery import TOOLS
from .common import JSON_OPTION, app, emit_json, open_engine, stderr, stdout

ROOTS = typer.Option(None, "--root", help="Where to look for Aider histories (project folders); repeatable.")


def check_tools(tools: list[str]) -> list[str] | None:
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        raise InputError(f"unknown agent {unknown[0]!r}", hint=f"name one of {', '.join(TOOLS)}")
    return tools or None


@app.command()
def sources(
    ctx: typer.Context,
    tools: Optional[List[str]] = typer.Argument(None, help=f"Only these agents ({', '.join(TOOLS)})."),
    roots: Optional[List[str]] = ROOTS,
    as_json: bool = JSON_OPTION,
) -> None:
    """Agent log locations found on this machine: tool, sessions, bytes, and what is not yet ingested."""
    from ..engine import Engine

    chosen = check_tools(tools or [])
    try:
        with open_engine(ctx, create=False) as engine:  # listing never makes a store folder
            rows = engine.sources(chosen, roots or [])
    except NoStoreError:
        rows = Engine.sources_unread(chosen, roots or [])
    if as_json:
        emit_json({"sources": [asdict(row) for row in rows]})
        return
    if not rows:
        stderr.print(f"no agent logs found (looked for {', '.join(TOOLS)}; Aider under --root)")
        return
    table = Table("tool", "sessions", "MiB", "new sessions", "new MiB")
    table.add_column("location", overflow="fold")
    for row in rows:
        cells: list[Any] = [row.sessions, f"{row.bytes / 2**20:.1f}", row.new_sessions, f"{row.new_bytes / 2**20:.1f}"]
        table.add_row(row.tool, *map(str, cells), escape(row.location))
    stdout.print(table)
