"""A snapshot's tables as Parquet chunk files shared by content between snapshots.

Each table is cut by rowid into chunks of `CHUNK_ROWS` rows, and each chunk into one Parquet file per
column, named by the SHA-256 of its bytes and kept in one folder for all snapshots. A snapshot's
manifest lists, per table, its chunks' files and a fingerprint of each (the row count and an xor of
DuckDB's hash of every (rowid, value) pair, computed in one pass over the live table): a column chunk
whose fingerprint an earlier manifest already has is not written again. New rows land in the last
chunks and an update of a few columns (decay's weights) rewrites those columns only, so a snapshot
writes about what changed since the last one. The schema goes in a small DuckDB file of its own, xz-compressed.

Reading back checks each file's bytes against its name and each chunk's row count, so a damaged or
missing chunk is a `DamagedChunkError`, never a silently shorter table. A new snapshot checks the same of
each file it would share, and writes a damaged one again.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb

from .db import BLOCK_SIZE
from .embeddings import CACHE_TABLE
from .filters import sql_str

CHUNK_DIR = "chunks"  # beside the snapshot folders, shared by them
MANIFEST = "manifest.json"
SCHEMA_DB = "schema.duckdb.xz"  # the tables, empty: 45 kB of mostly zeros, 3 kB packed
CHUNK_ROWS = 8192
TMP_PREFIX = ".tmp-"


class DamagedChunkError(ValueError):
    """A chunk file is missing, or its bytes or row count are not what the manifest says."""


def chunk_path(chunk_dir: Path, digest: str) -> Path:
    return chunk_dir / f"{digest}.parquet"


def known_chunks(manifests: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Fingerprint key → file digest, over the given manifests (what a new snapshot need not write again)."""
    known = {}
    for manifest in manifests:
        for table, spec in manifest["tables"].items():
            for chunk in spec["chunks"]:
                for column, kind, print_, digest in zip(
                    spec["columns"], spec["types"], chunk["prints"], chunk["files"]
                ):
                    known[_key(table, column, kind, print_)] = digest
    return known


def referenced(manifest: dict[str, Any]) -> set[str]:
    return {digest for spec in manifest["tables"].values() for chunk in spec["chunks"] for digest in chunk["files"]}


