"""The memories' rows in memory, fragment by fragment, for an exact vector search in NumPy
(`Index.held_memories`).

LanceDB's IVF-PQ search of the memories was ~7 ms of CPU of a warm query at 100k memories (half of it
the refinement's read of 200 candidates' vectors), and approximate: on the bench's queries it found 82%
of the exact 50 nearest, and other ones run to run. A matrix-vector product over the active memories'
float32 vectors (34k of 85k rows there) takes ~2.4 ms and is exact. The price is memory, 1.5 KB a row
for 384 dimensions (resident +175 MB at 100k, +1.9 GB at 1M), and a search's time grows with the rows
(80 ms at 1M against IVF-PQ's 15), so `query.held_memories_mb` bounds it and a larger table is
searched by LanceDB.

A Lance fragment's data files never change once written (an update deletes rows there and writes them
into a new fragment; a deletion only hides rows), so a new version of the table reads only the
fragments it has not held yet, and a fragment whose deletions changed reads only its row addresses."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .lance_rows import float32_rows

# the columns held besides the vector: what a search returns and what the query's filters compare
HELD_COLUMNS = ("id", "text", "state", "agent", "kind", "category", "outcome", "goal_id", "ts", "user")
# one held search result: (id, cosine distance, text, stored vector as float32)
Found = tuple[str, float, str, np.ndarray]
# a fragment's filter columns (Arrow) -> its rows that pass, or None when every row passes
MaskOf = Callable[[Any], np.ndarray | None]


def _content(fragment: Any) -> tuple:
    """What fixes a fragment's rows: its id and data files (its deletions aside)."""
    meta = fragment.metadata
    return meta.id, tuple((f.path, tuple(f.fields)) for f in meta.files), repr(getattr(meta, "overlays", None))


class FragmentRows:
    """One fragment's live rows as read, ordered by state (each state one contiguous slice, which a
    search reads alone: a memory's state changes only by its row moving to another fragment), with
    their float32 vectors and norms, ids, texts and filter columns."""

    def __init__(self, fragment: Any):
        import pyarrow as pa
        import pyarrow.compute as pc

        rows = fragment.to_table(columns=list(HELD_COLUMNS), with_row_address=True)
        rows = rows.take(pc.sort_indices(rows, sort_keys=[("state", "ascending")]))
        self.content = _content(fragment)
        self.deletions = fragment.metadata.deletion_file
        self.ids = np.array(rows.column("id").to_pylist(), dtype=object)
        self.texts = rows.column("text").combine_chunks()
        self.addresses = rows.column("_rowaddr").to_numpy()
        self.columns = rows.select([c for c in HELD_COLUMNS if c not in ("id", "text", "state")])
        self.live = np.ones(len(self.ids), dtype=bool)
        self.slices: dict[str, tuple[int, int]] = {}
        for n, state in enumerate(rows.column("state").to_pylist()):
            start, _ = self.slices.get(state, (n, n))
            self.slices[state] = (start, n + 1)
        vector = fragment.schema.field("vector").type
        # LanceDB casts the query to the column's number type (float16 here) before comparing
        self.query_type = np.float16 if vector.value_type == pa.float16() else np.float32
        # read in batches, each put in its row's place: the whole column at once (float16, then its
        # float32 copy, then the sorted copy) took ~3x the held bytes of resident memory at 100k
        self.vectors = np.empty((len(self.ids), vector.list_size), dtype=np.float32)
        place = np.zeros(fragment.metadata.physical_rows, dtype=np.int64)
        place[self.addresses & 0xFFFFFFFF] = np.arange(len(self.ids))
        for batch in fragment.to_batches(batch_size=4096, batch_readahead=2, columns=["vector"], with_row_address=True):
            offsets = batch.column("_rowaddr").to_numpy() & 0xFFFFFFFF
            self.vectors[place[offsets]] = float32_rows(batch.column("vector"))
        self.norms = np.linalg.norm(self.vectors, axis=1)

    def with_deletions_of(self, fragment: Any) -> "FragmentRows":
        """These rows as of `fragment`'s deletions (the same data files, more rows deleted)."""
        live = fragment.to_table(columns=["id"], with_row_address=True).column("_rowaddr").to_numpy()
        rows = object.__new__(FragmentRows)
        rows.__dict__.update(self.__dict__)
        rows.deletions = fragment.metadata.deletion_file
        rows.live = np.isin(self.addresses, live)
        return rows

    @property
    def nbytes(self) -> int:
        return self.vectors.nbytes + self.norms.nbytes + self.texts.nbytes + self.columns.nbytes


class HeldFragments:
    """A table's rows (`FragmentRows` per fragment) as of one version, for an exact cosine search."""

    def __init__(self, dataset: Any, files: Any, before: "HeldFragments | None" = None):
        self.dataset, self.files = dataset, files  # the kept dataset read, and its version files then
        known = {} if before is None else {f.content: f for f in before.fragments}
        self.fragments: list[FragmentRows] = []
        for fragment in dataset.get_fragments():
            rows = known.get(_content(fragment))
            if rows is None:
                rows = FragmentRows(fragment)
            elif rows.deletions != fragment.metadata.deletion_file:
                rows = rows.with_deletions_of(fragment)
            self.fragments.append(rows)

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.fragments)

    def nearest(self, vector: np.ndarray, states: tuple[str, ...], mask_of: MaskOf, limit: int) -> list[Found]:
        """(id, cosine distance, text, vector) of the `limit` rows in `states` that `mask_of` keeps
        nearest to `vector`, nearest first, as LanceDB's exact cosine search gives them (equal distances
        in fragment and row order)."""
        number_type = self.fragments[0].query_type if self.fragments else np.float32
        query = np.asarray(vector).astype(number_type).astype(np.float32)
        found: list[tuple[float, int, int]] = []  # (distance, fragment, row)
        for number, rows in enumerate(self.fragments):
            mask = mask_of(rows.columns)
            for state in states:
                start, stop = rows.slices.get(state, (0, 0))
                if start == stop:
                    continue
                distances = cosine_distances(rows.vectors[start:stop], rows.norms[start:stop], query)
                keep = rows.live[start:stop] if mask is None else rows.live[start:stop] & mask[start:stop]
                picked = np.flatnonzero(keep)
                if len(picked) > limit:
                    picked = picked[np.argpartition(distances[picked], limit - 1)[:limit]]
                found.extend(zip(distances[picked].tolist(), [number] * len(picked), (picked + start).tolist()))
        found.sort()
        return [
            (
                self.fragments[f].ids[r],
                d,
                self.fragments[f].texts[r].as_py(),
                self.fragments[f].vectors[r],
            )
            for d, f, r in found[:limit]
        ]


def cosine_distances(vectors: np.ndarray, norms: np.ndarray, query: np.ndarray) -> np.ndarray:
    """1 - the cosine of each row of `vectors` (whose norms are `norms`) to `query`."""
    # einsum, not `@`: OpenBLAS spreads a matrix-vector product over its threads, which spin (1.3 ms of
    # CPU against 0.3 on one thread for the units at 100k memories, and slower still on busy cores)
    dots = np.einsum("ij,j->i", vectors, query)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 - dots / (norms * np.linalg.norm(query))


def estimated_bytes(rows: int, dim: int) -> int:
    """What holding a table of `rows` vectors of `dim` costs, before it is read: the float32 vectors
    (the texts and filter columns add ~10% at 100k bench memories)."""
    return rows * dim * 4
