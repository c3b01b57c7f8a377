"""One store's share of a fleet backfill: where an item goes (`route_key`), where a new store keeps
its index (`place_index`), and the write under the store's lock (`store_items`), for both of
`fleet ingest`'s engines (plain tasks, `fleet.ingest`; Ray Data, `fleet.dataflow`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..results import Result
from . import store_name
from .runtime import error_text, store_engine

UNROUTED = "unrouted"


@dataclass
class StoreIngest(Result):
    store: str
    read: int = 0
    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    seconds: float = 0.0
    error: str | None = None


def route_key(item: Any, by: str) -> str:
    """The store an item belongs to: the event's `by` field (a top-level one, else one in `meta`), or
    for a reject the field of its raw JSON when it has one."""
    event = item.event
    if event is not None:
        value = getattr(event, by, None)
        if value is None and isinstance(event.meta, dict):
            value = event.meta.get(by)
    else:
        from ..ingest.events import EventError
        from ..ingest.items import parse

        try:
            raw = parse(item.raw or "")  # a reject's line may be cut, or nested past what json.loads can recurse
        except EventError:
            raw = None
        value = raw.get(by) if isinstance(raw, dict) else None
    return UNROUTED if value in (None, "") else store_name(value)


def store_items(
    path: Path,
    preread: dict[str, list[Any]],
    index_root: str | None = None,
    seed: Callable[[Any], None] | None = None,
) -> StoreIngest:
    """One store's items (file -> items) stored under its lock through `ingest`'s pipeline, after
    `seed(store)` (vectors embedded elsewhere); a failure is the row's error, never the fleet's."""
    from ..ingest.pipeline import ingest

    started = time.perf_counter()
    row = StoreIngest(store=path.name)
    try:
        if index_root:
            place_index(path, index_root)
        with store_engine(path) as engine, engine.session() as store:
            if seed is not None:
                seed(store)
            result = ingest(store, [], preread=preread)
        row.read, row.stored, row.duplicates, row.rejected = (
            result.read,
            result.stored,
            result.duplicates,
            result.rejected,
        )
    except Exception as exc:  # one store's failure must not stop the others
        row.error = error_text(exc)
    row.seconds = round(time.perf_counter() - started, 3)
    return row


def place_index(store_dir: Path, index_root: str) -> None:
    """Give the store its LanceDB at `<index_root>/<name>` (`[index] uri` in its config.toml), or check
    that it has it already: a store that keeps its index elsewhere is refused, not moved."""
    import tomli_w
    import tomllib

    from ..config import CONFIG_FILE, Config
    from ..errors import InputError
    from ..store.db import DB_FILE

    uri = f"{index_root.rstrip('/')}/{store_dir.name}"
    current = Config.load(store_dir).index.uri.rstrip("/")
    if current == uri:
        return
    if current or (store_dir / DB_FILE).exists():
        raise InputError(
            f"the store {store_dir.name} keeps its index {'at ' + current if current else 'in its lance/ folder'}, not at {uri}",
            hint="set [index] uri in its config.toml and run `expengine reindex` to move it, or leave out --index-root",
        )
    store_dir.mkdir(parents=True, exist_ok=True)
    path = store_dir / CONFIG_FILE
    data = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data.setdefault("index", {})["uri"] = uri
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
