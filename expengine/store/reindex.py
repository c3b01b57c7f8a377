"""Derive the LanceDB tables from DuckDB: in full (`reindex`) or for ids a crash left pending."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from .index import MEMORIES, UNITS, unit_schema

if TYPE_CHECKING:
    from ..engine import Engine

CHUNK = 2000
INDEXED_STATES = ("active", "dormant")


def _memory_batches(engine: "Engine", where: str):
    from ..ingest.pipeline import embed_cached, memory_rows

    cursor = engine.con.execute(
        f"SELECT id, agent, kind, category, outcome, goal_id, session, ts, state, text FROM records WHERE {where} ORDER BY id"
    )
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, r)) for r in cursor.fetchall()]
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        yield memory_rows(chunk, embed_cached(engine, [r["text"] for r in chunk]), engine.embedding_dim)


def unit_rows(engine: "Engine", where: str) -> pa.Table:
    from ..ingest.pipeline import embed_cached

    # a rule keyed by the situation is found by what is asked: its vector is its condition (the typical
    # requests of its intent), while full-text search still sees its whole text (tools, arguments)
    cursor = engine.con.execute(
        "SELECT id, agent, kind, category, status, updated AS ts, text, CASE WHEN cluster_key LIKE 'intent:%' "
        f"AND condition IS NOT NULL THEN condition ELSE text END AS embedded FROM units WHERE {where} ORDER BY id"
    )
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, r)) for r in cursor.fetchall()]
    vectors = embed_cached(engine, [r.pop("embedded") for r in rows])
    return pa.Table.from_pylist(
        [dict(r, vector=v.tolist()) for r, v in zip(rows, vectors)], schema=unit_schema(engine.embedding_dim)
    )


def rebuild(engine: "Engine") -> dict[str, int]:
    index = engine.index
    index.drop(MEMORIES)
    index.drop(UNITS)
    memories = 0
    for batch in _memory_batches(engine, f"state IN {INDEXED_STATES}"):
        index.add(MEMORIES, batch, replace=False)
        memories += batch.num_rows
    units = unit_rows(engine, "status = 'active'")
    index.add(UNITS, units, replace=False)
    index.refresh_text_index(MEMORIES)
    index.refresh_text_index(UNITS)
    engine.con.execute("DELETE FROM pending_index")
    return {"memories": memories, "units": units.num_rows}


def index_pending(engine: "Engine") -> None:
    """Re-add what DuckDB committed but LanceDB may lack; `add` replaces by id, so no duplicates."""
    where = f"id IN (SELECT id FROM pending_index WHERE target = 'memory') AND state IN {INDEXED_STATES}"
    for batch in _memory_batches(engine, where):
        engine.index.add(MEMORIES, batch, replace=True)
    units = unit_rows(engine, "id IN (SELECT id FROM pending_index WHERE target = 'unit') AND status = 'active'")
    engine.index.add(UNITS, units, replace=True)
    engine.index.refresh_text_index(MEMORIES)
    engine.con.execute("DELETE FROM pending_index")
