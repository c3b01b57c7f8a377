"""Ingest's writes, overlapped with embedding: batch n+1 is embedded on a worker thread while batch n is
written (DuckDB, then LanceDB), so the encoder does not wait for the writes. Bounded: one batch
embedding, one being written. Writes stay in order on the calling thread, each batch in its own
transaction with its `pending_index` rows, so crash healing and replays are as without the overlap;
a batch embedded but never written leaves only cached vectors behind."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..store.db import CRON_TABLE_BLOCKS_BYTES, DB_ALIAS, drop_table_blocks, insert_columns, table_blocks_bytes
from ..store.embeddings import EmbedCounts, EmbeddingCache, VectorMemo
from ..store.index import MEMORIES
from ..store.lance_rows import memory_rows
from ..store.vectors import record_batch_encoder

if TYPE_CHECKING:
    from ..store.store import Store

# off: each batch is embedded, then written (what bench/ingest.py's "serial" rows measure)
OVERLAP = True


class BatchWriter:
    """Takes each batch's fresh rows (`submit`), embeds them on one worker thread through the store's
    embedding cache (on a cursor of its own: a DuckDB connection is used by one thread at a time) and
    writes the batch before meanwhile; `drain` writes the last one. `after_write(events, stored, counts)`
    runs after each batch is written: how many events it held, how many rows it stored, and what the
    embedding cache did (progress, the counts, the kill tests' pause)."""

    def __init__(self, store: "Store", after_write: Callable[[int, int, EmbedCounts], None], *, index: bool = True):
        self.store, self.after_write, self.index = store, after_write, index
        self._pool: ThreadPoolExecutor | None = None
        self._cache: EmbeddingCache | None = None
        self._pending: tuple[list[dict], int, Future] | None = None

    def _embed(self, texts: list[str]) -> tuple[np.ndarray, EmbedCounts]:
        counts = EmbedCounts()
        assert self._cache is not None
        return self._cache.encode(texts, counts), counts

    def submit(self, rows: list[dict], events: int) -> None:
        """Start embedding `rows` (the batch of `events` events, those not stored yet), and write the
        batch submitted before while it runs."""
        if self._pool is None:  # made at the first batch: after a new store has picked its embedder
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="expengine-embed")
            cursor = self.store.con.cursor()
            cursor.execute(f"USE {DB_ALIAS}")
            # an ingest that defers LanceDB (a cron run) ends with its process, and the next open reads its
            # vectors back from DuckDB: it keeps none in memory (2,000 session files: peak 316 -> 295 MB)
            memo = self.store.embeddings.memo if self.index else VectorMemo(0)
            # what LanceDB will hold goes to the recent files, out of DuckDB's cache table (store/recent_vectors.py);
            # a cron run's vectors stay in the table, for the open that indexes them
            self._cache = EmbeddingCache(
                cursor, self.store.embeddings.embedder, memo, recent=self.store.recent_vectors, to_recent=self.index
            )
        if not self.index and table_blocks_bytes(self.store.con) > CRON_TABLE_BLOCKS_BYTES:
            self.drain()  # the embedding done first: no other query runs while the limit is low
            drop_table_blocks(self.store.con)
        future = self._pool.submit(self._embed, [r["text"] for r in rows]) if rows else None
        if not OVERLAP and future is not None:
            future.result()
        self.drain()
        self._pending = (rows, events, future) if future is not None else None
        if future is None:
            self.after_write(events, 0, EmbedCounts())

    def drain(self) -> None:
        """Write the batch still embedding, if any (before an outcomes report is read, and at the end)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            rows, events, future = pending
            vectors, counts = future.result()
            write_batch(self.store, rows, vectors, index=self.index)
            self.after_write(events, len(rows), counts)

    def close(self) -> None:
        """Stop the worker (after `drain`, or when the ingest failed: a batch not written is dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._cache is not None:
            self._cache.con.close()
            self._cache = None
        self._pending = None


def write_batch(store: "Store", fresh: list[dict], vectors: np.ndarray, *, index: bool = True) -> None:
    """One batch into DuckDB (records, goals, feedback; `pending_index` marks them until LanceDB has
    them; the encoder's record, with the first batch), then into LanceDB. Without `index`, LanceDB's
    half is left to the next open that heals (`heal_pending`, from the vectors the cache keeps)."""
    con = store.con
    with store.transaction():
        insert_columns(con, "records", {k: [r[k] for r in fresh] for k in fresh[0] if k != "feedback_text"})
        ids = [r["id"] for r in fresh]
        con.execute("INSERT INTO pending_index SELECT unnest(?), 'memory' ON CONFLICT DO NOTHING", [ids])
        for r in fresh:
            _track_goal(store, r)
        record_batch_encoder(store)
    for r in fresh:
        if r["kind"] == "feedback" and r["feedback_target"]:
            from ..store.feedback import apply_feedback

            apply_feedback(
                store,
                target=r["feedback_target"],
                helpful=r["feedback_signal"] == "positive",
                note=r["feedback_text"],
                source=r["id"],
                missing_ok=True,
            )
    if not index:
        return
    store.index.add(MEMORIES, memory_rows(fresh, vectors, store.embeddings.dim), replace=False)
    con.execute("DELETE FROM pending_index WHERE id IN (SELECT unnest(?))", [ids])


def _track_goal(store: "Store", r: dict[str, Any]) -> None:
    """Keep `goals` current: goal records set status; outcome records close an open goal."""
    con = store.con
    if r["kind"] == "goal" and r["goal_id"]:
        con.execute(
            """
            INSERT INTO goals (goal_id, agent, session, description, status, long_term, opened, updated)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (goal_id) DO UPDATE SET
                description = COALESCE(goals.description, excluded.description),
                status = CASE WHEN excluded.updated >= goals.updated THEN excluded.status ELSE goals.status END,
                long_term = goals.long_term OR excluded.long_term,
                opened = LEAST(goals.opened, excluded.opened),
                updated = GREATEST(goals.updated, excluded.updated)
            """,
            [
                r["goal_id"],
                r["agent"],
                r["session"],
                r["goal_description"],
                r["goal_status"] or "open",
                bool(r["goal_long_term"]),
                r["ts"],
                r["ts"],
            ],
        )
    elif r["kind"] == "outcome" and r["goal_id"] and r["outcome"] in ("success", "failure"):
        status = "succeeded" if r["outcome"] == "success" else "failed"
        con.execute(
            """
            INSERT INTO goals (goal_id, agent, session, description, status, long_term, opened, updated)
            VALUES (?, ?, ?, NULL, ?, FALSE, ?, ?)
            ON CONFLICT (goal_id) DO UPDATE SET
                status = CASE WHEN goals.status = 'open' THEN excluded.status ELSE goals.status END,
                updated = GREATEST(goals.updated, excluded.updated)
            """,
            [r["goal_id"], r["agent"], r["session"], status, r["ts"], r["ts"]],
        )
