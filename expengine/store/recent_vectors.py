"""The vectors ingest embedded since the last cycle, in files beside the database instead of its cache table.

In the table they churned the file: each ingest call's vectors joined the cache's one small row group, which
DuckDB writes again whole at the call's checkpoint, and the cycle deleted them again once LanceDB held
them (on bench/nights.py the cache was 274 of the ~480 blocks a night freed, and so most of what
`Store.shed_free_blocks` rewrites). Here each write is one file, never changed. The cycle moves the
vectors of the texts LanceDB does not hold into the cache table and deletes the files
(`EmbeddingCache.drop_indexed`), so the cycle still reads the float32 vectors ingest made, not LanceDB's
float16 ones. Content-addressed like the cache: a lost or unreadable file costs a lookup in LanceDB or an
embedding, never a wrong vector.

A lookup asks every file, so their number is kept small however many calls wrote them (an agent that
ingests each turn, or a backfill of 1M records with no cycle between): files carry a level, a write's
file is level 0, and `FAN_IN` files of one level are merged into one file of the next. A vector is
written about log_FAN_IN(files) times, and a store holds at most (FAN_IN - 1) files a level. Past a
fixed cap of files the vectors went to the cache table instead, whose lookups and inserts grew with it
(at 1M records, 40 s of a 64 s chunk of 20k). Each file holds its text hashes sorted, then its vectors:
a process reads the hashes (32 bytes a row) of a file once and maps its vectors, so a lookup is a
binary search per file."""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np

from .db import arrow_view
from .vector_bytes import vector_blobs

TMP_PREFIX = ".tmp-"
# files of one level merged into one of the next: at most FAN_IN - 1 a level stay for every lookup to ask
FAN_IN = 16
HASH_TYPE = "S32"  # `embeddings.text_hash`, as ASCII bytes
# rows of vectors copied at a time by a merge or a move into the table: its memory is this much, not the files'
MERGE_BLOCK_ROWS = 8192


def _model_key(model: str) -> str:
    return hashlib.sha256(model.encode("utf-8")).hexdigest()[:12]


def _level(path: Path) -> int:
    """A file's level, from its name `{model key}-{level}-{id}.npy` (level 0: a file named before levels)."""
    parts = path.stem.split("-")
    return int(parts[1]) if len(parts) == 3 else 0


@dataclass
class _File:
    """One file read: its hashes sorted, in memory; its vectors mapped. `order`: where each sorted hash's
    vector lies, for a file written before its rows were sorted (one array of (hash, vector) rows)."""

    hashes: np.ndarray
    vectors: np.ndarray
    order: np.ndarray | None = None

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """The vectors of the hashes at these sorted positions (a copy: the file may go)."""
        return np.array(self.vectors[positions if self.order is None else self.order[positions]], dtype=np.float32)


def _open(path: Path) -> _File | None:
    try:
        with open(path, "rb") as f:
            first = np.lib.format.read_array(f)
            if first.dtype.names:  # (hash, vector) rows, unsorted
                order = np.argsort(first["hash"], kind="stable")
                return _File(first["hash"][order], np.load(path, mmap_mode="r")["vector"], order)
            version = np.lib.format.read_magic(f)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(f)
            vectors = np.memmap(path, dtype=dtype, mode="r", offset=f.tell(), shape=shape) if shape[0] else None
            return _File(first, np.zeros(shape, dtype) if vectors is None else vectors)
    except (OSError, ValueError, EOFError):  # gone (a cycle or a merge took it) or cut short: only a cache
        return None


