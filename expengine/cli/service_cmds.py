"""Service commands: serve (the store's long-lived server) and mcp (MCP tools over stdio)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..errors import InputError, NotFoundError
from ..operations import MAX_BODY_MB, MAX_SECONDS
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
    grace: float = typer.Option(
        30.0, "--grace", min=0.0, max=MAX_SECONDS, help="Seconds SIGTERM waits for a running write or compaction."
    ),
    max_body_mb: float = typer.Option(
        16.0,
        "--max-body-mb",
        min=0.001,
        max=MAX_BODY_MB,
        help="Largest ingest body accepted (HTTP 413 above); other requests: 1 MB.",
    ),
    ingest_root: List[str] = INGEST_ROOT,
    ui: bool = typer.Option(
        False, "--ui", help="Also serve the read-only memory browser at /ui (needs --http; log in with serve.token)."
    ),
    root: Optional[Path] = typer.Option(
        None, "--root", help="Serve every store of this fleet root: POST /v1/<name>/<op>, each with its own token."
    ),
    max_open: int = typer.Option(16, "--max-open", min=1, help="With --root: stores kept open at once."),
    idle: float = typer.Option(
        600.0, "--idle", min=0.0, max=MAX_SECONDS, help="With --root: seconds before an unused store is closed."
    ),
    shard_map: Optional[Path] = typer.Option(
        None, "--shard-map", help="With --root: a file of `<store> <shard>` lines; serve only --shard's stores."
    ),
    shard: Optional[str] = typer.Option(None, "--shard", help="With --shard-map: the shard this process is."),
) -> None:
    """Own the store in one long-lived process with the models loaded; the CLI and MCP then go through it.
    Listens on serve.sock in the store folder. Stop with SIGTERM: it exits within --grace seconds.
    With --root, serve many tenants over --http instead (see docs/guides/fleet.md)."""
    from ..service.edges import setup_logging

    if root is not None:
        if ui:
            raise InputError(
                "--ui serves one store; it does not go with --root",
                hint="serve one store: --store S serve --http PORT --ui",
            )
        _serve_fleet(
            root, http, max_open=max_open, idle=idle, shard_map=shard_map, shard=shard, max_body_mb=max_body_mb
        )
        return
    if ui and not http:
        raise InputError("--ui needs --http", hint="a browser reaches the server over TCP: serve --http PORT --ui")
    from ..service.server import serve as run

    setup_logging()  # after the usage checks: the handler keeps this process's stderr for good
    engine = open_engine(ctx)
    try:
        run(engine, http=http, grace=grace, max_body=int(max_body_mb * 2**20), ingest_roots=ingest_root, ui=ui)
    finally:
        engine.close()


def _serve_fleet(
    root: Path,
    http: Optional[str],
    *,
    max_open: int,
    idle: float,
    shard_map: Optional[Path],
    shard: Optional[str],
    max_body_mb: float,
) -> None:
    from ..fleet.tenants import Tenants, read_shard_map, serve_fleet
    from ..service.edges import setup_logging

    if not http:
        raise InputError("serve --root needs --http HOST:PORT (tenants connect over TCP with their tokens)")
    if (shard_map is None) != (shard is None):
        raise InputError("--shard-map and --shard go together", hint="e.g. --shard-map shards.txt --shard a")
    only = read_shard_map(shard_map, shard) if shard_map is not None and shard is not None else None
    setup_logging()
    tenants = Tenants(root.expanduser(), max_open=max_open, idle_s=idle, only=only)
    serve_fleet(tenants, http=http, max_body=int(max_body_mb * 2**20))


@app.command()
def mcp(
    ctx: typer.Context,
    ingest_root: List[str] = INGEST_ROOT,
    root: Optional[Path] = typer.Option(
        None,
        "--root",
        help="A fleet root: serve the store --store-name of it (through its `serve --root` if one runs).",
    ),
    store_name: Optional[str] = typer.Option(
        None, "--store-name", help="With --root: the tenant's store, <root>/<name>."
    ),
) -> None:
    """Serve the memory as MCP tools over stdio (memory_query, memory_ingest, memory_status, memory_feedback,
    memory_show, memory_stats, memory_units, memory_forget, memory_why). Uses a running `expengine serve` when
    there is one (its --ingest-root then applies), else opens the store itself."""
    from ..service.client import find_fleet_server, find_server
    from ..service.ingest_queue import drain_queues, dropped_on_sigterm
    from ..service.mcp_server import build

    if (root is None) != (store_name is None):
        raise InputError("--root and --store-name go together", hint="e.g. mcp --root /srv/fleet --store-name alpha")
    if root is None:
        from ..store.permissions import check_store_dir

        directory = store_dir(ctx)
        check_store_dir(directory)  # at start, not at the agent's first call: someone's folder is exit 2
        with dropped_on_sigterm():
            build(lambda: find_server(directory), lambda: open_engine(ctx), ingest_roots=ingest_root).run()
            drain_queues()  # the client is gone: store what it queued
        return
    from ..fleet import check_name, fleet_stores

    if (ctx.obj or {}).get("store"):
        raise InputError("--store and --root name two stores", hint="give one: --store DIR, or --root R --store-name N")
    name, fleet = check_name(store_name or ""), root.expanduser()
    if name not in fleet_stores(fleet):  # never a new folder in someone's root
        raise NotFoundError(f"no store {name!r} in the fleet root {fleet}", hint="check --store-name (`ls` the root)")
    ctx.obj = {**(ctx.obj or {}), "store": str(fleet / name)}
    with dropped_on_sigterm():
        build(lambda: find_fleet_server(fleet, name), lambda: open_engine(ctx), ingest_roots=ingest_root).run()
        drain_queues()
