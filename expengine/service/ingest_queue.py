"""Ingest without blocking the agent: `memory_ingest(wait=false)` queues the records and answers with a
receipt at once; one worker thread ingests the batches in order (waiting for the store lock as any
writer does, e.g. behind a running compaction), and `memory_status(receipt)` says when they are in.

Receipts live as long as the MCP server process: the newest `KEEP` finished ones are remembered. When
the client goes away (stdin closed), the process ingests what is still queued before it exits
(`drain_queues`); a SIGTERM drops the rest and says so on stderr with the receipts (a SIGKILL can
say nothing: use wait=true for records that must not be lost).
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import queue
import signal
import sys
import threading
import uuid
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..errors import NotFoundError

KEEP = 1000
# What the first ingest imports. Loading them holds the GIL for long stretches (shared libraries are
# opened with it held), which would stall the thread answering the agent; so they load before serving.
HEAVY_MODULES = ("expengine.engine", "expengine.ingest.pipeline", "lancedb", "sentence_transformers")


def preload() -> None:
    for name in HEAVY_MODULES:
        importlib.import_module(name)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="milliseconds")


@dataclass
class _Job:
    receipt: str
    body: dict[str, Any]
    queued_at: str = field(default_factory=_now)
    status: str = "queued"  # queued → running → done | failed
    finished_at: str | None = None
    result: Any = None
    error: str | None = None
    finished: threading.Event = field(default_factory=threading.Event)

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {"receipt": self.receipt, "status": self.status, "queued_at": self.queued_at}
        records = self.body.get("records")
        out["records"] = len(records) if isinstance(records, list) else None
        if self.finished_at:
            out["finished_at"] = self.finished_at
        if self.result is not None:
            out["result"] = self.result
        if self.error is not None:
            out["error"] = self.error
        return out


class IngestQueue:
    """Batches handed to `ingest` (the MCP server's own call path) one at a time, in a daemon thread."""

    def __init__(self, ingest: Callable[[dict[str, Any]], Any]) -> None:
        self._ingest = ingest
        self._jobs: dict[str, _Job] = {}
        self._pending: queue.Queue[_Job] = queue.Queue()
        self._lock = threading.Lock()
        # Started now, idle until the first batch: the agent's first call only enqueues.
        threading.Thread(target=self._work, name="expengine-ingest-queue", daemon=True).start()
        _LIVE.add(self)

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        job = _Job(receipt="rcpt-" + uuid.uuid4().hex[:16], body=body)
        with self._lock:
            self._jobs[job.receipt] = job
        self._pending.put(job)
        return job.view()

    def status(self, receipt: str, *, wait: float = 0.0) -> dict[str, Any]:
        """The receipt's state; with `wait`, block up to that many seconds for the batch to finish."""
        job = self._jobs.get(receipt)
        if job is None:
            raise NotFoundError(
                f"no ingest receipt {receipt!r}", hint="receipts come from memory_ingest(wait=false) on this server"
            )
        if wait > 0:
            job.finished.wait(wait)
        return job.view()

    def _work(self) -> None:
        while True:
            job = self._pending.get()
            job.status = "running"
            try:
                job.result = self._ingest(job.body)
                job.status = "done"
            except Exception as exc:  # the receipt carries the one-line reason; the queue goes on
                job.error, job.status = str(exc) or type(exc).__name__, "failed"
            job.finished_at = _now()
            job.finished.set()
            self._forget_old()

    def drain(self) -> None:
        """Wait until every batch queued so far is stored (or failed)."""
        for job in list(self._jobs.values()):
            job.finished.wait()

    def dropped(self) -> list[str]:
        """The receipts of batches not yet stored, said on stderr (a SIGTERM is ending the process)."""
        left = [j for j in list(self._jobs.values()) if not j.finished.is_set()]
        if left:
            records = sum(len(j.body.get("records") or []) for j in left)
            sys.stderr.write(
                f"expengine mcp: {len(left)} queued ingest batch(es) ({records} records) dropped at shutdown: "
                f"{', '.join(j.receipt for j in left)}; send them again\n"
            )
            sys.stderr.flush()
        return [j.receipt for j in left]

    def _forget_old(self) -> None:
        with self._lock:
            finished = [r for r, j in self._jobs.items() if j.finished.is_set()]
            for receipt in finished[: max(0, len(finished) - KEEP)]:
                del self._jobs[receipt]


_LIVE: "weakref.WeakSet[IngestQueue]" = weakref.WeakSet()


def drain_queues() -> None:
    """Store what every queue of this process still holds: the MCP server calls it once its client is gone
    (before the interpreter shuts down, when the ingest's thread pools still take work)."""
    for ingest_queue in list(_LIVE):
        ingest_queue.drain()


@contextmanager
def dropped_on_sigterm() -> Iterator[None]:
    """For the block (the MCP server's life, then its drain; main thread only): a SIGTERM first names on
    stderr the queued batches it drops, then ends the process as it would have."""

    def dropped(signum: int, frame: Any) -> None:
        for ingest_queue in list(_LIVE):
            ingest_queue.dropped()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, dropped)
    try:
        yield
    finally:
        if previous is not None:  # None: a handler not set from Python, left as it is
            signal.signal(signal.SIGTERM, previous)
