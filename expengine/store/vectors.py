"""Which encoder wrote a store's vectors, so that a query never compares vectors of two encoders.
Torch and fp32 ONNX MiniLM write vectors under one name (they agree to cosine 1.0000); int8 ONNX and
the multilingual model have names of their own. On `[embedder] encoder = "auto"` a store takes the
encoder of its record; one opened with an explicit encoder whose name differs from its record is
refused until `reindex` re-embeds it (the old vectors stay in the cache): `settle_encoder`, which
reads the record once per open. The record commits with the first batch of vectors
(`record_batch_encoder`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb

from ..errors import ModelError
from ..models.embedder import LazyEmbedder, embedder_name, packaged_model

if TYPE_CHECKING:
    from .store import Store

KEY = "vectors"


def _written_name(store: "Store") -> str | None:
    """The name in `store_meta`, if one was written."""
    try:
        row = store.con.execute("SELECT value FROM store_meta WHERE key = ?", [KEY]).fetchone()
    except duckdb.CatalogException:  # a read-only store from before m009
        row = None
    return str(row[0]) if row else None


def _name_before_the_record(store: "Store") -> str | None:
    """For a store made before the record, the name its config gave every encoder then (the int8 one
    did not exist); None for a store with no vectors yet."""
    if not _has_records(store):
        return None
    cfg = store.config.embedder
    return embedder_name(cfg.model_path, packaged_model(cfg.model))


def _has_records(store: "Store") -> bool:
    return bool(store.con.execute("SELECT count(*) FROM records").fetchone()[0])  # type: ignore[index]


def record_encoder(store: "Store", *, replace: bool = False) -> None:
    """Write the current encoder's name as the one behind the vectors, once the store has records (a
    session that passed `settle_encoder` wrote only its vectors), or (`replace`) after a reindex
    re-embedded them all."""
    if store.read_only:
        return
    name = store.embeddings.name
    if replace:
        store.con.execute("INSERT OR REPLACE INTO store_meta VALUES (?, ?)", [KEY, name])
    elif _has_records(store):
        store.con.execute("INSERT INTO store_meta VALUES (?, ?) ON CONFLICT DO NOTHING", [KEY, name])


def record_batch_encoder(store: "Store") -> None:
    """Inside the transaction that writes a batch of records: the encoder's name, unless one is recorded,
    so that a kill after the first batch never leaves int8 vectors that a later open reads as fp32 (the
    name `_name_before_the_record` gives a store with records and no record)."""
    store.con.execute("INSERT INTO store_meta VALUES (?, ?) ON CONFLICT DO NOTHING", [KEY, store.embeddings.name])


def settle_encoder(store: "Store", *, check: bool = True) -> bool:
    """The encoder of a store just opened, from its record read once. On encoder `auto`, an existing
    store gets the encoder its vectors were written with (an fp32 store stays fp32, with no reindex and
    no refusal); a new store keeps `auto`'s own (int8). An explicit encoder, or an embedder passed in,
    is left as it is. Then, with `check` (off while a reindex replaces the vectors), an encoder whose
    vectors are not the ones the store's index holds is refused. True when the record is written
    already and was checked, so `record_encoder` has nothing left to do for this session."""
    written = _written_name(store)
    recorded = written or _name_before_the_record(store)
    if recorded is not None and isinstance(store.embedder, LazyEmbedder):
        store.use_embedder(store.embedder.following(recorded))
    if not check:
        return False
    current = store.embeddings.name
    if recorded is None or recorded == current:
        return written is not None
    raise ModelError(
        f"this store's vectors were written by {recorded}, but the configured encoder writes {current} "
        "vectors, which are not interchangeable",
        hint="run `expengine reindex` to re-embed the store with it, or set [embedder] back in config.toml "
        '(encoder = "auto" takes the encoder of the store\'s vectors)',
    )
