"""Snapshots: a copy of the store's DuckDB tables (the truth, without the embedding cache) taken before a cycle.

The copy is kept as Parquet column chunks shared by content between snapshots (`store.chunks`), so a
snapshot writes what changed since the last one, not the whole store; snapshots of the older format
(the whole database xz-compressed, `PACKED_DB`) are still read. Only a restore, a repair and a `forget`
read a snapshot, each from a plain DuckDB file built for the while (`snapshot_database`). A restore puts
the copy back and rebuilds LanceDB from it, the vectors coming from the embedding cache of the store it
replaces (content-addressed, so it holds every vector the snapshot's texts had); snapshots made before
they left LanceDB out still carry a folder of it, linked back. The Engine holds the store lock for the
whole operation, so nothing writes while the copy is made. A snapshot is first written to a hidden
temporary folder and renamed when complete, so a kill during the copy never leaves a half one; the
chunks it had written are listed by no snapshot and go at the next one (`collect_chunks`)."""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import stat
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import duckdb

from ..errors import DamagedSnapshotError, InputError, NotFoundError
from ..results import Result
from ..store import chunks, units
from ..store.chunks import CHUNK_DIR, MANIFEST, known_chunks, manifests, read_tables, snapshot_files, write_tables
from ..store.db import (
    DB_FILE,
    LANCE_DIR,
    REINDEX_PENDING,
    SNAPSHOT_DIR,
    link_tree,
    unreadable,
    utcnow,
)
from ..store.embeddings import carry_cache
from ..store.index import MEMORIES, UNITS, Index
from ..store.reindex import rebuild_if_pending
from ..store.scrub import rewrite_database, scrub_index
from ..store.wal import wal_of

if TYPE_CHECKING:
    from ..store.store import Store

META_FILE = "snapshot.json"
TMP_PREFIX = ".tmp-"
SNAPSHOT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
# a snapshot's database file, xz-compressed (preset 6: 0.85 against 2.65 MB on the sample logs' third
# snapshot, where gzip -6 made 1.03 MB; about 3 MB/s on one core, and it is read back far faster)
PACKED_DB = DB_FILE + ".xz"


@dataclass
class SnapshotInfo(Result):
    id: str
    created: str
    reason: str
    raw: int
    active: int
    size_bytes: int  # the files it takes, those shared with other snapshots included
    written_bytes: int = 0  # the files it wrote: what changed since the snapshots before it


@dataclass
class RestoreResult(Result):
    snapshot_id: str
    raw_before: int
    raw_after: int
    active_after: int
    runs_rolled_back: list[str]


def snapshot_root(store: "Store") -> Path:
    return store.dir / SNAPSHOT_DIR


def create_snapshot(store: "Store", *, reason: str = "manual") -> SnapshotInfo:
    root = snapshot_root(store)
    root.mkdir(exist_ok=True)
    for stale in root.glob(TMP_PREFIX + "*"):  # left by a process killed while copying
        shutil.rmtree(stale, ignore_errors=True)
    collect_chunks(root)
    created = utcnow()
    snapshot_id = created.strftime("%Y%m%dT%H%M%S%f") + "-" + uuid.uuid4().hex[:4]
    tmp = root / (TMP_PREFIX + snapshot_id)
    tmp.mkdir()
    manifest, written = write_tables(
        store.con, tmp, root / CHUNK_DIR, known_chunks(manifests(_complete(root))), schema=True
    )
    _write_json(tmp / MANIFEST, manifest)
    counts = dict(store.con.execute("SELECT state, count(*) FROM records GROUP BY state").fetchall())
    info = SnapshotInfo(
        id=snapshot_id,
        created=created.isoformat(timespec="microseconds"),
        reason=reason,
        raw=int(sum(counts.values())),
        active=int(counts.get("active", 0)),
        size_bytes=disk_bytes(snapshot_files(tmp)),
        written_bytes=written + (tmp / MANIFEST).stat().st_size,
    )
    _write_json(tmp / META_FILE, info.to_dict())
    tmp.rename(root / snapshot_id)
    prune_snapshots(store, keep=max(1, store.config.snapshot.retention), max_bytes=byte_limit(store))
    return info


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Through a temporary name, so a kill leaves the old file or the new one."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(data), encoding="utf-8")
    os.replace(part, path)


