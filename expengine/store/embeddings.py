"""The embedding cache: vectors kept in DuckDB under (text hash, model), so a text is embedded once."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from ..models.embedder import Embedder
from .db import arrow_view


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@dataclass
class EmbedCounts:
    """How many texts a call embedded and how many came from the cache (ingest reports both)."""

    embedded: int = 0
    cached: int = 0


class EmbeddingCache:
    """One embedder's vectors in one store; the model is only asked for texts the cache lacks, so a
    fully cached run never loads it (pass a lazy embedder such as `LazyEmbedder`)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, embedder: Embedder):
        self.con, self.embedder = con, embedder

    @property
    def name(self) -> str:
        """The cache key: the embedder's name (a lazy embedder knows it without loading)."""
        return self.embedder.name

    @property
    def dim(self) -> int:
        """Vector size, read from the cache when possible so the model stays unloaded."""
        row = self.con.execute("SELECT len(vector) FROM embeddings WHERE model = ? LIMIT 1", [self.name]).fetchall()
        return int(row[0][0]) if row else int(self.embedder.dim)

    def encode(self, texts: list[str], counts: EmbedCounts | None = None) -> np.ndarray:
        """Vectors for `texts` in order, embedding (and caching) only the ones not cached yet."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self.name
        hashes = [text_hash(t) for t in texts]
        con = self.con
        cached = {
            h: np.asarray(v, dtype=np.float32)
            for h, v in con.execute(
                "SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN (SELECT unnest(?))",
                [model, list(set(hashes))],
            ).fetchall()
        }
        missing = [i for i, h in enumerate(hashes) if h not in cached]
        unique_missing: dict[str, int] = {}
        for i in missing:
            unique_missing.setdefault(hashes[i], i)
        if unique_missing:
            new_vectors = self.embedder.encode([texts[i] for i in unique_missing.values()])
            fresh = dict(zip(unique_missing.keys(), new_vectors))
            newvec = pa.table(
                {
                    "text_hash": list(fresh),
                    "model": [model] * len(fresh),
                    "vector": [v.tolist() for v in fresh.values()],
                }
            )
            with arrow_view(con, "newvec", newvec):
                con.execute("INSERT INTO embeddings SELECT text_hash, model, vector FROM newvec ON CONFLICT DO NOTHING")
            cached.update(fresh)
        if counts is not None:
            counts.embedded += len(unique_missing)
            counts.cached += len(texts) - len(missing)
        return np.stack([cached[h] for h in hashes])
