"""Commands about getting data in and seeing what is stored: ingest, stats, rejects, reindex, config."""

from __future__ import annotations

from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import RejectedLinesError
from .common import JSON_OPTION, app, emit_json, open_engine, progress_enabled, stderr, stdout


@app.command()
def ingest(
    ctx: typer.Context,
    paths: List[str] = typer.Argument(..., help="JSONL / .jsonl.gz / .json files, folders, or - for stdin."),
    fmt: str = typer.Option("auto", "--format", help="auto, native or openai-chat."),
    strict: bool = typer.Option(False, "--strict", help="Exit non-zero if any line was rejected."),
    agent: Optional[str] = typer.Option(None, "--agent", help="Agent name for records that name none."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Validate, redact, embed and store agent log events. Example: expengine ingest logs/*.jsonl"""
    with open_engine(ctx) as engine:
        if progress_enabled() and not as_json:
            from rich.progress import Progress, SpinnerColumn, TextColumn

            with Progress(SpinnerColumn(), TextColumn("{task.completed} events stored"), console=stderr, transient=True) as bar:
                task = bar.add_task("ingest")
                try:
                    result = engine.ingest(paths, fmt=fmt, strict=strict, agent=agent,
                                           on_progress=lambda n: bar.advance(task, n))
                except RejectedLinesError:
                    raise
        else:
            try:
                result = engine.ingest(paths, fmt=fmt, strict=strict, agent=agent)
            except RejectedLinesError as exc:
                if as_json:
                    emit_json({"error": exc.message})
                raise
    if result.warning:
        stderr.print(f"warning: {escape(result.warning)}")
    if as_json:
        emit_json(result.to_dict())
        return
    stdout.print(
        f"read {result.read} · stored {result.stored} · duplicates {result.duplicates} · "
        f"rejected {result.rejected} · redacted {result.redacted} ({result.seconds:.1f} s)"
    )
    for reject in result.rejects[:10]:
        stderr.print(f"  rejected {reject.file}:{reject.line}: {reject.error}")
    if result.rejected > 10:
        stderr.print(f"  … and {result.rejected - 10} more (see `expengine rejects`)")


@app.command()
def stats(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Counts of records by kind, agent and state; units; rejects; goals; size on disk."""
    with open_engine(ctx) as engine:
        result = engine.stats()
    if as_json:
        emit_json(result.to_dict())
        return
    table = Table(title=f"store {result.store}", show_header=True)
    table.add_column("what")
    table.add_column("count", justify="right")
    for label, value in (
        ("raw records", result.raw), ("active", result.active), ("dormant", result.dormant),
        ("archived", result.archived), ("knowledge units", result.units), ("rejects", result.rejects),
        ("active tokens", result.active_tokens), ("hot tokens / raw tokens", f"{result.hot_tokens} / {result.raw_tokens}"),
        ("size on disk (KiB)", result.size_bytes // 1024),
    ):
        table.add_row(label, str(value))
    for section, values in (("kind", result.by_kind), ("agent", result.by_agent), ("goal", result.goals)):
        for key, value in values.items():
            table.add_row(f"{section}: {key}", str(value))
    stdout.print(table)


@app.command()
def rejects(
    ctx: typer.Context,
    limit: int = typer.Option(100, "--limit", help="Show at most this many."),
    as_json: bool = JSON_OPTION,
) -> None:
    """List quarantined input lines with file, line and reason."""
    with open_engine(ctx) as engine:
        rows = engine.rejects(limit=limit)
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
def reindex(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Rebuild the LanceDB index from DuckDB (the source of truth)."""
    with open_engine(ctx) as engine:
        result = engine.reindex()
    if as_json:
        emit_json(result)
    else:
        stdout.print(f"reindexed {result['memories']} memories and {result['units']} units")


config_app = typer.Typer(help="Show or write the store's config.toml.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("show")
def config_show(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Print the effective configuration (defaults, config.toml, then --set overrides)."""
    with open_engine(ctx) as engine:
        data = engine.config.to_dict()
    if as_json:
        emit_json(data)
        return
    import tomli_w

    stdout.print(tomli_w.dumps(data))


@config_app.command("init")
def config_init(ctx: typer.Context) -> None:
    """Write config.toml with every default (and any --set overrides) into the store folder."""
    with open_engine(ctx) as engine:
        path = engine.config.save(engine.store_dir)
    stderr.print(f"wrote {path}")