def _complete(root: Path) -> list[Path]:
    return [root / info.id for info in snapshots_in(root)]


def own_chunks(folder: Path) -> list[Path]:
    """The chunk files this snapshot lists and no other does, largest first: damaging one damages this
    snapshot only (the repair tests, the kill test)."""
    return chunks.own_chunks(folder, [f for f in _complete(folder.parent) if f != folder])


def collect_chunks(root: Path) -> int:
    return chunks.collect_chunks(root / CHUNK_DIR, _complete(root))


def byte_limit(store: "Store") -> int:
    """What the snapshots folder may take: `snapshot.max_bytes`, and `snapshot.max_share` of the live
    store's database and LanceDB folder, whichever is less (0: no limit)."""
    cfg = store.config.snapshot
    limits = [cfg.max_bytes] if cfg.max_bytes else []
    if cfg.max_share:
        lance = store.dir / LANCE_DIR
        live = (store.dir / DB_FILE).stat().st_size + (disk_bytes([lance]) if lance.exists() else 0)
        limits.append(max(1, int(cfg.max_share * live)))
    return min(limits, default=0)


def list_snapshots(store: "Store") -> list[SnapshotInfo]:
    """Complete snapshots, newest first."""
    return snapshots_in(snapshot_root(store))


def snapshots_in(root: Path) -> list[SnapshotInfo]:
    if not root.exists():
        return []
    found = []
    for folder in root.iterdir():
        meta = folder / META_FILE
        if folder.name.startswith(TMP_PREFIX) or not meta.exists():
            continue
        try:
            found.append(SnapshotInfo(**json.loads(meta.read_text(encoding="utf-8"))))
        except (ValueError, TypeError):
            continue
    return sorted(found, key=lambda s: (s.created, s.id), reverse=True)


def prune_snapshots(store: "Store", *, keep: int, max_bytes: int = 0) -> list[str]:
    """Delete all but the newest `keep` snapshots, then, oldest first, those that take the folder over
    `max_bytes` on disk (0: no limit; the newest always stays)."""
    root = snapshot_root(store)
    kept = list_snapshots(store)
    removed = [s.id for s in kept[keep:]]
    kept = kept[:keep]
    while (
        max_bytes and len(kept) > 1 and disk_bytes([f for s in kept for f in snapshot_files(root / s.id)]) > max_bytes
    ):
        removed.append(kept.pop().id)
    for snapshot_id in removed:
        shutil.rmtree(root / snapshot_id, ignore_errors=True)
    if removed:
        collect_chunks(root)
    return removed


