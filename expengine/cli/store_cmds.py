"""Commands about getting data in and seeing what is stored: ingest, stats, rejects, reindex, config."""

from __future__ import annotations

import sys
from typing import Any, List, Optional

import typer
from rich.table import Table

from ..errors import InputError, RejectedLinesError
from ..ingest.remote import absolute_source
from .common import JSON_OPTION, app, call, emit_json, open_engine, progress_enabled, server, stderr, stdout, store_dir


@app.command()
def ingest(
    ctx: typer.Context,
    paths: Optional[List[str]] = typer.Argument(
        None, help="JSONL / .jsonl.gz / .json / .traj files, folders, or - for stdin."
    ),
    fmt: str = typer.Option(
        "auto", "--format", help="auto, native, openai-chat, otel, swe-agent, claude-code, codex or outcomes."
    ),
    strict: bool = typer.Option(
        False, "--strict", help="Exit non-zero if any line was rejected, or a file was mostly rejected or skipped."
    ),
    agent: Optional[str] = typer.Option(None, "--agent", help="Agent name for records that name none."),
    user_field: Optional[str] = typer.Option(
        None, "--user-field", help="Dotted path of each event's user where the log keeps it elsewhere (meta.customer)."
    ),
    outcomes: Optional[List[str]] = typer.Option(
        None, "--outcomes", help="An evaluation report grading the runs (sb-cli JSON, or JSONL of {session, outcome})."
    ),
    from_agents: bool = typer.Option(
        False, "--from-agents", help="Read every coding agent's logs where they live (PATHS: only these agents)."
    ),
    roots: Optional[List[str]] = typer.Option(
        None, "--root", help="With --from-agents: where to look for Aider histories."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Validate, redact, embed and store agent log events. Example: expengine ingest logs/*.jsonl"""
    if from_agents:
        _from_agents(ctx, paths or [], roots or [], strict=strict, as_json=as_json)
        return
    if not paths and not outcomes:  # PATHS may be left out only when --outcomes grades runs already stored
        from typer._click.exceptions import MissingParameter

        raise MissingParameter(ctx=ctx, param=next(p for p in ctx.command.params if p.name == "paths"))  # type: ignore[arg-type]
    try:
        result = _ingest(
            ctx,
            paths or [],
            format=fmt,
            strict=strict,
            agent=agent,
            user_field=user_field,
            outcomes=[absolute_source(p) for p in outcomes] if outcomes else None,
            progress=progress_enabled() and not as_json,
        )
    except RejectedLinesError as exc:
        if as_json:
            emit_json({"error": exc.message})
        raise
    for warning in [result.get("warning"), *result.get("file_warnings", [])]:
        if warning:
            stderr.print(f"warning: {warning}")
    if as_json:
        emit_json(result)
        return
    stdout.print(
        f"read {result['read']} · stored {result['stored']} · duplicates {result['duplicates']} · "
        f"rejected {result['rejected']} · redacted {result['redacted']} ({result['seconds']:.1f} s)"
    )
    skipped = result.get("skipped") or {}
    if skipped:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(skipped.items(), key=lambda kv: -kv[1]))
        stdout.print(f"skipped {sum(skipped.values())} line(s) with nothing to remember: {kinds}")
    for reject in result["rejects"][:10]:
        stderr.print(f"  rejected {reject['file']}:{reject['line']}: {reject['error']}")
    if result["rejected"] > 10:
        stderr.print(f"  … and {result['rejected'] - 10} more (see `expengine rejects`)")


def _from_agents(ctx: typer.Context, tools: list[str], roots: list[str], *, strict: bool, as_json: bool) -> None:
    from .agent_cmds import check_tools

    chosen = check_tools(tools)  # a usage mistake leaves no store folder behind
    with open_engine(ctx) as engine:
        result = engine.ingest_agents(chosen, roots, strict=strict, defer_index=True)
    if as_json:
        emit_json(result)
        return
    read = result.ingest
    stdout.print(
        f"{result.sources} sources: {result.read_sources} read ({result.bytes_read / 2**20:.1f} MiB), "
        f"{result.unchanged} unchanged · read {read.read} · stored {read.stored} · duplicates {read.duplicates} · "
        f"rejected {read.rejected} ({read.seconds:.1f} s)"
    )


def _ingest(ctx: typer.Context, paths: list[str], *, progress: bool, **args: Any) -> Any:
    """Through a server the paths go as absolute paths (the server reads them) and stdin as text."""
    client = server(ctx)
    if client is not None:
        if "-" in paths and len(paths) > 1:
            raise InputError("stdin (-) cannot be mixed with paths when a server runs", hint="ingest them separately")
        body: dict[str, Any] = {}
        if paths == ["-"]:
            body = {"text": sys.stdin.read()}
        elif paths:
            body = {"paths": [absolute_source(p) for p in paths]}
        return client.call("ingest", {**body, **args})
    from ..service import ops

    with open_engine(ctx) as engine:
        if not progress:
            return ops.run(engine, "ingest", {"paths": paths, **args})
        from rich.progress import Progress, SpinnerColumn, TextColumn

        with Progress(
            SpinnerColumn(), TextColumn("{task.completed} events stored"), console=stderr, transient=True
        ) as bar:
            task = bar.add_task("ingest")
            return ops.run(engine, "ingest", {"paths": paths, **args}, on_progress=lambda n: bar.advance(task, n))


@app.command()
def stats(
    ctx: typer.Context,
    weights: bool = typer.Option(False, "--weights", help="Weight distribution and the categories forgotten most."),
    by: Optional[str] = typer.Option(None, "--by", help="user: records, active, units and queries per user."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Counts of records by kind, agent and state; units; rejects; goals; size on disk."""
    if weights:
        _weights(ctx, as_json)
        return
    if by not in (None, "user"):
        raise InputError(f"--by {by}: unknown grouping", hint="use --by user")
    result = call(ctx, "stats")
    if by == "user":
        _by_user(result["by_user"], as_json)
        return
    if as_json:
        emit_json(result)
        return
    table = Table(title=f"store {result['store']}", show_header=True)
    table.add_column("what")
    table.add_column("count", justify="right")
    for label, value in (
        ("raw records", result["raw"]),
        ("active", result["active"]),
        ("dormant", result["dormant"]),
        ("archived", result["archived"]),
        ("knowledge units", result["units"]),
        ("rejects", result["rejects"]),
        ("active tokens", result["active_tokens"]),
        ("hot tokens / raw tokens", f"{result['hot_tokens']} / {result['raw_tokens']}"),
        ("size on disk (KiB)", result["size_bytes"] // 1024),
    ):
        table.add_row(label, str(value))
    for section, values in (("kind", result["by_kind"]), ("agent", result["by_agent"]), ("goal", result["goals"])):
        for key, value in values.items():
            table.add_row(f"{section}: {key}", str(value))
    stdout.print(table)


def _by_user(rows: dict[str, dict[str, int]], as_json: bool) -> None:
    if as_json:
        emit_json({"by_user": rows})
        return
    table = Table("user", "records", "active", "units", "queries")
    for user, counts in rows.items():
        table.add_row(user, *(str(counts[c]) for c in ("records", "active", "units", "queries")))
    stdout.print(table)


def _weights(ctx: typer.Context, as_json: bool) -> None:
    from ..charts import weight_bars

    result = call(ctx, "weights")
    if as_json:
        emit_json(result)
        return
    for name, label in (("memories", "active memories"), ("units", "active units")):
        dist = result[name]
        stdout.out(f"{label}: {dist['count']}, weight mean {dist['mean']}, median {dist['median']}, max {dist['max']}")
        for line in weight_bars(dist):
            stdout.out("  " + line)
    table = Table("category", "records", "forgotten", "share", title="forgotten most (dormant or archived)")
    for row in result["categories"]:
        table.add_row(row["category"], str(row["records"]), str(row["forgotten"]), f"{100 * row['share']:.0f}%")
    stdout.print(table)


@app.command()
def rejects(
    ctx: typer.Context,
    limit: int = typer.Option(100, "--limit", help="Show at most this many."),
    as_json: bool = JSON_OPTION,
) -> None:
    """List quarantined input lines with file, line and reason."""
    rows = call(ctx, "rejects", limit=limit)["rejects"]
    if as_json:
        emit_json({"rejects": rows})
        return
    if not rows:
        stderr.print("no rejected lines")
        return
    table = Table("file", "line", "error", "raw")
    for row in rows:
        table.add_row(row["file"], str(row["line"]), row["error"], (row["raw"] or "")[:60])
    stdout.print(table)


@app.command()
def reindex(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(
        None, "--model", help="Switch the store to this embedder for good and re-embed: minilm, multilingual or mixed."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Rebuild the LanceDB index from DuckDB (the source of truth)."""
    result = call(ctx, "reindex", model=model)
    if as_json:
        emit_json(result)
    else:
        stdout.print(f"reindexed {result['memories']} memories and {result['units']} units")


@app.command()
def repair(
    ctx: typer.Context,
    snapshot: Optional[str] = typer.Option(
        None, "--snapshot", help="Put back this snapshot (default: the newest good one)."
    ),
    force: bool = typer.Option(False, "--force", help="Put the snapshot back even when the database reads whole."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Put the newest good snapshot back in place of a damaged database, and list the files to ingest again.
    Runs in this process (stop `expengine serve` first): a damaged store cannot be served."""
    with open_engine(ctx, create=False) as engine:
        result = engine.repair(snapshot_id=snapshot, force=force)
    if as_json:
        emit_json(result.to_dict())
        return
    stdout.print(result.message)
    if result.damaged_copy:
        stderr.print(f"the damaged database is kept as {result.damaged_copy}")


config_app = typer.Typer(help="Show or write the store's config.toml.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("show")
def config_show(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Print the effective configuration (defaults, config.toml, then --set overrides)."""
    data = _config(ctx).to_dict()
    if as_json:
        emit_json(data)
        return
    import tomli_w

    stdout.print(tomli_w.dumps(data))


@config_app.command("init")
def config_init(ctx: typer.Context) -> None:
    """Write config.toml with every default (and any --set overrides) into the store folder."""
    from ..store.permissions import check_store_dir, private_files, secure_store_dir

    folder = store_dir(ctx)
    check_store_dir(folder)
    secure_store_dir(folder)
    with private_files():
        stderr.print(f"wrote {_config(ctx).save(folder)}")


def _config(ctx: typer.Context) -> Any:
    """The effective config needs no open store (so it also works while a server holds one)."""
    from ..config import Config

    base = Config.load(store_dir(ctx))
    overrides = (ctx.obj or {}).get("overrides")
    return base.with_overrides(overrides) if overrides else base
