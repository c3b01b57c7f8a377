"""The store's upkeep, as `Engine` methods: snapshots, restore and repair, pins, forget, the growth
history, rejects and reindex. A mixin, so the facade stays one class while its rooms stay small;
it relies on the Engine's `session()`, lock and guard."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, ContextManager

from ..errors import InputError, StoreError
from ..models.embedder import known_model
from ..store.db import StoreLock
from ..store.permissions import private_files

if TYPE_CHECKING:
    from pathlib import Path

    from ..config import Config
    from ..lifecycle.purge import ForgetResult
    from ..lifecycle.repair import RepairResult
    from ..lifecycle.snapshot import RestoreResult, SnapshotInfo
    from ..store.store import Store


class Upkeep:
    """Keeping one store sound; every method opens the store through `session()` as any other."""

    store_dir: "Path"
    _guard: threading.RLock
    _lock: StoreLock
    _store: "Store | None"
    _reembedding: bool
    config: "Config"

    if TYPE_CHECKING:

        def session(self) -> ContextManager["Store"]: ...

    def rejects(self, *, limit: int = 100) -> list[dict[str, Any]]:
        """Quarantined input lines, newest first, with file, line, reason and raw text."""
        from ..store.records import list_rejects

        with self.session() as store:
            return list_rejects(store, limit=limit)

    def reindex(self, *, model: str | None = None) -> dict[str, int]:
        """Rebuild LanceDB from DuckDB (vectors come from the embedding cache, so no re-embedding). With
        `model` (`minilm`, `multilingual` or `mixed`) the store first switches to that embedder for good (its
        config.toml) and the rebuild embeds what the cache lacks for it: never two models in one index.
        It also re-embeds a store whose vectors another encoder wrote (`[embedder] encoder` changed)."""
        from ..store.reindex import rebuild
        from ..store.vectors import record_encoder

        self._reembedding = True  # the store may hold another encoder's vectors: this replaces them
        try:
            with self.session() as store:
                # the vectors of the memories LanceDB held, kept in the cache
                store.embeddings.settle_recent(every_model=True)
                if model is not None and not store.choose_embedder(known_model(model), explicit=True):
                    raise InputError(
                        "this store's embedder is a model folder or one passed in, so --model cannot switch it",
                        hint="set [embedder] model_path in the store's config.toml instead, then reindex",
                    )
                counts = rebuild(store)
                record_encoder(store, replace=True)
                return counts
        finally:
            self._reembedding = False

    def prepare_models(self, *, int8: bool = False) -> list[str]:
        """Export the configured encoder's ONNX files now, as its first use would (and the int8 one when
        asked); the paths. Needs no store: images and CI run it once, before anything is ingested."""
        from ..models.embedder import prepare_onnx

        cfg = self.config.embedder
        return [str(p) for p in prepare_onnx(cfg.model_path, model=cfg.model, encoder=cfg.encoder, int8=int8)]

    def snapshot(self, *, reason: str = "manual") -> "SnapshotInfo":
        from ..lifecycle.snapshot import create_snapshot

        with self.session() as store:
            return create_snapshot(store, reason=reason)

    def snapshots(self) -> list["SnapshotInfo"]:
        from ..lifecycle.snapshot import list_snapshots

        with self.session() as store:
            return list_snapshots(store)

    def restore(self, snapshot_id: str) -> "RestoreResult":
        """Roll the whole store back to a snapshot (records ingested after it are gone too)."""
        from ..lifecycle.snapshot import restore_snapshot

        with self.session() as store:
            return restore_snapshot(store, snapshot_id)

    def export(self, uri: str) -> dict[str, Any]:
        """Every table as Parquet under `uri` (`s3://bucket/prefix` or a folder): the off-machine copy."""
        from ..store.archive import export_tables

        with self.session() as store:
            return export_tables(store, uri)

    def restore_from(self, uri: str) -> dict[str, Any]:
        """Fill this new, empty store from an `export`, then rebuild LanceDB from it (no re-embedding)."""
        from ..store.archive import import_tables
        from ..store.reindex import rebuild

        with self.session() as store:
            result = import_tables(store, uri)
            result["reindexed"] = rebuild(store)
            return result

    def repair(self, *, snapshot_id: str | None = None, force: bool = False) -> "RepairResult":
        """Put the newest snapshot that reads back whole in place of a damaged database, and say which files
        were ingested since (ingest them again: ids are content hashes, nothing doubles). A whole database is
        left alone unless `force`."""
        from ..lifecycle.repair import repair_store

        with self._guard, private_files():
            if self._store is not None:
                raise StoreError("the store is open in this Engine", hint="close it before repairing")
            self._lock.acquire()
            try:
                if self._lock.read_only:
                    raise StoreError(
                        f"the store {self.store_dir} is read-only for this user", hint="repair it as its owner"
                    )
                result = repair_store(self.store_dir, snapshot_id=snapshot_id, force=force)
            finally:
                self._lock.release()
        if result.repaired:
            with self.session() as store:  # the snapshot's database gets any migration it lacks
                store.history_log(result.snapshot_id or "", "repair", {"reingest": result.reingest})
        return result

    def recover_interrupted(self) -> list[dict[str, Any]]:
        """Roll back a compaction a killed process left 'running'; `compact` does this first anyway."""
        from ..lifecycle.compact import recover_interrupted

        with self.session() as store:
            return recover_interrupted(store)

    def pin(self, record_id: str) -> dict[str, Any]:
        from ..lifecycle.pins import set_pinned

        with self.session() as store:
            return set_pinned(store, record_id, pinned=True)

    def unpin(self, record_id: str) -> dict[str, Any]:
        from ..lifecycle.pins import set_pinned

        with self.session() as store:
            return set_pinned(store, record_id, pinned=False)

    def forget(
        self,
        *,
        ids: list[str] | None = None,
        sessions: list[str] | None = None,
        agents: list[str] | None = None,
        before: Any = None,
        users: list[str] | None = None,
        rejects: bool = False,
        dry_run: bool = False,
    ) -> "ForgetResult":
        """Delete the records all given filters match, with their derived rows, from the store and every
        snapshot (the only path that deletes ingested data); `dry_run` counts without deleting (the CLI's
        confirmation preview). `rejects` deletes every quarantined input line instead (they keep the raw
        text of lines that failed to parse, so they are ingested data too)."""
        from ..lifecycle.purge import forget, forget_rejects

        with self.session() as store:
            if rejects:
                return forget_rejects(store, dry_run=dry_run)
            return forget(store, ids=ids, sessions=sessions, agents=agents, before=before, users=users, dry_run=dry_run)

    def history(self) -> list[dict[str, Any]]:
        """Compaction runs, oldest first, with what each cycle forgot, merged, purged and refined."""
        from ..lifecycle.growth import history

        with self.session() as store:
            return history(store)
