"""The store's lock: one process writes a store at a time."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from ..errors import READ_ONLY_ERRNOS, LockedError


class StoreLock:
    """An exclusive advisory lock on the store, so one process writes at a time (cron-safe).

    Where this user cannot write the lock file (a read-only store), a shared lock on it is taken instead
    when it can be read, or none: such a store can only be read (`read_only`), and writers still wait."""

    def __init__(self, path: Path, *, timeout: float):
        self.path, self.timeout = path, timeout
        self._fd: int | None = None
        self.read_only = False

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            if exc.errno not in READ_ONLY_ERRNOS:
                raise
            self.read_only = True
            self._acquire_shared()
            return
        self.read_only = False
        self._wait(fd, fcntl.LOCK_EX)
        holder = f"pid {os.getpid()}".encode()
        if os.pread(fd, 64, 0) != holder:  # an Engine takes the lock per call: rewriting it cost 1-4 ms wall
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder, 0)
        self._fd = fd

    def _acquire_shared(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return  # no lock file and no right to make one: nothing can write here as this user either
        self._wait(fd, fcntl.LOCK_SH)
        self._fd = fd

    def _wait(self, fd: int, mode: int) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = self._holder(fd)
                    os.close(fd)
                    raise LockedError(
                        f"the store {self.path.parent} is busy ({holder or 'another expengine process'} holds it)",
                        hint="wait for it to finish (a compaction can take minutes) or raise --wait",
                    ) from None
                time.sleep(0.1)

    @staticmethod
    def _holder(fd: int) -> str:
        try:
            return os.pread(fd, 64, 0).decode(errors="replace").strip()
        except OSError:
            return ""

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