def disk_bytes(paths: list[Path]) -> int:
    """Bytes the files and folders take, a file listed or hard-linked several times counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for top in paths:
        for path in top.rglob("*") if top.is_dir() else [top]:
            st = path.lstat()
            if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def _pack(plain: Path, packed: Path) -> None:
    """Compress `plain` into `packed`, through a temporary name, so a kill leaves the old `packed` or the new."""
    part = packed.with_name(packed.name + ".part")
    with open(plain, "rb") as src, lzma.open(part, "wb", preset=6) as out:
        shutil.copyfileobj(src, out, 1 << 20)
    os.replace(part, packed)


def _unpack(folder: Path, target: Path) -> None:
    """The snapshot's database as a plain file at `target`: built from its chunks, or, for a snapshot of
    the older format, its `.xz` unpacked (or its plain file copied)."""
    if (folder / MANIFEST).exists():
        read_tables(folder, folder.parent / CHUNK_DIR, target)
        return
    if not (folder / PACKED_DB).exists():
        shutil.copy2(folder / DB_FILE, target)
        return
    with lzma.open(folder / PACKED_DB, "rb") as src, open(target, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)


def damaged_snapshot(folder: Path, why: str) -> DamagedSnapshotError:
    return DamagedSnapshotError(
        f"the snapshot {folder.name} is damaged and cannot be read ({why})",
        hint=f"pick another one (`expengine snapshots`), or delete the folder {folder} if none of it is needed",
    )


def _unpack_whole(folder: Path, target: Path) -> None:
    """`_unpack`, then check that every table reads back: a damaged snapshot is a DamagedSnapshotError
    (one line, exit 3) and leaves no file at `target`, before anything of the store changed. A copy left
    by a killed run goes first: DuckDB would replay its WAL onto the new copy."""
    target.unlink(missing_ok=True)
    wal_of(target).unlink(missing_ok=True)
    try:
        _unpack(folder, target)
        why = damage_in(target)
    except (OSError, EOFError, ValueError, KeyError, lzma.LZMAError, duckdb.Error) as exc:
        why = str(exc) or type(exc).__name__
    if why is None:
        return
    target.unlink(missing_ok=True)
    wal_of(target).unlink(missing_ok=True)
    raise damaged_snapshot(folder, why)


@contextmanager
def snapshot_database(folder: Path) -> Iterator[Path]:
    """A plain copy of the snapshot's database for the block, beside it under a temporary name (removed
    after; a kill leaves it to the next call), checked whole first (`_unpack_whole`). Changes to it are the
    caller's to pack back."""
    plain = folder / (TMP_PREFIX + DB_FILE)
    wal = wal_of(plain)
    try:
        _unpack_whole(folder, plain)  # removes a copy and WAL a killed call left
        yield plain
    finally:
        plain.unlink(missing_ok=True)
        wal.unlink(missing_ok=True)


def swap_in(source: Path, store_dir: Path, *, keep_cache: bool) -> None:
    """Replace the store's DuckDB file with the snapshot's, so a kill at any moment leaves whole files: it is
    copied beside its target first, then renamed into place. A snapshot holds no LanceDB, so the rebuild
    marker (`REINDEX_PENDING`) is written before the rename: the caller, or the next open after a kill,
    rebuilds LanceDB from the new tables (an older snapshot's LanceDB folder is linked in before the
    rename instead). Until the DuckDB file is swapped, it still holds the interrupted run as 'running',
    so the next compaction restores again. `keep_cache`: the replaced database's cached vectors go into
    the copy (a snapshot holds none, `Store.copy_files`); not from a damaged one, so a repair embeds
    its texts again."""
    db_path, lance = store_dir / DB_FILE, store_dir / LANCE_DIR
    new_db, new_lance, old_lance = (store_dir / (TMP_PREFIX + n) for n in (DB_FILE, LANCE_DIR, "old-" + LANCE_DIR))
    for leftover in (new_lance, old_lance):  # from a restore killed midway
        shutil.rmtree(leftover, ignore_errors=True)
    _unpack_whole(source, new_db)
    if keep_cache and db_path.exists():
        carry_cache(db_path, new_db)
    if (source / LANCE_DIR).exists():
        link_tree(source / LANCE_DIR, new_lance)  # shared with the snapshot: Lance only adds files
    else:
        (store_dir / REINDEX_PENDING).touch()
    if new_lance.exists() and lance.exists():
        lance.rename(old_lance)
    if new_lance.exists():
        new_lance.rename(lance)
    shutil.rmtree(old_lance, ignore_errors=True)
    wal_of(db_path).unlink(missing_ok=True)  # closed cleanly, so it holds nothing
    os.replace(new_db, db_path)


