"""Vectors as the embedding cache keeps them: the bytes of `STORED_TYPE`, one BLOB a vector (`m011_embeddings_blob`);
its own module, so the migration that converts a store's cache imports no store code."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# the cached vectors' numbers on disk: float16 halved the cache but moved compaction's choices (tau-bench
# gold tools 86.3% -> 75.8%, rules-only lift 0.526 -> 0.449), so they stay float32
STORED_TYPE = np.float32


def vector_blobs(vectors: np.ndarray) -> pa.Array:
    """Vectors as the cache stores them: one float16 byte string per row, converted in one go."""
    rows = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32).astype(STORED_TYPE))
    width = rows.shape[1] * rows.itemsize if rows.ndim == 2 else 0
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(rows), [None, pa.py_buffer(rows.tobytes())])
    return fixed.cast(pa.binary())


def blob_vectors(blobs: list[bytes]) -> np.ndarray:
    """The float32 vectors of cached byte strings (all of one model, so of one length)."""
    return np.frombuffer(b"".join(blobs), dtype=STORED_TYPE).reshape(len(blobs), -1).astype(np.float32)


def as_stored(vectors: np.ndarray) -> np.ndarray:
    """Fresh vectors rounded to what the cache keeps, so reading them back changes nothing."""
    return np.asarray(vectors, dtype=np.float32).astype(STORED_TYPE).astype(np.float32)
