"""A small LanceDB table's vectors in memory, for an exact search in NumPy (`Index.held`)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .held_fragments import HELD_COLUMNS, HeldFragments, cosine_distances, estimated_bytes
from .lance_rows import float32_rows


class HeldVectors:
    """A table's vectors (float32, with their norms) and columns other than `text`, in memory as of one
    version of it, for an exact cosine search in NumPy: LanceDB's exact search of the 3,510 unit
    vectors at 100k memories took ~7 ms of a warm query; a matrix product over them takes well under 1
    ms and ranks them the same (both exact). Only a table without a vector index is held (an indexed
    one is searched approximately, and is large)."""

    def __init__(self, dataset: Any, files: Any):
        import pyarrow as pa

        self.dataset, self.files = dataset, files  # the kept dataset read, and its version files then
        rows = dataset.to_table(columns=[c for c in dataset.schema.names if c != "text"])
        column = rows.column("vector").combine_chunks()
        # LanceDB casts the query to the column's number type (float16 here) before comparing
        self.query_type = np.float16 if column.type.value_type == pa.float16() else np.float32
        self.vectors = float32_rows(column)
        self.norms = np.linalg.norm(self.vectors, axis=1)
        self.ids = np.array(rows.column("id").to_pylist(), dtype=object)
        self._row = {i: n for n, i in enumerate(self.ids.tolist())}
        # the filter columns, as NumPy arrays (strings as objects, timestamps as datetime64)
        self.columns = {
            name: rows.column(name).to_numpy(zero_copy_only=False)
            for name in rows.column_names
            if name not in ("id", "text", "vector")
        }

    def by_id(self, ids: list[str]) -> dict[str, np.ndarray]:
        """id → vector, for those of `ids` held (as `Index.vectors` reads them: float32 of the stored numbers)."""
        return {i: self.vectors[self._row[i]] for i in ids if i in self._row}

    def nearest(self, vector: np.ndarray, mask: np.ndarray | None, limit: int) -> list[tuple[str, float]]:
        """(id, cosine distance) of the `limit` rows in `mask` nearest to `vector`, nearest first (equal
        distances in table order), as LanceDB's exact cosine search gives them."""
        query = np.asarray(vector).astype(self.query_type).astype(np.float32)
        distances = cosine_distances(self.vectors, self.norms, query)
        rows = np.arange(len(distances)) if mask is None else np.flatnonzero(mask)
        if len(rows) > limit:
            rows = rows[np.argpartition(distances[rows], limit - 1)[:limit]]
        rows = rows[np.lexsort((rows, distances[rows]))]
        return list(zip(self.ids[rows].tolist(), distances[rows].tolist()))


class HeldTables:
    """Each small table's `HeldVectors`, and the memories' `HeldFragments` (`memories`), read again from
    the kept dataset when that is another (a commit or `forget_changed` reopened it) or the table's
    version files changed (any commit: a `stat` and a `listdir`; asking lancedb's table its version went
    through its event loop, ~0.3 ms idle and ~5 ms while searches run).
    A server's reader threads share them."""

    def __init__(self, memories_budget: int = 0) -> None:
        self._held: dict[str, HeldVectors] = {}
        self._lock = threading.Lock()
        self._memories: HeldFragments | None = None
        self._memories_budget = memories_budget  # bytes, `estimated_bytes`
        self._too_large: tuple[Any, Any] | None = None  # (dataset, version files) of memories found too large
        self._holding = False

    def current(self, name: str, dataset: Any, files: Any) -> HeldVectors:
        with self._lock:
            held = self._held.get(name)
            if held is None or held.dataset is not dataset or held.files != files:
                held = self._held[name] = HeldVectors(dataset, files)
            return held

    def holding(self, hold: bool = False) -> bool:
        """Whether the memories are held: from the first `hold` on, where a budget is set."""
        self._holding |= hold and self._memories_budget > 0
        return self._holding

    def memories(self, dataset: Any, files: Any) -> HeldFragments | None:
        """The memories' `HeldFragments` as of `dataset`, brought up to it from the ones held before (only
        new fragments are read); None while the table would take more than the budget, or lacks a column."""
        with self._lock:
            held = self._memories
            if held is not None and held.dataset is dataset and held.files == files:
                return held
            if self._too_large is not None and self._too_large[0] is dataset and self._too_large[1] == files:
                return None
            rows, dim = dataset.count_rows(), dataset.schema.field("vector").type.list_size
            # a read-only store's table made before a column was added (`lance_rows.ADDED_COLUMNS`) lacks it
            lacking = any(c not in dataset.schema.names for c in HELD_COLUMNS)
            if lacking or estimated_bytes(rows, dim) > self._memories_budget:
                self._too_large, self._memories = (dataset, files), None
                return None
            self._memories = HeldFragments(dataset, files, before=held)
            return self._memories
