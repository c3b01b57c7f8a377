"""The rows of the two LanceDB tables: their schemas, Arrow tables of rows with their vectors, the
options that reach an index on object storage, and the Lance session every read shares."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

# the stored vectors' numbers: half floats halve the LanceDB folder and the snapshots' share of it (a
# unit vector's cosine to its float16 copy is 0.9999+; Lance searches float16 columns as it does float32
# ones). Tables made before keep float32: `Index.add` casts new rows to the table's own type. pyarrow is
# imported where it is used: a cron's ingest, which leaves LanceDB to the next open, never loads it
VECTOR_TYPE = np.float16


def _vector(dim: int) -> pa.DataType:
    import pyarrow as pa

    return pa.list_(pa.from_numpy_dtype(VECTOR_TYPE), dim)


def memory_schema(dim: int) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("id", pa.string()),
            ("agent", pa.string()),
            ("kind", pa.string()),
            ("category", pa.string()),
            ("outcome", pa.string()),
            ("goal_id", pa.string()),
            ("session", pa.string()),
            ("ts", pa.timestamp("us")),
            ("state", pa.string()),
            ("user", pa.string()),
            ("text", pa.string()),
            ("vector", _vector(dim)),
        ]
    )


def unit_schema(dim: int) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("id", pa.string()),
            ("agent", pa.string()),
            ("kind", pa.string()),
            ("category", pa.string()),
            ("status", pa.string()),
            ("ts", pa.timestamp("us")),
            ("user", pa.string()),
            ("text", pa.string()),
            ("vector", _vector(dim)),
        ]
    )


def memory_rows(rows: Iterable[dict], vectors: np.ndarray, dim: int) -> pa.Table:
    rows = list(rows)
    return with_vectors(
        [
            {
                "id": r["id"],
                "agent": r["agent"],
                "kind": r["kind"],
                "category": r["category"],
                "outcome": r.get("outcome"),
                "goal_id": r.get("goal_id"),
                "session": r.get("session"),
                "ts": r["ts"],
                "state": r.get("state") or "active",
                "user": r.get("user"),
                "text": r["text"],
            }
            for r in rows
        ],
        vectors,
        memory_schema(dim),
    )


def with_vectors(rows: list[dict], vectors: np.ndarray, schema: pa.Schema) -> pa.Table:
    """`rows` (every column of `schema` but the last, `vector`) with `vectors` as that column, converted
    from a NumPy array in one go (not number by number from Python lists)."""
    import pyarrow as pa

    field = schema.field("vector")
    table = pa.Table.from_pylist(rows, schema=pa.schema(list(schema)[:-1]))
    flat = np.asarray(vectors, dtype=np.float16 if field.type.value_type == pa.float16() else np.float32).reshape(-1)
    column = pa.FixedSizeListArray.from_arrays(pa.array(flat), field.type.list_size)
    return table.append_column(field, column)


def float32_rows(column: Any) -> np.ndarray:
    """A vector column (fixed-size lists of float16 or float32, chunked or not) as float32 rows, one a
    vector: what every read of stored vectors compares."""
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
    return flat.reshape(len(column), column.type.list_size)


# columns a table made before them lacks: `Index.add` adds them (NULL in the rows there) before it appends
ADDED_COLUMNS = {"user": "CAST(NULL AS STRING)"}


def as_table_vectors(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """`rows` with their vectors in the number type of the table they go into (float32 in a table made
    before `VECTOR_TYPE` was float16)."""
    import pyarrow as pa

    wanted = schema.field("vector").type
    at = rows.schema.get_field_index("vector")
    if rows.schema.field(at).type == wanted:
        return rows
    return rows.set_column(at, pa.field("vector", wanted), rows.column(at).cast(wanted))


def storage_options(endpoint: str = "", region: str = "") -> dict[str, str]:
    """LanceDB's options for an index on S3: the endpoint and region given, else the usual AWS variables
    (AWS_ENDPOINT_URL, AWS_REGION or AWS_DEFAULT_REGION), and the keys from AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN when set (else Lance's own chain: profile, instance role)."""
    env = os.environ
    endpoint = endpoint or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or ""
    region = region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or ""
    options = {
        key: value
        for key, value in (
            ("aws_endpoint", endpoint),
            ("aws_region", region),
            ("aws_access_key_id", env.get("AWS_ACCESS_KEY_ID", "")),
            ("aws_secret_access_key", env.get("AWS_SECRET_ACCESS_KEY", "")),
            ("aws_session_token", env.get("AWS_SESSION_TOKEN", "")),
        )
        if value
    }
    if endpoint.startswith("http://"):
        options["allow_http"] = "true"  # a local S3-compatible server (MinIO, moto)
    return options


_SESSION: Any = None


def lance_session() -> Any:
    """One Lance session for every dataset of the process: its index and metadata caches survive the
    reopening of a dataset after each commit (a server's query keeps its loaded FTS and vector indexes)."""
    global _SESSION
    if _SESSION is None:
        import lance

        _SESSION = lance.Session()
    return _SESSION
