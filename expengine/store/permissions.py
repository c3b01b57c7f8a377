"""Who may read a store: the folder is owner-only, and so is every file the store creates."""

from __future__ import annotations

import logging
import os
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

log = logging.getLogger("expengine.store")


def secure_store_dir(path: Path) -> None:
    """Create the store folder owner-only (0700), or tighten an existing one and everything in it (folders
    0700, files 0600 at most, never adding a permission) with a one-line notice: a store holds every memory
    in clear, and other users must not read it."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = stat.S_IMODE(path.stat().st_mode)
    if not mode & 0o077:
        return
    loose = 0
    try:
        for folder, dirs, files in os.walk(path):
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
