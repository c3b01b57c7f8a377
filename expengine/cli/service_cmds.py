"""Service commands: serve (the store's long-lived server) and mcp (MCP tools over stdio)."""

from __future__ import annotations

from typing import List, Optional

import typer

from .common import app, open_engine, store_dir

INGEST_ROOT = typer.Option(
    [],
    "--ingest-root",
    help="A folder whose files clients may ingest by path (repeatable). Default: none, clients send records.",
)


@app.command()
def serve(
    ctx: typer.Context,
    http: Optional[str] = typer.Option(
        None, "--http", help="Also listen on TCP HOST:PORT (or PORT: 127.0.0.1), with the bearer token in serve.token."
    ),
    grace: float = typer.Option(30.0, "--grace", help="Seconds SIGTERM waits for a running write or compaction."),
    max_body_mb: float = typer.Option(
        16.0, "--max-body-mb", help="Largest ingest body accepted (HTTP 413 above); other requests: 1 MB."
    ),
    ingest_root: List[str] = INGEST_ROOT,
    ui: bool = typer.Option(
        False, "--ui", help="Also serve the read-only memory browser at /ui (needs --http; log in with serve.token)."
    ),
) -> None:
    """Own the store in one long-lived process with the models loaded; the CLI and MCP then go through it.
    Listens on serve.sock in the store folder. Stop with SIGTERM: it exits within --grace seconds."""
    from ..service.edges import setup_logging
    from ..service.server import serve as run

    setup_logging()
    engine = open_engine(ctx)
    try:
        run(engine, http=http, grace=grace, max_body=int(max_body_mb * 2**20), ingest_roots=ingest_root, ui=ui)
    finally:
        engine.close()


@app.command()
def mcp(ctx: typer.Context, ingest_root: List[str] = INGEST_ROOT) -> None:
    """Serve the memory as MCP tools over stdio (memory_query, memory_ingest, memory_status, memory_feedback,
    memory_show, memory_stats, memory_units, memory_forget). Uses a running `expengine serve` when there is one (its --ingest-root then applies),
    else opens the store itself."""
    from ..service.mcp_server import build

    build(store_dir(ctx), lambda: open_engine(ctx), ingest_roots=ingest_root).run()
