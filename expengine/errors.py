"""One exception family for every domain error, so the CLI can print one clear line and exit."""

from __future__ import annotations

import errno

# what an OS error says when this user may not write (or read) a file: the store is read-only for them
READ_ONLY_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)


class ExpengineError(Exception):
    """Base of all expected failures: a message saying what went wrong and a hint saying the fix."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class InputError(ExpengineError):
    """A path or argument given by the user is unusable."""

    exit_code = 2


class StoreError(ExpengineError):
    """The store folder is missing, corrupt, or from a newer version."""

    exit_code = 3


class NoStoreError(StoreError):
    """No store folder at the path, for a command that must not make one."""


class LockedError(ExpengineError):
    """Another process holds the store's write lock (a compaction is running)."""

    exit_code = 4


class NotFoundError(ExpengineError):
    """A record, unit or snapshot id does not exist."""

    exit_code = 5


class ModelError(ExpengineError):
    """An embedding or language model could not be loaded or answered badly."""

    exit_code = 6


class RejectedLinesError(ExpengineError):
    """`ingest --strict` saw rejected lines (they are still quarantined and listed)."""

    exit_code = 7


class TooLargeError(InputError):
    """A request over a bound: query text, ingest bytes, lines or writer time (HTTP 413)."""
