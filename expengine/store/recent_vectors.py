"""The vectors ingest embedded since the last cycle, in files beside the database instead of its cache table.

In the table they churned the file: each ingest call's vectors joined the cache's one small row group, which
DuckDB writes again whole at the call's checkpoint, and the cycle deleted them again once LanceDB held
them (on bench/nights.py the cache was 274 of the ~480 blocks a night freed, and so most of what
`Store.shed_free_blocks` rewrites). Here each write is one file, never changed. The cycle moves the
vectors of the texts LanceDB does not hold into the cache table and deletes the files
(`EmbeddingCache.drop_indexed`), so the cycle still reads the float32 vectors ingest made, not LanceDB's
float16 ones. Content-addressed like the cache: a lost or unreadable file costs a lookup in LanceDB or an
embedding, never a wrong vector."""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from pathlib import Path

import duckdb
import numpy as np

from .db import arrow_view
from .vector_bytes import vector_blobs

TMP_PREFIX = ".tmp-"
# files of one model kept at most between cycles: every cache lookup of a new text lists the folder and
# asks each file, so an agent that ingests each turn (a hook, a server) writes to the table past this
MAX_FILES = 256


def _model_key(model: str) -> str:
    return hashlib.sha256(model.encode("utf-8")).hexdigest()[:12]


class RecentVectors:
    """One folder of files, each a NumPy array of (text hash, float32 vector) rows of one model, named by a
    hash of the model's name (whose `.model` file holds the name); the hashes of each file read are kept
    in memory (the files never change, only go)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._rows: dict[str, dict[str, int]] = {}  # file name -> text hash -> row
        self._lock = threading.Lock()

    def files(self, model: str) -> list[Path]:
        if not self.folder.is_dir():
            return []
        return sorted(self.folder.glob(f"{_model_key(model)}-*.npy"))

    def models(self) -> list[str]:
        """The models whose vectors the files hold."""
        if not self.folder.is_dir():
            return []
        return sorted(
            path.read_text(encoding="utf-8")
            for path in self.folder.glob("*.model")
            if any(self.folder.glob(f"{path.stem}-*.npy"))
        )

    def add(self, model: str, vectors: dict[str, np.ndarray]) -> bool:
        """Write `vectors` (hash -> vector) as one new file (whole or not at all: written aside, then
        renamed); False, writing nothing, when `MAX_FILES` of the model's are there already."""
        if not vectors:
            return True
        if len(self.files(model)) >= MAX_FILES:
            return False
        stacked = np.stack(list(vectors.values())).astype(np.float32)
        rows = np.zeros(len(vectors), dtype=[("hash", "S32"), ("vector", "<f4", (stacked.shape[1],))])
        rows["hash"] = [h.encode("ascii") for h in vectors]
        rows["vector"] = stacked
        named = self.folder / f"{_model_key(model)}.model"
        if not named.exists():
            self.folder.mkdir(exist_ok=True)
            aside = self.folder / (TMP_PREFIX + named.name)
            aside.write_text(model, encoding="utf-8")
            os.replace(aside, named)
        self._write(_model_key(model), rows)
        return True

    def _write(self, key: str, rows: np.ndarray) -> None:
        self.folder.mkdir(exist_ok=True)
        name = f"{key}-{uuid.uuid4().hex}.npy"
        aside = self.folder / (TMP_PREFIX + name)
        with open(aside, "wb") as out:
            np.save(out, rows)
        os.replace(aside, self.folder / name)

    def _read(self, path: Path) -> np.ndarray | None:
        try:
            return np.load(path, mmap_mode="r")
        except (OSError, ValueError):  # gone (a cycle moved it) or cut short: only a cache
            return None

    def get(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        """The vectors the files hold for `hashes`."""
        wanted, found = set(hashes), {}
        for path in self.files(model):
            with self._lock:
                index = self._rows.get(path.name)
            rows = self._read(path) if index is None or wanted & index.keys() else None
            if rows is None:
                continue
            if index is None:
                index = {h.decode("ascii"): n for n, h in enumerate(rows["hash"].tolist())}
                with self._lock:
                    self._rows[path.name] = index
            for h in wanted & index.keys():
                found[h] = np.array(rows["vector"][index[h]])
            wanted -= found.keys()
            if not wanted:
                break
        return found

    def everything(self, model: str) -> tuple[list[Path], dict[str, np.ndarray]]:
        """The files of `model` and every vector they hold."""
        files, vectors = self.files(model), dict[str, np.ndarray]()
        for path in files:
            rows = self._read(path)
            if rows is not None:
                vectors.update(zip((h.decode("ascii") for h in rows["hash"].tolist()), np.array(rows["vector"])))
        return files, vectors

    def move_into(self, con: duckdb.DuckDBPyConnection, model: str, *, leave: str | None) -> list[Path]:
        """Insert the vectors of `model` into the cache table (but those whose hash the query `leave`
        gives; a row the table holds stays as it is); the files they came from, for the caller to delete
        once the table has them."""
        import pyarrow as pa

        files, vectors = self.everything(model)
        if not vectors:
            return files
        rows = pa.table({"text_hash": list(vectors), "vector": vector_blobs(np.stack(list(vectors.values())))})
        where = f"WHERE text_hash NOT IN ({leave}) " if leave else ""
        with arrow_view(con, "settled_vectors", rows):
            con.execute(
                "INSERT INTO embeddings (text_hash, model, vector, float16) "
                f"SELECT text_hash, ?, vector, false FROM settled_vectors {where}ON CONFLICT DO NOTHING",
                [model],
            )
        return files

    def delete(self, files: list[Path]) -> None:
        """Delete these files, and any a killed write left half made."""
        for path in files:
            path.unlink(missing_ok=True)
            with self._lock:
                self._rows.pop(path.name, None)
        if self.folder.is_dir():
            for path in self.folder.glob(f"{TMP_PREFIX}*"):
                path.unlink(missing_ok=True)

    def keep_only(self, live: set[str]) -> None:
        """Drop every vector whose hash is not in `live` (the texts of the records and units left after a
        `forget`): files holding any are written again without them, or deleted."""
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*.npy")):
            rows = self._read(path)
            if rows is None:
                continue
            kept = np.array([h.decode("ascii") in live for h in rows["hash"].tolist()], dtype=bool)
            if kept.all():
                continue
            if kept.any():  # under a new name: a name always means the same rows (`_rows`)
                self._write(path.name.split("-", 1)[0], np.array(rows[kept]))
            del rows
            self.delete([path])