class RecentVectors:
    """One folder of files, each the sorted text hashes and float32 vectors of one model, named by a hash
    of the model's name (whose `.model` file holds the name) and the file's level; what each file read
    holds is kept in memory (the files never change, only go)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._files: dict[str, _File] = {}  # file name -> what it holds
        self._lock = threading.Lock()

    def files(self, model: str) -> list[Path]:
        if not self.folder.is_dir():
            return []
        key = _model_key(model)
        listed = sorted(self.folder.glob(f"{key}-*.npy"))
        names = {p.name for p in listed}
        with self._lock:
            for name in [n for n in self._files if n.startswith(key) and n not in names]:
                del self._files[name]
        return listed

    def models(self) -> list[str]:
        """The models whose vectors the files hold."""
        if not self.folder.is_dir():
            return []
        return sorted(
            path.read_text(encoding="utf-8")
            for path in self.folder.glob("*.model")
            if any(self.folder.glob(f"{path.stem}-*.npy"))
        )

    def _read(self, path: Path) -> _File | None:
        with self._lock:
            held = self._files.get(path.name)
        if held is None:
            held = _open(path)
            if held is not None:
                with self._lock:
                    self._files[path.name] = held
        return held

    def add(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        """Write `vectors` (hash -> vector) as one new file (whole or not at all: written aside, then
        renamed), then merge any level that reached `FAN_IN` files."""
        if not vectors:
            return
        named = self.folder / f"{_model_key(model)}.model"
        if not named.exists():
            self.folder.mkdir(exist_ok=True)
            aside = self.folder / (TMP_PREFIX + named.name)
            aside.write_text(model, encoding="utf-8")
            os.replace(aside, named)
        hashes = np.array(list(vectors), dtype=HASH_TYPE)
        order = np.argsort(hashes)
        stacked = np.stack(list(vectors.values())).astype(np.float32)
        self._write(_model_key(model), 0, hashes[order], [stacked[order]], stacked.shape[1])
        self._merge_full_levels(model)

    def _write(self, key: str, level: int, hashes: np.ndarray, vectors: Iterable[np.ndarray], dim: int) -> None:
        """One file of `hashes` (sorted), then their vectors, given in blocks in the same order."""
        self.folder.mkdir(exist_ok=True)
        name = f"{key}-{level}-{uuid.uuid4().hex}.npy"
        aside = self.folder / (TMP_PREFIX + name)
        with open(aside, "wb") as out:
            np.lib.format.write_array(out, hashes)
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False}
            np.lib.format.write_array_header_1_0(out, {**header, "shape": (len(hashes), dim)})
            for block in vectors:
                out.write(np.ascontiguousarray(block, dtype="<f4").tobytes())
        os.replace(aside, self.folder / name)

    def _merge_full_levels(self, model: str) -> None:
        """Merge the files of each level that holds `FAN_IN` into one of the next level; the merged file is
        in place before its sources go, so a kill between leaves the same vectors twice, never none."""
        key = _model_key(model)
        while True:
            levels: dict[int, list[Path]] = {}
            for path in self.files(model):
                levels.setdefault(_level(path), []).append(path)
            full = next((level for level in sorted(levels) if len(levels[level]) >= FAN_IN), None)
            if full is None:
                return
            sources = [f for f in (self._read(p) for p in levels[full]) if f is not None]
            if sources:
                merged = _Merged(sources)
                self._write(key, full + 1, merged.hashes, merged, merged.dim)
            self.delete(levels[full], leftovers=False)

    def get(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        """The vectors the files hold for `hashes`. A file gone since the listing (merged into a new one
        meanwhile) makes it list the folder again, once."""
        wanted, found = np.unique(np.array(hashes, dtype=HASH_TYPE)), dict[str, np.ndarray]()
        for _ in range(2):
            gone = False
            for path in self.files(model):
                if not len(wanted):
                    return found
                held = self._read(path)
                if held is None:
                    gone = True
                    continue
                if not len(held.hashes):
                    continue
                at = np.searchsorted(held.hashes, wanted).clip(max=len(held.hashes) - 1)
                hit = held.hashes[at] == wanted
                if hit.any():
                    found.update(zip((h.decode("ascii") for h in wanted[hit].tolist()), held.rows(at[hit])))
                    wanted = wanted[~hit]
            if not gone:
                break
        return found

    def everything(self, model: str) -> tuple[list[Path], dict[str, np.ndarray]]:
        """The files of `model` and every vector they hold."""
        files, vectors = self.files(model), dict[str, np.ndarray]()
        for path in files:
            held = self._read(path)
            if held is not None:
                every = held.rows(np.arange(len(held.hashes)))
                vectors.update(zip((h.decode("ascii") for h in held.hashes.tolist()), every))
        return files, vectors

    def move_into(self, con: duckdb.DuckDBPyConnection, model: str, *, leave: str | None) -> list[Path]:
        """Insert the vectors of `model` into the cache table (but those whose hash the query `leave`
        gives; a row the table holds stays as it is); the files they came from, for the caller to delete
        once the table has them. Streamed `MERGE_BLOCK_ROWS` rows at a time: after a backfill the files
        hold a vector per record."""
        import pyarrow as pa

        files = self.files(model)
        held = [f for f in (self._read(path) for path in files) if f is not None and len(f.hashes)]
        if not held:
            return files
        schema = pa.schema([("text_hash", pa.string()), ("vector", pa.binary())])

        def batches() -> Iterator[pa.RecordBatch]:
            for one in held:
                for start in range(0, len(one.hashes), MERGE_BLOCK_ROWS):
                    at = np.arange(start, min(start + MERGE_BLOCK_ROWS, len(one.hashes)))
                    yield pa.record_batch(
                        [pa.array(one.hashes[at].astype(str)), vector_blobs(one.rows(at))], schema=schema
                    )

        where = f"WHERE text_hash NOT IN ({leave}) " if leave else ""
        with arrow_view(con, "settled_vectors", pa.RecordBatchReader.from_batches(schema, batches())):
            con.execute(
                "INSERT INTO embeddings (text_hash, model, vector, float16) "
                f"SELECT text_hash, ?, vector, false FROM settled_vectors {where}ON CONFLICT DO NOTHING",
                [model],
            )
        return files

    def delete(self, files: list[Path], *, leftovers: bool = True) -> None:
        """Delete these files, and (`leftovers`) any a killed write left half made."""
        for path in files:
            path.unlink(missing_ok=True)
            with self._lock:
                self._files.pop(path.name, None)
        if leftovers and self.folder.is_dir():
            for path in self.folder.glob(f"{TMP_PREFIX}*"):
                path.unlink(missing_ok=True)

    def keep_only(self, live: set[str]) -> None:
        """Drop every vector whose hash is not in `live` (the texts of the records and units left after a
        `forget`): files holding any are written again without them, or deleted."""
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*.npy")):
            held = self._read(path)
            if held is None:
                continue
            kept = np.array([h.decode("ascii") in live for h in held.hashes.tolist()], dtype=bool)
            if kept.all():
                continue
            if kept.any():  # under a new name: a name always means the same rows (`_files`)
                rows = held.rows(np.flatnonzero(kept))
                self._write(path.name.split("-", 1)[0], _level(path), held.hashes[kept], [rows], rows.shape[1])
            self.delete([path])


class _Merged:
    """Files of one level as one sorted run: `hashes`, each once (the same text's
    vector is the same in every file), and their vectors in blocks of `MERGE_BLOCK_ROWS`."""

    def __init__(self, sources: list[_File]):
        self.sources = sources
        every = np.concatenate([f.hashes for f in sources])
        self.hashes, first = np.unique(every, return_index=True)
        self.source = np.repeat(np.arange(len(sources)), [len(f.hashes) for f in sources])[first]
        self.position = np.concatenate([np.arange(len(f.hashes)) for f in sources])[first]
        self.dim = int(sources[0].vectors.shape[-1])

    def __iter__(self) -> Iterator[np.ndarray]:
        for start in range(0, len(self.hashes), MERGE_BLOCK_ROWS):
            block = slice(start, start + MERGE_BLOCK_ROWS)
            source, position = self.source[block], self.position[block]
            vectors = np.empty((len(source), self.dim), dtype=np.float32)
            for n in np.unique(source):
                mine = source == n
                vectors[mine] = self.sources[n].rows(position[mine])
            yield vectors
