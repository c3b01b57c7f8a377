"""Searches in flight against the deletion of old LanceDB table versions' files (`Index.files`)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class FileGuard:
    """Searches in flight against the deletion of old table versions' files (`Index.drop_old_versions`).

    A search reads the files of the version its table had when it started; in a server, reader threads
    search the tables the writer thread compacts, and a search still reading when the cycle deleted the
    old version's files failed ("Not found: ...lance"). Searches hold it shared (a thread may nest);
    a deletion holds it alone, and waits for the searches under way while new ones wait for it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._deleting = False
        self._waiting = 0
        self._depth = threading.local()

    @contextmanager
    def reading(self) -> Iterator[None]:
        depth = getattr(self._depth, "n", 0)
        if not depth:
            with self._cond:
                while self._deleting or self._waiting:
                    self._cond.wait()
                self._readers += 1
        self._depth.n = depth + 1
        try:
            yield
        finally:
            self._depth.n = depth
            if not depth:
                with self._cond:
                    self._readers -= 1
                    self._cond.notify_all()

    @contextmanager
    def deleting(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            while self._deleting or self._readers:
                self._cond.wait()
            self._waiting -= 1
            self._deleting = True
        try:
            yield
        finally:
            with self._cond:
                self._deleting = False
                self._cond.notify_all()
