"""`fleet ingest`: backfill many stores from many log files on Ray, in two stages of plain Ray tasks.

1. One task per source file reads it with `ingest`'s own readers (parsing and validation, native
   JSONL, `.gz`, openai-chat), and routes every item to a store by `by` (agent, session or an event
   field); the driver puts each store's share in the object store.
2. One task per store (at most `max_parallel` at once) takes that store's lock and stores its items
   through `ingest`'s pipeline: the same redaction, assessment, embedding cache and writes, with the
   worker's embedding model loaded once and kept for the next store it gets. Lines that do not parse
   are rejects of the store their raw JSON names, else of `unrouted`, kept as `ingest` keeps them.

Ids are content hashes (or the event's own id), so running it again stores nothing twice. This is
`--runner tasks`, the default; `--runner data` does the same as one Ray Data pipeline (`fleet.dataflow`),
whose shuffle does not pass through the driver (see docs/scale.md for when each is the one to use)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ..results import Result
from .runtime import bounded, error_text, ray_session, task_options
from .writes import StoreIngest, route_key, store_items

RUNNERS = ("tasks", "data")


@dataclass
class FleetIngest(Result):
    root: str
    files: int = 0
    read: int = 0
    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    stores: list[StoreIngest] = field(default_factory=list)
    failed: int = 0
    seconds: float = 0.0
    records_per_s: float = 0.0


def read_and_route(path: str, by: str, fmt: str) -> dict[str, list[Any]]:
    """Stage 1, in a worker: one file's items by store (returned, so the driver owns them: an object a
    worker puts is lost with the worker, and Ray ends idle workers)."""
    from ..clock import utcnow
    from ..config import Config
    from ..ingest.readers import read_items

    cfg = Config().ingest
    routed: dict[str, list[Any]] = {}
    for item in read_items(
        path,
        fmt=fmt,
        max_line_bytes=cfg.max_line_bytes,
        max_document_bytes=cfg.max_document_bytes,
        agent=None,
        now=utcnow(),
    ):
        routed.setdefault(route_key(item, by), []).append(item)
    return routed


def write_store(path: str, parts: list[tuple[str, Any]], index_root: str | None = None) -> dict[str, Any]:
    """Stage 2, in a worker: store one store's items (file -> items) under its lock, as `ingest` does."""
    import ray

    preread: dict[str, list[Any]] = {}
    for file, ref in parts:
        preread.setdefault(file, []).extend(ray.get(ref))
    return store_items(Path(path), preread, index_root).to_dict()


def ingest_fleet(
    sources: list[str],
    *,
    root: str | Path,
    by: str = "agent",
    fmt: str = "auto",
    max_parallel: int = 2,
    address: str | None = None,
    worker_env: dict[str, str] | None = None,
    index_root: str | None = None,
    runner: str = "tasks",
) -> FleetIngest:
    """Backfill the stores under `root` from `sources` (see the module's docstring); `worker_env` as in
    `compact_fleet`. `index_root` (`s3://bucket/prefix`): a new store keeps its LanceDB at
    `<index_root>/<name>` (`place_index`). `runner`: "tasks" (plain Ray tasks, the two stages above) or
    "data" (one Ray Data pipeline, `fleet.dataflow`)."""
    if runner not in RUNNERS:
        from ..errors import InputError

        raise InputError(f"unknown runner {runner!r}", hint=f"use one of {', '.join(RUNNERS)}")
    from ..ingest.readers import expand_paths
    from ..ingest.remote import absolute_source

    started = time.perf_counter()
    base = Path(root).expanduser()
    base.mkdir(parents=True, exist_ok=True)
    files = [absolute_source(f) for f in expand_paths(sources)]
    result = FleetIngest(root=str(base), files=len(files))
    with ray_session(address) as ray:
        if runner == "data":
            from .dataflow import ingest_dataset

            stores = ingest_dataset(
                ray,
                files,
                root=base,
                by=by,
                fmt=fmt,
                max_parallel=max_parallel,
                worker_env=worker_env,
                index_root=index_root,
            )
            result.stores = [StoreIngest(**row) for row in stores]
        else:
            result.stores = _ingest_tasks(ray, files, base, by, fmt, max_parallel, worker_env, index_root)
    for row in result.stores:
        result.read += row.read
        result.stored += row.stored
        result.duplicates += row.duplicates
        result.rejected += row.rejected
    result.failed = sum(1 for r in result.stores if r.error)
    result.seconds = round(time.perf_counter() - started, 3)
    result.records_per_s = round(result.read / result.seconds, 1) if result.seconds else 0.0
    return result


def _ingest_tasks(
    ray: Any,
    files: list[str],
    base: Path,
    by: str,
    fmt: str,
    max_parallel: int,
    worker_env: dict[str, str] | None,
    index_root: str | None,
) -> list[StoreIngest]:
    """The two stages of plain tasks (see the module's docstring); one row per store."""
    reader = ray.remote(read_and_route).options(**task_options(worker_env))
    by_store: dict[str, list[tuple[str, Any]]] = {}
    reads = [partial(reader.remote, f, by, fmt) for f in files]
    for index, routed in bounded(ray, reads, max_parallel):
        if isinstance(routed, Exception):
            raise routed
        for name, items in routed.items():
            by_store.setdefault(name, []).append((files[index], ray.put(items)))
    writer = ray.remote(write_store).options(**task_options(worker_env))
    names = sorted(by_store)
    calls = [partial(writer.remote, str(base / n), by_store[n], index_root) for n in names]
    rows: dict[int, StoreIngest] = {}
    for index, value in bounded(ray, calls, max_parallel):
        failed = isinstance(value, Exception)
        rows[index] = StoreIngest(store=names[index], error=error_text(value)[:500]) if failed else StoreIngest(**value)
    return [rows[i] for i in range(len(names))]
