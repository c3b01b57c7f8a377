"""Fleet commands: a root folder of stores, one per agent or tenant, worked on with Ray (the `fleet` extra).

Exit codes: 0 all stores done, 1 some store failed (the others are done and listed), 2 a usage
mistake or the extra missing."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.table import Table

from ..errors import InputError
from .common import JSON_OPTION, app, emit_json, stderr, stdout

fleet_app = typer.Typer(
    help="Many stores under one root (<root>/<name>/): compact, ingest and report them with Ray.",
    no_args_is_help=True,
)
app.add_typer(fleet_app, name="fleet")

ROOT = typer.Option(..., "--root", help="The fleet root: a folder with one store folder per agent or tenant.")
ADDRESS = typer.Option(None, "--address", help="A Ray cluster to use (default: start a local Ray with 2 CPUs).")
PARALLEL = typer.Option(2, "--max-parallel", min=1, help="Stores worked on at once.")


def ray_installed() -> bool:
    try:
        return importlib.util.find_spec("ray") is not None
    except ValueError:  # a module set to None in sys.modules: treated as absent, as `import` does
        return False


@fleet_app.callback()
def fleet(ctx: typer.Context) -> None:
    """Checks the extra is installed before any fleet command runs."""
    if not ray_installed():
        from ..fleet import EXTRA_HINT

        raise InputError(f"the fleet commands need Ray: {EXTRA_HINT}")


def _share(value: Optional[float]) -> str:
    return "" if value is None else f"{value:.1%}"


def _finish(failed: int) -> None:
    if failed:
        stderr.print(f"{failed} store(s) failed; the others are done")
        raise typer.Exit(1)


@fleet_app.command("compact")
def compact(
    root: Path = ROOT,
    max_parallel: int = PARALLEL,
    address: Optional[str] = ADDRESS,
    no_refine: bool = typer.Option(False, "--no-refine", help="Skip refinement into knowledge units."),
    max_llm_calls: Optional[int] = typer.Option(None, "--max-llm-calls", help="Cap on LLM calls per store."),
    name: List[str] = typer.Option([], "--name", help="Only this store (repeatable)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """One compaction per store, one Ray task each; a lost worker's task is retried safely."""
    from ..fleet.cycles import compact_fleet

    report = compact_fleet(
        root,
        max_parallel=max_parallel,
        address=address,
        refine=not no_refine,
        max_llm_calls=max_llm_calls,
        names=name or None,
    )
    if as_json:
        emit_json(report)
    else:
        table = Table("store", "cycles", "hot before", "hot after", "seconds", "error", title=f"fleet {root}")
        for row in report.stores:
            table.add_row(
                row.store,
                str(row.cycles),
                _share(row.hot_share_before),
                _share(row.hot_share_after),
                f"{row.seconds:.1f}",
                row.error or "",
            )
        stdout.print(table)
        stdout.print(f"{len(report.stores)} stores in {report.seconds:.1f} s, {report.failed} failed")
    _finish(report.failed)


@fleet_app.command("ingest")
def ingest(
    sources: List[str] = typer.Argument(..., help="Log files or folders (native JSONL, .gz, openai-chat runs)."),
    root: Path = ROOT,
    by: str = typer.Option("agent", "--by", help="Route records to stores by agent, session or an event field."),
    fmt: str = typer.Option("auto", "--format", help="Input format, as `ingest --format`."),
    max_parallel: int = PARALLEL,
    address: Optional[str] = ADDRESS,
    index_root: Optional[str] = typer.Option(
        None, "--index-root", help="Keep each new store's LanceDB at URI/<name> (s3://bucket/prefix)."
    ),
    runner: str = typer.Option(
        "tasks", "--runner", help="tasks (plain Ray tasks) or data (one Ray Data pipeline, embedding on an actor pool)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Backfill: read and route on Ray, then store each store's records under its lock. Safe to rerun."""
    from ..fleet.ingest import ingest_fleet

    report = ingest_fleet(
        sources,
        root=root,
        by=by,
        fmt=fmt,
        max_parallel=max_parallel,
        address=address,
        index_root=index_root,
        runner=runner,
    )
    if as_json:
        emit_json(report)
    else:
        table = Table("store", "read", "stored", "duplicates", "rejected", "seconds", "error", title=f"fleet {root}")
        for row in report.stores:
            cells = (row.read, row.stored, row.duplicates, row.rejected, f"{row.seconds:.1f}", row.error or "")
            table.add_row(row.store, *map(str, cells))
        stdout.print(table)
        stdout.print(
            f"{report.read} records from {report.files} files into {len(report.stores)} stores "
            f"in {report.seconds:.1f} s ({report.records_per_s:.0f}/s): {report.stored} stored, "
            f"{report.duplicates} already there, {report.rejected} rejected"
        )
    _finish(report.failed)


@fleet_app.command("stats")
def stats(root: Path = ROOT, as_json: bool = JSON_OPTION) -> None:
    """Records, memories and hot share per store, and the fleet's totals."""
    from ..fleet.aggregate import fleet_stats

    data = fleet_stats(root)
    if as_json:
        emit_json(data)
    else:
        columns = ("raw", "active", "dormant", "archived", "units", "rejects")
        table = Table("store", *columns, "MiB", "hot share", title=f"fleet {root}")
        for row in [*data["stores"], {"store": "total", **data["totals"]}]:
            if "error" in row:
                table.add_row(row["store"], f"error: {row['error']}")
                continue
            mib = f"{row['size_bytes'] / 2**20:.1f}"
            table.add_row(row["store"], *(str(row[k]) for k in columns), mib, _share(row["hot_share"]))
        stdout.print(table)
    _finish(data["failed"])


@fleet_app.command("history")
def history(root: Path = ROOT, as_json: bool = JSON_OPTION) -> None:
    """Compaction cycles per store: how many, the last one, what they forgot, merged and refined."""
    from ..fleet.aggregate import fleet_history

    data = fleet_history(root)
    if as_json:
        emit_json(data)
    else:
        columns = ("cycles", "runs", "last_started", "forgotten", "merged", "purged", "refined")
        table = Table("store", *columns, title=f"fleet {root}")
        for row in data["stores"]:
            cells: list[Any] = [f"error: {row['error']}"] if "error" in row else [str(row[c] or "") for c in columns]
            table.add_row(row["store"], *cells)
        stdout.print(table)
        if data["never_compacted"]:
            stderr.print(f"never compacted: {', '.join(data['never_compacted'])}")
    _finish(data["failed"])
