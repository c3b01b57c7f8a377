"""A store's tables as Parquet files on any pyarrow file system (a local folder, `s3://`, `gs://`),
and back: the off-machine copy of a store. LanceDB is not in it: it is derived, and `reindex`
rebuilds it from the tables (the `embeddings` table holds every vector, so nothing is re-embedded).

S3 takes the usual AWS variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION,
and AWS_ENDPOINT_URL for an S3-compatible server)."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from ..errors import InputError, NotFoundError, StoreError
from .db import arrow_view
from .migrations import MIGRATIONS

if TYPE_CHECKING:
    from .store import Store

MANIFEST = "manifest.json"
SKIPPED = ("migrations", "pending_index")  # made by every new store; nothing pending in a whole copy


def file_system(uri: str) -> tuple[Any, str]:
    """(pyarrow file system, path in it) for a URI or a local path."""
    from pyarrow import fs

    try:
        return fs.FileSystem.from_uri(uri)
    except (ValueError, OSError) as exc:
        raise InputError(f"cannot open {uri!r}: {exc}", hint="give s3://bucket/prefix or a local folder") from None


def _tables(store: "Store") -> list[str]:
    rows = store.con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND table_type = 'BASE TABLE'"
    ).fetchall()
    return sorted(r[0] for r in rows if r[0] not in SKIPPED)


def export_tables(store: "Store", uri: str) -> dict[str, Any]:
    """Write every table as `<uri>/<table>.parquet`, then the manifest (written last: an export
    without one is incomplete and `import_tables` refuses it)."""
    import pyarrow.parquet as pq

    filesystem, base = file_system(uri)
    filesystem.create_dir(base, recursive=True)
    counts = {}
    for table in _tables(store):
        data = store.con.sql(f'SELECT * FROM "{table}"').to_arrow_table()
        pq.write_table(data, f"{base}/{table}.parquet", filesystem=filesystem)
        counts[table] = data.num_rows
    applied = [r[0] for r in store.con.execute("SELECT name FROM migrations ORDER BY name").fetchall()]
    manifest = {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "store": store.dir.name,
        "migrations": applied,
        "tables": counts,
    }
    with filesystem.open_output_stream(f"{base}/{MANIFEST}") as out:
        out.write(json.dumps(manifest, indent=1).encode())
    return {"uri": uri, **manifest}


def import_tables(store: "Store", uri: str) -> dict[str, Any]:
    """Fill an empty store from an export (one transaction); the caller rebuilds LanceDB after."""
    import pyarrow.parquet as pq

    filesystem, base = file_system(uri)
    try:
        with filesystem.open_input_stream(f"{base}/{MANIFEST}") as src:
            manifest = json.loads(src.read())
    except (FileNotFoundError, OSError) as exc:
        raise NotFoundError(f"no complete export at {uri} ({exc})", hint="export with `snapshot --to URI`") from None
    newer = set(manifest["migrations"]) - {name for name, _ in MIGRATIONS}
    if newer:
        raise StoreError(f"the export is from a newer expengine (migrations {sorted(newer)})", hint="upgrade first")
    if store.con.execute("SELECT count(*) FROM records").fetchall()[0][0]:
        raise InputError("the store already holds records", hint="restore into a new, empty --store folder")
    present = set(_tables(store))
    with store.transaction():
        for table in manifest["tables"]:
            if table not in present:
                raise StoreError(f"the export has a table {table!r} this store lacks")
            data = pq.read_table(f"{base}/{table}.parquet", filesystem=filesystem)
            store.con.execute(f'DELETE FROM "{table}"')
            with arrow_view(store.con, "imported", data):
                store.con.execute(f'INSERT INTO "{table}" BY NAME SELECT * FROM imported')
    return {"uri": uri, **manifest}
