"""`fleet ingest --runner data`: the backfill as one Ray Data pipeline.

1. The sources are a dataset of file names; `flat_map` reads each with `ingest`'s own readers (native
   JSONL, `.gz`, openai-chat, from local paths or `s3://`) and routes every item to its store.
2. `map_batches` redacts each event with `ingest`'s redaction and the store's own `[ingest]` config
   (so no secret reaches Ray's object store or its spill files) and renders the text it will embed.
3. `map_batches` on an actor pool (`ActorPoolStrategy`, one actor per CPU given) embeds the texts: each actor loads the model once.
4. `groupby(store).map_groups` writes each store under its lock through `ingest`'s pipeline: the
   vectors go into the store's embedding cache first (`EmbeddingCache.seed`), so nothing is embedded
   twice; ids are content hashes, so a rerun stores nothing twice, and rejects stay with their store.

A store's whole share is one group (in one worker's memory at the write). The embedding runs before
the write knows what a store holds already: a rerun embeds again what the plain-task path
(`fleet.ingest`) would skip as duplicates."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from .runtime import cached_embedder

EMBED_BATCH = 256
# Ray's logical CPUs per stage: an actor that held a whole one left the 2-CPU local Ray no room to read
# (Ray Data backpressured the reads behind the idle actors), so the stages share: reading and
# redacting are light next to the encoder, and the write runs after the embedding is done
READ_CPUS = 0.25
EMBED_CPUS = 0.5
WRITE_CPUS = 0.5


def read_rows(row: dict[str, Any], *, by: str, fmt: str) -> list[dict[str, Any]]:
    """Stage 1 (`flat_map`): one source file's items, each with the store it routes to."""
    from ..clock import utcnow
    from ..config import Config
    from ..ingest.readers import read_items
    from .writes import route_key

    cfg = Config().ingest
    items = read_items(
        row["file"],
        fmt=fmt,
        max_line_bytes=cfg.max_line_bytes,
        max_document_bytes=cfg.max_document_bytes,
        agent=None,
        now=utcnow(),
    )
    return [{"store": route_key(item, by), "file": row["file"], "item": pickle.dumps(item)} for item in items]


def redact_rows(batch: dict[str, np.ndarray], *, root: str) -> dict[str, np.ndarray]:
    """Stage 2 (`map_batches`): each event redacted as `ingest` redacts it (its store's config), and the
    text its memory will embed."""
    from ..config import Config
    from ..ingest.events import render
    from ..ingest.pipeline import redact_event
    from ..ingest.redact import Redactor

    stores: dict[str, Any] = {}  # store -> its [ingest] config and redactor
    items, texts = [], []
    for name, blob in zip(batch["store"], batch["item"]):
        if name not in stores:
            cfg = Config.load(Path(root) / name).ingest
            stores[name] = (cfg, Redactor(enabled=cfg.redact))
        cfg, redactor = stores[name]
        item = pickle.loads(blob)
        text = ""
        if item.event is not None:
            item.redacted = redact_event(item.event, redactor)
            text = render(item.event)[: cfg.max_content_chars]
        items.append(pickle.dumps(item))
        texts.append(text)
    return {
        "store": batch["store"],
        "file": batch["file"],
        "item": np.array(items, dtype=object),
        "text": np.array(texts, dtype=object),
    }


class Embed:
    """Stage 3 (`map_batches` on an actor pool): the default model, loaded once per actor: a new store's
    encoder (int8 on `auto`). A store whose vectors another encoder wrote takes none of these
    (`EmbeddingCache.seed`) and embeds its own at the write, with the encoder of its record."""

    def __init__(self) -> None:
        from ..config import Config

        self.embedder = cached_embedder(Config().embedder)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [str(t) for t in batch["text"]]
        wanted = [i for i, t in enumerate(texts) if t]
        vectors = np.zeros((len(texts), self.embedder.dim), dtype=np.float32)
        if wanted:
            vectors[wanted] = self.embedder.encode([texts[i] for i in wanted])
        return {**batch, "vector": vectors, "model": np.array([self.embedder.name] * len(texts), dtype=object)}


def write_group(batch: dict[str, np.ndarray], *, root: str, index_root: str | None) -> dict[str, np.ndarray]:
    """Stage 4 (`map_groups`): one store's items stored under its lock, as `ingest` stores them, its
    vectors seeded into the store's embedding cache first."""
    from .writes import store_items

    preread: dict[str, list[Any]] = {}
    for file, blob in zip(batch["file"], batch["item"]):
        preread.setdefault(str(file), []).append(pickle.loads(blob))
    texts = [str(t) for t in batch["text"]]
    wanted = [i for i, t in enumerate(texts) if t]

    def seed(store: Any) -> None:
        if wanted:
            with store.transaction():
                store.embeddings.seed(str(batch["model"][0]), [texts[i] for i in wanted], batch["vector"][wanted])

    row = store_items(Path(root) / str(batch["store"][0]), preread, index_root, seed)
    return {"row": np.array([json.dumps(row.to_dict())], dtype=object)}


def ingest_dataset(
    ray: Any,
    files: list[str],
    *,
    root: Path,
    by: str,
    fmt: str,
    max_parallel: int,
    worker_env: dict[str, str] | None,
    index_root: str | None = None,
) -> list[dict[str, Any]]:
    """Run the pipeline over `files` into the stores under `root`; one report row per store."""
    from ..errors import ExpengineError

    # Ray Data retries a task whose worker died (its tasks' `max_retries` is -1), and a store's write
    # is safe to repeat; `worker_env` goes to every stage's workers (cloud credentials, a test's hook)
    env = {"env_vars": dict(worker_env)} if worker_env else None
    ds = ray.data.from_items([{"file": f} for f in files], override_num_blocks=max(1, len(files)))
    ds = ds.flat_map(read_rows, fn_kwargs={"by": by, "fmt": fmt}, num_cpus=READ_CPUS, runtime_env=env)
    ds = ds.map_batches(
        redact_rows, fn_kwargs={"root": str(root)}, batch_format="numpy", num_cpus=READ_CPUS, runtime_env=env
    )
    ds = ds.map_batches(
        Embed,
        batch_size=EMBED_BATCH,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=max(1, max_parallel)),
        num_cpus=EMBED_CPUS,
        runtime_env=env,
    )
    ds = ds.groupby("store", num_partitions=2 * max(1, max_parallel)).map_groups(
        write_group,
        fn_kwargs={"root": str(root), "index_root": index_root},
        batch_format="numpy",
        num_cpus=WRITE_CPUS,
        runtime_env=env,
    )
    try:
        rows = ds.take_all()
    except Exception as exc:  # a source that cannot be read: its own one-line error, not Ray's wrapping
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ExpengineError):
            cause = cause.__cause__ or getattr(cause, "cause", None)
        raise (cause or exc) from None
    return sorted((json.loads(r["row"]) for r in rows), key=lambda r: r["store"])
