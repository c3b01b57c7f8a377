"""`expengine repair`: put the newest snapshot that reads back whole in place of a damaged database."""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DamagedSnapshotError, NotFoundError, StoreError
from ..results import Result
from ..store.db import DB_FILE, SNAPSHOT_DIR, utcnow
from ..store.journal import ingested_since
from .snapshot import damage_in, snapshot_database, snapshots_in, swap_in


@dataclass
class RepairResult(Result):
    repaired: bool
    message: str
    snapshot_id: str | None = None
    snapshot_created: str | None = None
    damaged_copy: str | None = None  # the damaged database, kept beside the store
    # files ingested after the snapshot was taken (from the ingest journal): ingest them again
    reingest: list[str] = field(default_factory=list)


def _whole(folder: Path) -> bool:
    """Whether a snapshot's database unpacks and reads back whole."""
    try:
        with snapshot_database(folder):
            return True
    except DamagedSnapshotError:
        return False


def repair_store(store_dir: Path, *, snapshot_id: str | None = None, force: bool = False) -> RepairResult:
    """Put the newest snapshot whose database reads back whole in place of a damaged database (the caller
    holds the store lock; the store is not open). The damaged file is copied aside first, never deleted, and
    the files ingested since the snapshot come from the ingest journal beside it, so ingesting them again
    brings back the rest. A kill at any point leaves either the damaged store or the snapshot's, never half."""
    db_path = store_dir / DB_FILE
    damage = damage_in(db_path) if db_path.exists() else "the database file is missing"
    if damage is None and not force:
        return RepairResult(repaired=False, message=f"the store database {db_path} reads back whole: nothing to repair")
    candidates = snapshots_in(store_dir / SNAPSHOT_DIR)
    if snapshot_id is not None:
        candidates = [s for s in candidates if s.id == snapshot_id]
        if not candidates:
            raise NotFoundError(f"no snapshot {snapshot_id!r}", hint="see the folders in snapshots/")
    chosen = next((s for s in candidates if _whole(store_dir / SNAPSHOT_DIR / s.id)), None)
    if chosen is None:
        raise StoreError(
            f"no snapshot of {store_dir} reads back whole, so there is nothing to repair from",
            hint="ingest the logs again into a new store (--store NEW); the damaged file is left as it is",
        )
    reingest = ingested_since(store_dir, dt.datetime.fromisoformat(chosen.created))
    kept = None
    if db_path.exists():
        kept = db_path.with_name(f"{DB_FILE}.damaged-{utcnow().strftime('%Y%m%dT%H%M%S')}")
        shutil.copy2(db_path, kept)
    swap_in(store_dir / SNAPSHOT_DIR / chosen.id, store_dir, keep_cache=False)
    again = "ingest again: " + ", ".join(reingest) if reingest else "no file was ingested since"
    return RepairResult(
        repaired=True,
        message=f"put back snapshot {chosen.id} (taken {chosen.created}); {again}",
        snapshot_id=chosen.id,
        snapshot_created=chosen.created,
        damaged_copy=str(kept) if kept else None,
        reingest=reingest,
    )
