"""Derive the LanceDB tables from DuckDB: in full (`reindex`) or for ids a crash left pending."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .db import REINDEX_PENDING
from .index import MEMORIES, UNITS
from .lance_rows import ADDED_COLUMNS, memory_rows, unit_schema, with_vectors
from .vocabulary import INDEXED_RECORDS_SQL, LIVE_SQL, UNIT_EMBEDDED_TEXT

if TYPE_CHECKING:
    import pyarrow as pa

    from .store import Store

CHUNK = 2000  # rows read, embedded and written at a time
# store_meta: the `ADDED_COLUMNS` the LanceDB tables were last given (a rebuild makes them with every one)
COLUMNS_KEY = "lance_columns"


def _memory_batches(store: "Store", where: str):
    """The LanceDB rows of the records matching `where`, `CHUNK` at a time in id order (a query per
    chunk, so the connection is free between them): memory follows the chunk, not the store."""
    after = ""
    while True:
        cursor = store.con.execute(
            "SELECT id, agent, kind, category, outcome, goal_id, session, ts, state, user, text "
            f"FROM records WHERE ({where}) AND id > ? ORDER BY id LIMIT {int(CHUNK)}",
            [after],
        )
        names = [d[0] for d in cursor.description]
        chunk = [dict(zip(names, r)) for r in cursor.fetchall()]
        if not chunk:
            return
        after = chunk[-1]["id"]
        vectors = store.embeddings.encode([r["text"] for r in chunk], indexed=True)
        yield memory_rows(chunk, vectors, store.embeddings.dim)


def unit_rows(store: "Store", where: str, params: list[Any] | None = None) -> pa.Table:
    """The LanceDB rows of the units matching `where` (SQL with `?` placeholders bound to `params`)."""
    cursor = store.con.execute(
        f"SELECT id, agent, kind, category, status, updated AS ts, user, text, {UNIT_EMBEDDED_TEXT} AS embedded "
        f"FROM units WHERE {where} ORDER BY id",
        params or [],
    )
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, r)) for r in cursor.fetchall()]
    vectors = store.embeddings.encode([r.pop("embedded") for r in rows])
    return with_vectors(rows, vectors, unit_schema(store.embeddings.dim))


def rebuild(store: "Store") -> dict[str, int]:
    """Every row is read from DuckDB (and embedded, into the cache) before the old index is dropped: a
    damaged database fails in that first pass, with the index it would have replaced still whole. Then a
    second pass writes them, a chunk at a time, from the cache."""
    index = store.index
    for _ in _memory_batches(store, INDEXED_RECORDS_SQL):
        pass
    units = unit_rows(store, LIVE_SQL)
    index.drop(MEMORIES)
    index.drop(UNITS)
    memories = 0
    for batch in _memory_batches(store, INDEXED_RECORDS_SQL):
        index.add(MEMORIES, batch, replace=False)
        memories += batch.num_rows
    index.add(UNITS, units, replace=False)
    index.refresh_text_index(MEMORIES)
    index.refresh_text_index(UNITS)
    store.con.execute("DELETE FROM pending_index")
    return {"memories": memories, "units": units.num_rows}


def rebuild_if_pending(store: "Store") -> bool:
    """Rebuild LanceDB, with its scalar, text and vector indexes, where a restore left `REINDEX_PENDING`
    (the snapshot it put back holds no LanceDB): right after the restore, or at the next open when a
    kill came between. Vectors come from the embedding cache. Whether it rebuilt."""
    marker = store.dir / REINDEX_PENDING
    if store.read_only or not marker.exists():
        return False
    rebuild(store)
    refresh_indexes(store)
    marker.unlink(missing_ok=True)
    return True


def heal_pending(store: "Store") -> None:
    """Finish the LanceDB half of any write that a crash interrupted, and give tables made before a
    column was added it (`lance_rows.ADDED_COLUMNS`; run when a store is opened). Both read DuckDB
    first, so an open with nothing to heal never loads Lance (0.7 s of a cold hook's start-up)."""
    added = ",".join(sorted(ADDED_COLUMNS))
    row = store.con.execute("SELECT value FROM store_meta WHERE key = ?", [COLUMNS_KEY]).fetchone()
    if row is None or row[0] != added:
        store.index.add_missing_columns()
        store.con.execute("INSERT OR REPLACE INTO store_meta VALUES (?, ?)", [COLUMNS_KEY, added])
    if store.con.execute("SELECT count(*) FROM pending_index").fetchone()[0]:  # type: ignore[index]
        index_pending(store)


def index_pending(store: "Store") -> None:
    """Re-add what DuckDB committed but LanceDB may lack (`add` replaces by id, so no duplicates), and
    delete what DuckDB no longer indexes (a `forget` killed before it reached LanceDB)."""
    for name, target, table, indexed in (
        (MEMORIES, "memory", "records", INDEXED_RECORDS_SQL),
        (UNITS, "unit", "units", LIVE_SQL),
    ):
        gone = store.con.execute(
            f"SELECT id FROM pending_index p WHERE target = ? AND NOT EXISTS "
            f"(SELECT 1 FROM {table} t WHERE t.id = p.id AND {indexed})",
            [target],
        ).fetchall()
        store.index.delete(name, [r[0] for r in gone])
    where = f"id IN (SELECT id FROM pending_index WHERE target = 'memory') AND {INDEXED_RECORDS_SQL}"
    for batch in _memory_batches(store, where):
        store.index.add(MEMORIES, batch, replace=True)
    units = unit_rows(store, f"id IN (SELECT id FROM pending_index WHERE target = 'unit') AND {LIVE_SQL}")
    store.index.add(UNITS, units, replace=True)
    store.index.refresh_text_index(MEMORIES)
    store.con.execute("DELETE FROM pending_index")


TRAINED_KEY = "vector_index_trained:{}"  # store_meta: the rows a table's IVF-PQ index was last trained on


def refresh_indexes(store: "Store") -> dict[str, dict[str, bool]]:
    """Compact the tables' fragments, take the rows written since into their indexes, build the
    missing scalar and FTS indexes and, once a table has `query.index_above` rows, its IVF-PQ vector
    index (below that, exact search is fast enough), trained again when the table has grown by
    `query.index_retrain_growth` since its last training. Compaction calls this after it changes tables."""
    report = {}
    cfg = store.config.query
    for name in (MEMORIES, UNITS):
        key = TRAINED_KEY.format(name)
        row = store.con.execute("SELECT value FROM store_meta WHERE key = ?", [key]).fetchone()
        store.index.compact_files(name)
        trained = store.index.ensure_vector_index(
            name, min_rows=cfg.index_above, trained=int(row[0]) if row else None, growth=cfg.index_retrain_growth
        )
        store.index.update_indexes(name)
        store.index.refresh_scalar_indexes(name)
        store.index.refresh_text_index(name)
        if trained is None:
            store.con.execute("DELETE FROM store_meta WHERE key = ?", [key])
        else:
            store.con.execute("INSERT OR REPLACE INTO store_meta VALUES (?, ?)", [key, str(trained)])
        report[name] = {"vector_index": trained is not None, "text_index": store.index.count(name) > 0}
    # a process that holds the memories reads the rewritten fragments now, not in its next query (~1 s at 100k)
    store.index.held_memories()
    return report
