"""One exception family for every domain error, so the CLI can print one clear line and exit."""

from __future__ import annotations

import errno

# what an OS error says when this user may not write (or read) a file: the store is read-only for them
READ_ONLY_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)


class ExpengineError(Exception):
    """Base of all expected failures: a message saying what went wrong and a hint saying the fix."""

    exit_code = 1
    http_status = 500  # what the server answers: the caller's mistakes are 4xx, the server's own trouble 5xx

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class InputError(ExpengineError):
    """A path or argument given by the user is unusable."""

    exit_code = 2
    http_status = 400


class StoreError(ExpengineError):
    """The store folder is missing, corrupt, or from a newer version."""

    exit_code = 3


class DamagedSnapshotError(StoreError):
    """A snapshot's database cannot be read back (a cut or garbled chunk or `.xz`): the snapshot asked for is at fault,
    not the live store, which stays as it was."""

    http_status = 422


class NoStoreError(StoreError):
    """No store folder at the path, for a command that must not make one."""


class LockedError(ExpengineError):
    """Another process holds the store's write lock (a compaction is running)."""

    exit_code = 4
    http_status = 409


class NotFoundError(ExpengineError):
    """A record, unit or snapshot id does not exist."""

    exit_code = 5
    http_status = 404


class ModelError(ExpengineError):
    """An embedding or language model could not be loaded or answered badly."""

    exit_code = 6


class RejectedLinesError(ExpengineError):
    """`ingest --strict` saw rejected lines (they are still quarantined and listed)."""

    exit_code = 7
    http_status = 422


class TooLargeError(InputError):
    """A request over a bound: query text, ingest bytes, lines or writer time."""

    http_status = 413