def manifests(folders: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """The manifests in these snapshot folders (those of the older format have none); an unreadable one is
    a ValueError."""
    for folder in folders:
        if (folder / MANIFEST).exists():
            yield json.loads((folder / MANIFEST).read_text(encoding="utf-8"))


def snapshot_files(folder: Path) -> list[Path]:
    """The files a snapshot takes: its folder, and the chunks its manifest lists (shared with others)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [folder]
    return [folder] + [chunk_path(folder.parent / CHUNK_DIR, digest) for digest in sorted(referenced(manifest))]


def own_chunks(folder: Path, others: list[Path]) -> list[Path]:
    """The chunk files `folder` lists and none of the `others` do, largest first."""
    theirs = {path for other in others for path in snapshot_files(other)}
    return sorted(set(snapshot_files(folder)[1:]) - theirs, key=lambda p: -p.stat().st_size)


def collect_chunks(chunk_dir: Path, folders: list[Path]) -> int:
    """Delete the chunk files none of these (complete) snapshots lists, left by a kill, a prune or a
    `forget`; nothing when a manifest cannot be read, since what it lists is then unknown. Returns how
    many went."""
    if not chunk_dir.exists():
        return 0
    try:
        keep = set().union(*(referenced(m) for m in manifests(folders)))
    except (OSError, ValueError, KeyError):
        return 0
    gone = 0
    for path in chunk_dir.iterdir():
        if path.name.startswith(TMP_PREFIX) or path.stem not in keep:
            path.unlink(missing_ok=True)
            gone += 1
    return gone


def _key(table: str, column: str, kind: str, print_: str) -> str:
    return f"{table}\0{column}\0{kind}\0{print_}"


def write_tables(
    con: duckdb.DuckDBPyConnection, folder: Path, chunk_dir: Path, known: dict[str, str], *, schema: bool
) -> tuple[dict[str, Any], int]:
    """Write the connection's current database into `chunk_dir` (the column chunks no `known` one matches)
    and, with `schema`, its schema file into `folder`; returns the manifest (the caller writes it) and the
    bytes written."""
    chunk_dir.mkdir(parents=True, exist_ok=True)
    (source,) = con.execute("SELECT current_database()").fetchone()  # type: ignore[misc]
    written = _write_schema(con, source, folder / SCHEMA_DB) if schema else 0
    tables = {}
    names = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' AND table_name != ? "
        "ORDER BY table_name",
        [source, CACHE_TABLE],
    ).fetchall()
    for (table,) in names:
        columns = con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = ? AND schema_name = 'main' "
            "AND table_name = ? ORDER BY column_index",
            [source, table],
        ).fetchall()
        qualified = f'"{source}".main."{table}"'
        prints = ", ".join(f'bit_xor(hash(rowid, "{name}"))' for name, _ in columns)
        rows = con.execute(
            f"SELECT rowid // {CHUNK_ROWS} AS chunk, count(*), {prints} FROM {qualified} GROUP BY chunk ORDER BY chunk"
        ).fetchall()
        chunks = []
        for chunk, count, *hashes in rows:
            files, chunk_prints = [], []
            for (name, kind), hashed in zip(columns, hashes):
                print_ = f"{count}:{hashed}"
                digest = known.get(_key(table, name, kind, print_))
                if digest is None or not _whole(chunk_path(chunk_dir, digest), digest):
                    select = (
                        f'SELECT "{name}" FROM {qualified} WHERE rowid >= {chunk * CHUNK_ROWS} '
                        f"AND rowid < {(chunk + 1) * CHUNK_ROWS} ORDER BY rowid"
                    )
                    digest, size = _write_chunk(con, select, chunk_dir)
                    known[_key(table, name, kind, print_)] = digest
                    written += size
                files.append(digest)
                chunk_prints.append(print_)
            chunks.append({"rows": int(count), "files": files, "prints": chunk_prints})
        tables[table] = {"columns": [c[0] for c in columns], "types": [c[1] for c in columns], "chunks": chunks}
    return {"format": 2, "chunk_rows": CHUNK_ROWS, "tables": tables}, written


def _write_schema(con: duckdb.DuckDBPyConnection, source: str, target: Path) -> int:
    plain = target.with_suffix("")
    con.execute(f"ATTACH {sql_str(str(plain))} AS snapshot_schema (BLOCK_SIZE {BLOCK_SIZE})")
    try:
        con.execute(f'COPY FROM DATABASE "{source}" TO snapshot_schema (SCHEMA)')
        con.execute("CHECKPOINT snapshot_schema")
    finally:
        con.execute("DETACH snapshot_schema")
    target.write_bytes(lzma.compress(plain.read_bytes()))
    plain.unlink()
    return target.stat().st_size


def _write_chunk(con: duckdb.DuckDBPyConnection, select: str, chunk_dir: Path) -> tuple[str, int]:
    """One column chunk as Parquet, named by its digest (through a temporary name: a kill leaves no file
    under a digest that is not its content's)."""
    part = chunk_dir / f"{TMP_PREFIX}{uuid.uuid4().hex}.parquet"
    con.execute(f"COPY ({select}) TO {sql_str(str(part))} (FORMAT parquet, COMPRESSION zstd)")
    data = part.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    os.replace(part, chunk_path(chunk_dir, digest))
    return digest, len(data)


def read_tables(folder: Path, chunk_dir: Path, target: Path) -> None:
    """Build a DuckDB file at `target` from the snapshot in `folder`: its schema file, then every chunk,
    each file checked against its digest. Raises DamagedChunkError, OSError, ValueError or duckdb.Error."""
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    target.write_bytes(lzma.decompress((folder / SCHEMA_DB).read_bytes()))
    con = duckdb.connect(str(target))
    try:
        for table, spec in manifest["tables"].items():
            columns = ", ".join(f'"{name}"' for name in spec["columns"])
            for chunk in spec["chunks"]:
                paths = [_checked(chunk_dir, digest) for digest in chunk["files"]]
                joined = " POSITIONAL JOIN ".join(f"read_parquet({sql_str(str(p))})" for p in paths)
                (inserted,) = con.execute(f'INSERT INTO "{table}" ({columns}) SELECT * FROM {joined}').fetchone()  # type: ignore[misc]
                if inserted != chunk["rows"]:
                    raise DamagedChunkError(
                        f"a chunk of {table} holds {inserted} rows, its manifest says {chunk['rows']}"
                    )
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _whole(path: Path, digest: str) -> bool:
    """Whether a chunk file is there with the bytes its name says. One that is not is written again, which
    also mends every older snapshot that lists it, rather than taken into the new snapshot (which a cycle
    makes first, to roll back to)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == digest
    except FileNotFoundError:
        return False


def _checked(chunk_dir: Path, digest: str) -> Path:
    path = chunk_path(chunk_dir, digest)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DamagedChunkError(f"the chunk {path.name} is missing") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise DamagedChunkError(f"the chunk {path.name} does not match its digest")
    return path