def restore_snapshot(store: "Store", snapshot_id: str) -> RestoreResult:
    """Put the store back exactly as the snapshot holds it; runs started after it are kept as 'rolled_back'."""
    if not SNAPSHOT_ID.match(snapshot_id or ""):  # a folder name of ours: never a path, never overlong
        shown = snapshot_id if len(snapshot_id or "") <= 80 else snapshot_id[:80] + "…"
        raise InputError(f"bad snapshot id {shown!r}", hint="see `expengine snapshots`")
    source = snapshot_root(store) / snapshot_id
    if not (source / META_FILE).exists():
        raise NotFoundError(f"no snapshot {snapshot_id!r}", hint="see `expengine snapshots`")
    con = store.con
    raw_before = int(con.execute("SELECT count(*) FROM records").fetchall()[0][0])
    runs = con.execute("SELECT id, started, finished, dry_run, status, snapshot_id, report FROM runs").fetchall()
    store.close()
    try:  # a damaged snapshot fails before the store's files change: the store reopens as it was
        swap_in(source, store.dir, keep_cache=True)
    finally:
        store.reopen()
    rebuild_if_pending(store)
    known = {r[0] for r in store.con.execute("SELECT id FROM runs").fetchall()}
    rolled_back = []
    for run in runs:
        if run[0] in known:
            continue
        status = run[4] if run[4] == "rolled_back" else "rolled_back"
        store.con.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)", [*run[:4], status, *run[5:]])
        rolled_back.append(run[0])
    store.history_log(snapshot_id, "restore", {"runs_rolled_back": rolled_back})
    counts = dict(store.con.execute("SELECT state, count(*) FROM records GROUP BY state").fetchall())
    return RestoreResult(
        snapshot_id=snapshot_id,
        raw_before=raw_before,
        raw_after=int(sum(counts.values())),
        active_after=int(counts.get("active", 0)),
        runs_rolled_back=rolled_back,
    )


def forget_in_snapshots(
    store: "Store",
    targets: list[str],
    forget_rows: Callable[[duckdb.DuckDBPyConnection, list[str]], tuple[Any, list[str]]],
) -> tuple[int, list[str]]:
    """Delete records from every snapshot with `forget_rows`, leaving no copy in its files; returns how many,
    and why each damaged one was skipped.

    LanceDB is cleaned before the DuckDB deletion commits: a kill in between rolls DuckDB back, and the
    next `forget` finds the same records and units again. A snapshot that cannot be read (a cut or garbled
    `.xz`) holds no readable copy either: it is left as it is and named in `damaged`."""
    done, damaged = 0, []
    for info in list_snapshots(store):
        folder = snapshot_root(store) / info.id
        try:
            counts = _forget_in(folder, targets, forget_rows)
        except DamagedSnapshotError as exc:
            damaged.append(exc.message)
            continue
        info.raw, info.active = int(sum(counts.values())), int(counts.get("active", 0))
        info.size_bytes = disk_bytes(snapshot_files(folder))
        _write_json(folder / META_FILE, info.to_dict())
        done += 1
    collect_chunks(snapshot_root(store))  # the chunks that held the records
    return done, damaged


def _forget_in(
    folder: Path,
    targets: list[str],
    forget_rows: Callable[[duckdb.DuckDBPyConnection, list[str]], tuple[Any, list[str]]],
) -> dict[str, int]:
    """`forget_rows` in one snapshot's database, packed back; its records by state after."""
    with snapshot_database(folder) as path:
        con = duckdb.connect(str(path))
        try:
            con.execute("BEGIN")
            _, emptied = forget_rows(con, targets)
            if (folder / LANCE_DIR).exists():  # a snapshot made before they left LanceDB out
                index = Index(folder / LANCE_DIR)
                index.delete(MEMORIES, targets)
                units.unindex(index, emptied)
                scrub_index(index, [MEMORIES, UNITS])
            con.execute("COMMIT")
            counts = dict(con.execute("SELECT state, count(*) FROM records GROUP BY state").fetchall())
            if (folder / MANIFEST).exists():  # written again from the rows left: no chunk that held them stays listed
                root = folder.parent
                manifest, _ = write_tables(
                    con, folder, root / CHUNK_DIR, known_chunks(manifests(_complete(root))), schema=False
                )
                _write_json(folder / MANIFEST, manifest)
        finally:
            con.close()
        if (folder / MANIFEST).exists():
            return counts
        rewrite_database(path)
        if (folder / PACKED_DB).exists():
            _pack(path, folder / PACKED_DB)
        else:
            os.replace(path, folder / DB_FILE)
    return counts


def damage_in(path: Path) -> str | None:
    """Why the DuckDB file at `path` cannot be trusted, or None when every table reads back whole."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        return str(exc).splitlines()[0]
    try:
        return unreadable(con)
    finally:
        con.close()
