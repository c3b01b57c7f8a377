"""The embedding cache: vectors kept in DuckDB under (text hash, model), so a text is embedded once.

A vector is kept as the bytes of `vector_bytes.STORED_TYPE` (a BLOB, read back in one go). A fresh
vector is rounded the same way before it is used, so a text gets the same vector whether it was just
embedded or read back. An archived memory's is kept as the float16 vector LanceDB held for it
(`ARCHIVED_TYPE`, flagged `float16`), in the cache and in its memo alike."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import duckdb
import numpy as np

from ..models.embedder import Embedder, mixed_halves
from ..models.mixed import DIMS, reads_multilingual, side_by_side
from .db import in_ids, insert_columns
from .filters import sql_str
from .recent_vectors import RecentVectors
from .vector_bytes import ARCHIVED_TYPE, STORED_TYPE, as_stored, blob_vectors, vector_bytes
from .vocabulary import INDEXED_RECORDS_SQL

if TYPE_CHECKING:
    from .index import Index

# the cache's table: content-addressed (a text's vector under one model never changes), so snapshots leave
# its rows out and a restore keeps the replaced store's (`store.chunks`, `carry_cache`)
CACHE_TABLE = "embeddings"

log = logging.getLogger("expengine.store")
# the memories LanceDB holds, and so whose vectors the cache leaves to it (`EmbeddingCache.drop_indexed`)
INDEXED_SQL = (
    f"{INDEXED_RECORDS_SQL} AND NOT EXISTS "
    "(SELECT 1 FROM pending_index p WHERE p.id = records.id AND p.target = 'memory')"
)
# the hashes (`text_hash`) of texts only memories in LanceDB hold: the vectors the cache leaves to it
ONLY_INDEXED_HASHES_SQL = (
    f"SELECT substr(sha256(text), 1, 32) FROM records WHERE {INDEXED_SQL} "
    f"EXCEPT SELECT substr(sha256(text), 1, 32) FROM records WHERE NOT {INDEXED_SQL}"
)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@dataclass
class EmbedCounts:
    """How many texts a call embedded and how many came from the cache (ingest reports both)."""

    embedded: int = 0
    cached: int = 0


# vectors a process keeps in memory: ~77 MB at 384 dimensions
MEMO_CAPACITY = 50_000


class VectorMemo:
    """The cached vectors a process read last, in memory. DuckDB reads a FLOAT[] column slowly: finding
    40 vectors among 70k cached texts scans the whole column (45-65 ms), which a query pays for the
    rules and archived sources it expands. A long-lived process (the server) reads each one once.
    Shared by a store's reader threads; a (model, text hash) always maps to the same vector."""

    def __init__(self, capacity: int = MEMO_CAPACITY):
        self.capacity = capacity
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        found = {}
        with self._lock:
            for h in hashes:
                vector = self._vectors.get((model, h))
                if vector is not None:
                    self._vectors.move_to_end((model, h))
                    found[h] = vector
        return found

    def put(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        with self._lock:
            for h, vector in vectors.items():
                self._vectors[(model, h)] = vector
                self._vectors.move_to_end((model, h))
            while len(self._vectors) > self.capacity:
                self._vectors.popitem(last=False)


def carry_cache(from_path: Path, to_path: Path) -> None:
    """Copy the cached vectors of the closed database `from_path` into the closed `to_path` (a snapshot's
    database before it replaces a store's), keeping those `to_path` has."""
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH {sql_str(str(from_path))} AS cache_from (READ_ONLY)")
        con.execute(f"ATTACH {sql_str(str(to_path))} AS cache_to")
        flagged = con.execute(
            "SELECT count(*) FROM duckdb_columns() WHERE database_name = 'cache_to' AND table_name = ? "
            "AND column_name = 'float16'",
            [CACHE_TABLE],
        ).fetchone()
        # a snapshot from before m012 reads every vector as float32: only those go into it
        columns, rows = (
            ("text_hash, model, vector, float16", "")
            if flagged and flagged[0]
            else ("text_hash, model, vector", " WHERE NOT float16")
        )
        con.execute(
            f"INSERT INTO cache_to.{CACHE_TABLE} ({columns}) SELECT {columns} FROM cache_from.{CACHE_TABLE}{rows} "
            "ON CONFLICT DO NOTHING"
        )
    except duckdb.Error as exc:  # only a cache: what is missing is embedded again when needed
        log.warning(f"notice: the embedding cache was not carried over ({str(exc).splitlines()[0]})")
    finally:
        con.close()


class EmbeddingCache:
    """One embedder's vectors in one store; the model is only asked for texts the cache lacks, so a
    fully cached run never loads it (pass a lazy embedder such as `LazyEmbedder`). `memo`: vectors
    already read, shared with the store's other caches (see `VectorMemo`). A mixed embedder's vectors
    are kept per half, each under its own model's name (`mixed_halves`), and put side by side here.
    `index`: the store's LanceDB, which holds the vectors of active and dormant memories; a cycle drops
    those from the cache (`drop_indexed`), and `encode(..., indexed=True)` reads them back from it.
    `persist=False` (a reader view's): what it embeds stays in the shared memo, never written, since a
    query thread's insert would race the writer's open transaction (DuckDB then refuses the writer's own
    insert of that text, a key committed where its transaction cannot see it, and a compaction fails).
    `recent`: the files of vectors embedded since the last cycle (`RecentVectors`), read after the table;
    `to_recent`: what this cache embeds goes there rather than into the table (ingest's writer, for the
    memories it also puts into LanceDB; not a mixed embedder's halves, which no cycle drops)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        embedder: Embedder,
        memo: VectorMemo | None = None,
        index: "Index | None" = None,
        *,
        persist: bool = True,
        recent: RecentVectors | None = None,
        to_recent: bool = False,
    ):
        self.con, self.embedder, self.index, self.persist = con, embedder, index, persist
        self.memo = memo if memo is not None else VectorMemo()
        self.recent = recent
        halves = mixed_halves(embedder)
        self.to_recent = to_recent and recent is not None and halves is None
        self.halves = (
            None
            if halves is None
            else tuple(EmbeddingCache(con, h, self.memo, persist=persist, recent=recent) for h in halves)
        )

    @property
    def name(self) -> str:
        """The cache key: the embedder's name (a lazy embedder knows it without loading)."""
        return self.embedder.name

    @property
    def dim(self) -> int:
        """Vector size, read from the cache when possible so the model stays unloaded."""
        if self.halves is not None:
            return sum(DIMS)
        row = self.con.execute(
            "SELECT octet_length(vector), float16 FROM embeddings WHERE model = ? LIMIT 1", [self.name]
        ).fetchall()
        if not row:
            return int(self.embedder.dim)
        return int(row[0][0]) // np.dtype(ARCHIVED_TYPE if row[0][1] else STORED_TYPE).itemsize

    def preload(self, texts: list[str]) -> int:
        """Read the cached vectors of `texts` into the memo in one scan (up to its capacity), embedding
        none: what a long-lived process does at start for the vectors queries will want. How many."""
        if self.halves is not None:
            english, multilingual = self.halves
            routed = [reads_multilingual(t) for t in texts]
            return english.preload([t for t, r in zip(texts, routed) if not r]) + multilingual.preload(
                [t for t, r in zip(texts, routed) if r]
            )
        wanted = list(dict.fromkeys(text_hash(t) for t in texts))[: self.memo.capacity]
        return len(self._read(self.name, wanted)) if wanted else 0

    def keep(self, texts: list[str]) -> int:
        """Make sure DuckDB holds the vectors of `texts`, taken from the memo or embedded, whatever the memo
        holds: a cycle does it for those queries read from the cache (`query.expand.cached_texts`), so that a
        query appends none (one appended row made DuckDB rewrite the cache's whole row group at the next
        checkpoint: +1.2 MB on the sample logs' store). How many it wrote."""
        if self.halves is not None:
            english, multilingual = self.halves
            routed = [reads_multilingual(t) for t in texts]
            return english.keep([t for t, r in zip(texts, routed) if not r]) + multilingual.keep(
                [t for t, r in zip(texts, routed) if r]
            )
        model, by_hash = self.name, {text_hash(t): t for t in texts}
        cached, hashes = in_ids("text_hash", list(by_hash))
        held = {
            h
            for (h,) in self.con.execute(
                f"SELECT text_hash FROM embeddings WHERE model = ? AND {cached}", [model, *hashes]
            ).fetchall()
        }
        missing = {h: t for h, t in by_hash.items() if h not in held}
        if missing:  # `encode` writes only what it embeds; the memo's vectors are written here
            self._write(model, dict(zip(missing, self.encode(list(missing.values())))))
        return len(missing)

    def seed(self, model: str, texts: list[str], vectors: np.ndarray) -> int:
        """Cache vectors embedded elsewhere (a fleet's embedding actors) when `model` is this cache's, so
        that `encode` finds them; how many texts. Another model's vectors are not this store's: none taken."""
        if self.halves is not None or model != self.name or not texts:
            return 0
        fresh = dict(zip((text_hash(t) for t in texts), as_stored(vectors)))
        self._write(model, fresh)
        self.memo.put(model, fresh)
        return len(fresh)

    def _read(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        """The vectors DuckDB, then the recent files, hold for `hashes`, kept in the memo."""
        cached, params = in_ids("text_hash", hashes)
        rows = self.con.execute(
            f"SELECT text_hash, vector, float16 FROM embeddings WHERE model = ? AND {cached}", [model, *params]
        ).fetchall()
        read = (
            dict(zip((h for h, _, _ in rows), blob_vectors([v for _, v, _ in rows], [f for _, _, f in rows])))
            if rows
            else {}
        )
        if self.recent is not None and len(read) < len(hashes):
            read.update(self.recent.get(model, [h for h in hashes if h not in read]))
        if read:
            self.memo.put(model, read)
        return read

    def encode(self, texts: list[str], counts: EmbedCounts | None = None, *, indexed: bool = False) -> np.ndarray:
        """Vectors for `texts` in order, embedding (and caching) only the ones not cached yet. `indexed`:
        the texts are mostly memories' (clustering, reindex), so what the cache lacks is looked for in
        LanceDB before it is embedded (a query's own text is not: it skips that lookup)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.halves is not None:
            return self._encode_halves(texts, counts)
        model = self.name
        hashes = [text_hash(t) for t in texts]
        cached = self.memo.get(model, set(hashes))
        unread = list(set(hashes) - cached.keys())
        if unread:
            cached.update(self._read(model, unread))
        unique_missing: dict[str, int] = {}
        for i, h in enumerate(hashes):
            if h not in cached:
                unique_missing.setdefault(h, i)
        if unique_missing and indexed:
            cached.update(self._from_index(model, {h: texts[i] for h, i in unique_missing.items()}))
            unique_missing = {h: i for h, i in unique_missing.items() if h not in cached}
        if unique_missing:
            new_vectors = as_stored(self.embedder.encode([texts[i] for i in unique_missing.values()]))
            fresh = dict(zip(unique_missing.keys(), new_vectors))
            if self.to_recent and self.recent is not None:
                self.recent.add(model, fresh)
            elif self.persist:
                self._write(model, fresh)
            self.memo.put(model, fresh)
            cached.update(fresh)
        if counts is not None:
            counts.embedded += len(unique_missing)
            counts.cached += len(texts) - sum(1 for h in hashes if h in unique_missing)
        return np.stack([cached[h] for h in hashes])

    def _write(self, model: str, vectors: dict[str, np.ndarray], *, archived: bool = False) -> None:
        """Cache `vectors` (hash -> vector); `archived`: as `ARCHIVED_TYPE` bytes, in place of a text's
        float32 row (its memory's vector is LanceDB's float16 one from now on)."""
        rows: dict[str, list[Any]] = {
            "text_hash": list(vectors),
            "model": [model] * len(vectors),
            "vector": vector_bytes(np.stack(list(vectors.values())), ARCHIVED_TYPE if archived else STORED_TYPE),
            "float16": [archived] * len(vectors),
        }
        conflict = "DO UPDATE SET vector = excluded.vector, float16 = true" if archived else "DO NOTHING"
        insert_columns(self.con, "embeddings", rows, f"ON CONFLICT {conflict}")

    def _indexes(self, model: str) -> bool:
        """Whether LanceDB's memory vectors are this model's: the encoder the store recorded as the one
        behind them (`store.vectors`). Not while a reindex to another model is under way."""
        if self.index is None or self.halves is not None:
            return False
        try:
            row = self.con.execute("SELECT value FROM store_meta WHERE key = 'vectors'").fetchone()
        except duckdb.CatalogException:  # a read-only store from before m009
            return False
        return row is not None and row[0] == model

    def _from_index(self, model: str, texts: dict[str, str]) -> dict[str, np.ndarray]:
        """hash -> vector of those `texts` (by hash) that LanceDB holds as a memory's, kept in the memo."""
        from .index import MEMORIES

        if not self._indexes(model):
            return {}
        said, params = in_ids("text", list(dict.fromkeys(texts.values())))
        rows = self.con.execute(f"SELECT id, text FROM records WHERE {INDEXED_SQL} AND {said}", params).fetchall()
        vectors = self.index.vectors(MEMORIES, [i for i, _ in rows]) if rows and self.index is not None else {}
        by_text = {t: vectors[i] for i, t in rows if i in vectors}
        found = {h: as_stored(by_text[t]) for h, t in texts.items() if t in by_text}
        self.memo.put(model, found)
        return found

    def drop_indexed(self) -> int:
        """Delete the cached vectors of the memories LanceDB holds (`INDEXED_SQL`), when they are this
        model's: the same vectors twice were a third of the sample logs' store. How many went.
        `encode(..., indexed=True)` reads them from LanceDB, and `keep_leaving` puts them back before
        their memories leave it. A text that a memory out of LanceDB holds too (archived, waiting out the
        observation window, or pending) keeps its vector, taken from LanceDB if the cache lost it: a query
        showing that memory would embed it again, and appending one row made DuckDB rewrite the cache's
        whole row group at the next checkpoint (+1.2 MB, a tenth of the sample logs' store)."""
        model = self.name
        if not self._indexes(model):
            self.settle_recent()
            return 0
        settled = self._settle_recent(model, leave_indexed=True)
        self._keep_shared(model)
        gone = self.con.execute(
            f"DELETE FROM embeddings WHERE model = ? AND text_hash IN ({ONLY_INDEXED_HASHES_SQL})",
            [model],
        ).fetchone()
        if self.recent is not None:
            self.recent.delete(settled)
        self.settle_recent()
        return int(gone[0]) if gone else 0

    def settle_recent(self, *, every_model: bool = False) -> None:
        """Put the recent files' vectors into the table and delete the files: those of other models than
        the one LanceDB holds (at a cycle, `drop_indexed`), or with `every_model` all (before a reindex
        makes LanceDB another model's)."""
        if self.recent is None:
            return
        for model in self.recent.models():
            if every_model or model != self.name or not self._indexes(model):
                self.recent.delete(self._settle_recent(model, leave_indexed=False))

    def _settle_recent(self, model: str, *, leave_indexed: bool) -> list[Path]:
        """Put the recent files' vectors of `model` into the table (`leave_indexed`: but those of texts only
        memories in LanceDB hold, which `drop_indexed` would delete at once); the files, for the caller to
        delete once the table has them. A vector the table holds already stays as it is."""
        if self.recent is None:
            return []
        return self.recent.move_into(self.con, model, leave=ONLY_INDEXED_HASHES_SQL if leave_indexed else None)

    def _keep_shared(self, model: str) -> None:
        """Cache, as `keep_leaving` does, LanceDB's vectors of the texts that memories out of it hold and
        the cache lacks, read from a memory in LanceDB with the same text (a store whose cycles dropped
        them before `drop_indexed` kept shared texts)."""
        from .index import MEMORIES

        rows = self.con.execute(
            f"WITH outside AS (SELECT DISTINCT text FROM records WHERE NOT {INDEXED_SQL}) "
            f"SELECT min(id), text FROM records WHERE {INDEXED_SQL} AND text IN (SELECT text FROM outside) "
            "AND substr(sha256(text), 1, 32) NOT IN (SELECT text_hash FROM embeddings WHERE model = ?) GROUP BY text",
            [model],
        ).fetchall()
        if not rows or self.index is None:
            return
        vectors = self.index.vectors(MEMORIES, [i for i, _ in rows])
        kept = {text_hash(t): vectors[i] for i, t in rows if i in vectors}
        if kept:
            self._write(model, kept, archived=True)
            self.memo.put(model, kept)

    def keep_leaving(self, ids: list[str]) -> None:
        """Cache the LanceDB vectors of memories about to leave it (archived): a query still reads the
        vectors of the archived sources it shows, and a revived memory is indexed again, from the cache.
        They are float16 numbers already (float32 in a table made before `lance_rows.VECTOR_TYPE` was float16:
        rounded then), so they are kept as float16 bytes in place of any float32 row of their texts, and
        the memo gets the same vectors, so this process reads what a later one will."""
        from .index import MEMORIES

        model = self.name
        if not ids or not self._indexes(model) or self.index is None:
            return
        vectors = self.index.vectors(MEMORIES, ids)
        where, params = in_ids("id", ids)
        texts = self.con.execute(f"SELECT id, text FROM records WHERE {where}", params).fetchall()
        kept = {text_hash(t): vectors[i] for i, t in texts if i in vectors}
        if kept:
            self._write(model, kept, archived=True)
            self.memo.put(model, kept)

    def _encode_halves(self, texts: list[str], counts: EmbedCounts | None) -> np.ndarray:
        """A mixed embedder's vectors: each text's from its half's cache, in that half's place."""
        english, multilingual = self.halves or ()
        return side_by_side(texts, lambda t: english.encode(t, counts), lambda t: multilingual.encode(t, counts))
