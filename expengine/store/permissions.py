"""Who may read a store: the folder is owner-only, and so is every file the store creates."""

from __future__ import annotations

import logging
import os
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..config import CONFIG_FILE
from ..errors import InputError, NoStoreError, StoreError
from .db import DB_FILE, LANCE_DIR, LOCK_FILE, RECENT_DIR, REINDEX_PENDING, SCRUB_PENDING, SNAPSHOT_DIR
from .journal import INGEST_JOURNAL
from .pause import PAUSE_MARKER

log = logging.getLogger("expengine.store")


# what a store folder holds, by name: nothing else in the folder is ever changed
STORE_ENTRIES = (
    DB_FILE,
    DB_FILE + ".wal",
    LANCE_DIR,
    SNAPSHOT_DIR,
    RECENT_DIR,
    CONFIG_FILE,
    LOCK_FILE,
    INGEST_JOURNAL,
    SCRUB_PENDING,
    REINDEX_PENDING,
    "serve.token",  # the server's token and socket (service/client.py names them)
    "serve.sock",
    "hooks.log",  # a coding agent's hooks: their log, their transcript cursors and lock (integrations/)
    "hook-cursors.json",
    "hook-ingest.lock",
)
# any of these makes a folder a store (the lock and pending markers alone do not: a crash may leave them)
STORE_MARKERS = (DB_FILE, LANCE_DIR, SNAPSHOT_DIR, CONFIG_FILE)


def check_store_dir(path: Path) -> None:
    """Refuse a path that is not a store folder before anything is written to it: a file, a device, or a
    folder that holds other things and none of a store's (e.g. the current folder). Exit 2, with a hint."""
    try:
        if path.exists() and not path.is_dir():
            raise InputError(f"the store path {path} is not a folder", hint="pass --store DIR naming a folder")
        entries = [e.name for e in path.iterdir()] if path.exists() else []
    except OSError as exc:
        raise InputError(f"cannot read the store folder {path}: {exc.strerror}", hint="pass --store DIR") from exc
    if any(name in entries for name in STORE_MARKERS) or all(_owned(name) for name in entries):
        return  # a store, or one whose making was cut short (a lock or the ingest journal alone)
    raise InputError(
        f"{path} is not an expengine store and not empty ({len(entries)} entries)",
        hint="pass --store naming a new or empty folder, or an existing store",
    )


def _owned(name: str) -> bool:
    """Whether an entry of a store folder is the store's own (its temporary and kept-aside files included)."""
    return name in STORE_ENTRIES or name.startswith((DB_FILE, ".tmp-", PAUSE_MARKER))


def make_store_dir(path: Path, *, create: bool) -> None:
    """The store folder, made (owner-only) unless `create` is False, when a missing one is an error (exit 3):
    a command that only reads must not leave an empty store behind a mistyped path."""
    if not create and not path.exists():
        raise NoStoreError(f"no store at {path}", hint="check --store (or EXPENGINE_HOME)")
    try:
        secure_store_dir(path)
    except OSError as exc:
        raise StoreError(f"cannot create the store folder {path}: {exc.strerror}", hint="pass --store DIR") from exc


def secure_store_dir(path: Path) -> None:
    """Create the store folder owner-only (0700), or tighten an existing one and the store's own entries in
    it (`STORE_ENTRIES`, by name: folders 0700, files 0600 at most, never adding a permission) with a
    one-line notice: a store holds every memory in clear, and other users must not read it. Anything else
    in the folder is the user's and is left as it is."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = stat.S_IMODE(path.stat().st_mode)
    if not mode & 0o077:
        return
    loose = 0
    try:
        tops = [path / name for name in STORE_ENTRIES if os.path.lexists(path / name)]
        for top in [path] + tops:
            if top.is_symlink():
                continue
            walk = os.walk(top) if top != path and top.is_dir() else [(str(top), [], [])]
            for folder, _dirs, files in walk:
                for entry in [folder] + [os.path.join(folder, f) for f in files]:
                    current = stat.S_IMODE(os.lstat(entry).st_mode)
                    if current & 0o077 and not os.path.islink(entry):
                        os.chmod(entry, current & ~0o077)
                        loose += 1
    except OSError as exc:
        log.warning(
            f"notice: the store {path} is readable by other users ({mode:o}) and cannot be tightened: {exc.strerror}"
        )
        return
    log.warning(
        f"notice: tightened the store {path} to owner-only (was {mode:o}; {loose} file(s) and folder(s) changed)"
    )


_umask_lock = threading.Lock()
_umask_users = 0
_umask_saved = 0


@contextmanager
def private_files() -> Iterator[None]:
    """Everything created in the block is owner-only (umask 077), whatever the caller's umask. The umask is
    per process, so overlapping blocks (threads) share one: the first sets it, the last restores it."""
    global _umask_users, _umask_saved
    with _umask_lock:
        if _umask_users == 0:
            _umask_saved = os.umask(0o077)
        _umask_users += 1
    try:
        yield
    finally:
        with _umask_lock:
            _umask_users -= 1
            if _umask_users == 0:
                os.umask(_umask_saved)
