"""Vectors as the embedding cache keeps them: the bytes of `STORED_TYPE`, one BLOB a vector (`m011_embeddings_blob`),
or of `ARCHIVED_TYPE` for archived memories' (`m012_embeddings_float16`); its own module, so the migrations that
convert a store's cache import no store code."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

# the cached vectors' numbers on disk: float16 halved the cache but moved compaction's choices (tau-bench
# gold tools 86.3% -> 75.8%, rules-only lift 0.526 -> 0.449), so they stay float32
STORED_TYPE = np.float32
# an archived memory's vector is the float16 one LanceDB held for it (`EmbeddingCache.keep_leaving`), so its
# float16 bytes lose nothing; they were three quarters of the sample logs' cache after 3 cycles
ARCHIVED_TYPE = np.float16


def vector_blobs(vectors: np.ndarray, dtype: type[np.floating] = STORED_TYPE) -> pa.Array:
    """Vectors as the cache stores them: one byte string of `dtype` numbers per row, converted in one go."""
    import pyarrow as pa

    rows: np.ndarray = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32).astype(dtype))
    width = rows.shape[1] * rows.itemsize if rows.ndim == 2 else 0
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(rows), [None, pa.py_buffer(rows.tobytes())])
    return fixed.cast(pa.binary())


def vector_bytes(vectors: np.ndarray, dtype: type[np.floating] = STORED_TYPE) -> list[bytes]:
    """The same byte strings as a list, for an insert that builds no Arrow array (`db.insert_columns`)."""
    rows: np.ndarray = np.asarray(vectors, dtype=np.float32).astype(dtype)
    return [row.tobytes() for row in rows]


def blob_vectors(blobs: list[bytes], halves: list[bool] | None = None) -> np.ndarray:
    """The float32 vectors of cached byte strings (all of one model, so of one dimension); `halves`: which
    hold `ARCHIVED_TYPE` numbers rather than `STORED_TYPE` ones (none when not given)."""
    if not halves or not any(halves):
        return np.frombuffer(b"".join(blobs), dtype=STORED_TYPE).reshape(len(blobs), -1).astype(np.float32)
    flags = np.asarray(halves, dtype=bool)
    width = len(blobs[int(np.argmax(flags))]) // np.dtype(ARCHIVED_TYPE).itemsize
    vectors = np.empty((len(blobs), width), dtype=np.float32)
    for rows, dtype in ((np.flatnonzero(flags), ARCHIVED_TYPE), (np.flatnonzero(~flags), STORED_TYPE)):
        if len(rows):
            joined = b"".join(blobs[i] for i in rows)
            vectors[rows] = np.frombuffer(joined, dtype=dtype).reshape(len(rows), width)
    return vectors


def as_stored(vectors: np.ndarray) -> np.ndarray:
    """Fresh vectors rounded to what the cache keeps, so reading them back changes nothing."""
    return np.asarray(vectors, dtype=np.float32).astype(STORED_TYPE).astype(np.float32)
