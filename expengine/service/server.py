"""`expengine serve`: one long-lived process owns the store, with the models loaded once.

Scheduling (see `ops.Mode`): reads run on request threads, each on its own DuckDB cursor, so they
are answered from a consistent MVCC state while the single writer thread ingests or compacts. Writes
queue on that thread in arrival order: an ingest sent during a compaction waits for it, never lost.
A query's reinforcement is such a write, done after the answer is sent. Operations that replace
files or tables (restore, reindex, forget) wait until no read is in flight and hold new ones back.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import socket
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, ClassVar, Iterator

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from ..errors import (
    ExpengineError,
    InputError,
    LockedError,
    NotFoundError,
    RejectedLinesError,
)
from . import ops
from .client import SOCKET_FILE, TOKEN_FILE, find_server

if TYPE_CHECKING:
    from ..engine import Engine

log = logging.getLogger("expengine.serve")
MAX_BODY_BYTES = 64 * 2**20
WRITER_NICE = 10
STATUS = {InputError: 400, NotFoundError: 404, LockedError: 409, RejectedLinesError: 422}


class JsonLines(logging.Formatter):
    """One JSON object per log line (ts, level, event and the record's `extra` fields)."""

    BASE: ClassVar[frozenset[str]] = frozenset(vars(logging.makeLogRecord({}))) | {"message", "color_message"}

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)),
            "level": record.levelname,
            "logger": record.name,
            "event": record.getMessage(),
        }
        line.update({k: v for k, v in vars(record).items() if k not in self.BASE})
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def setup_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    for name in ("expengine", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False


class ReadWriteLock:
    """Many readers or one exclusive holder (the stdlib has none; this is the textbook Condition one)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._exclusive = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._exclusive = True
            self._cond.wait_for(lambda: self._readers == 0)
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


class Service:
    """The one Engine, its writer thread and the per-thread read views."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="expengine-writer")
        self.rw = ReadWriteLock()
        self._local = threading.local()
        self._views: list[Any] = []
        self._views_lock = threading.Lock()
        self.busy: str | None = None  # the operation the writer runs now
        self.queued = 0
        self.started = time.time()
        self.counts = {"requests": 0, "errors": 0, "reads_during_write": 0}

    def _view(self) -> Engine:
        """This thread's read view, made again after a restore replaced the engine's connection."""
        view = getattr(self._local, "view", None)
        if view is None or self._local.parent is not self.engine.store.con:
            view = self.engine.reader()
            self._local.view, self._local.parent = view, self.engine.store.con
            with self._views_lock:
                self._views.append(view)
        return view

    def _close_views(self) -> None:
        with self._views_lock:
            for view in self._views:
                with contextlib.suppress(Exception):
                    view._store.con.close()
            self._views.clear()

    def read(self, op: ops.Op, args: ops.Args) -> Any:
        with self.rw.shared():
            if self.busy:
                self.counts["reads_during_write"] += 1
            return op.run(self._view(), args)

    def submit(self, name: str, op: ops.Op, args: ops.Args) -> Future[Any]:
        self.queued += 1

        def job() -> Any:
            self.queued -= 1
            if hasattr(os, "setpriority"):  # Linux nices one thread: background writes yield the CPU to queries
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WRITER_NICE)
            self.busy = name
            started = time.perf_counter()
            try:
                if op.mode == "exclusive":
                    with self.rw.exclusive():
                        self._close_views()
                        return op.run(self.engine, args)
                return op.run(self.engine, args)
            finally:
                self.busy = None
                log.info("write done", extra={"op": name, "ms": round((time.perf_counter() - started) * 1000, 1)})

        return self.writer.submit(job)

    async def execute(self, name: str, op: ops.Op, args: ops.Args) -> Any:
        if op.mode != "read":
            return await asyncio.wrap_future(self.submit(name, op, args))
        touch = isinstance(args, ops.QueryArgs) and args.touch
        if touch:
            args = args.model_copy(update={"touch": False})
        result = await run_in_threadpool(self.read, op, args)
        if touch:  # logged even when nothing was shown (outcome credit compares with those episodes)
            self.writer.submit(self._reinforce, result)
        return result

    def _reinforce(self, result: Any) -> None:
        try:
            self.engine.reinforce(result)
        except Exception:  # a lost reinforcement must not take the writer down
            log.exception("reinforce failed")

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "version": __version__,
            "pid": os.getpid(),
            "store": str(self.engine.store_dir),
            "busy": self.busy,
            "queued": self.queued,
            "uptime_s": round(time.time() - self.started, 1),
        }

    def close(self, grace: float) -> bool:
        """Let the writer finish (within `grace` s); False when a job still runs (it is abandoned, and
        a compaction left 'running' is rolled back from its snapshot at the next start)."""
        self.writer.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + grace
        while self.busy and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.busy:
            return False
        self._close_views()
        self.engine.close()
        return True


def error_body(exc: BaseException) -> tuple[int, dict[str, Any]]:
    if isinstance(exc, ExpengineError):
        status = next((code for cls, code in STATUS.items() if isinstance(exc, cls)), 500)
        return status, {
            "error": {"type": type(exc).__name__, "message": exc.message, "hint": exc.hint, "exit_code": exc.exit_code}
        }
    if isinstance(exc, HTTPException):
        return exc.status_code, {"error": {"type": "HTTPError", "message": exc.detail, "hint": None, "exit_code": 2}}
    return 500, {
        "error": {
            "type": type(exc).__name__,
            "message": str(exc) or type(exc).__name__,
            "hint": "see the server log",
            "exit_code": 1,
        }
    }


def json_response(payload: Any, status: int = 200) -> Response:
    text = payload if isinstance(payload, str) else json.dumps(payload, default=str, ensure_ascii=False)
    return Response(text, status_code=status, media_type="application/json")


async def read_body(request: Request, limit: int) -> Any:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"the body is over {limit} bytes")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise HTTPException(413, f"the body is over {limit} bytes")
    if not data:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"malformed JSON body: {exc}", hint="send one JSON object of arguments") from None


def build_app(
    service: Service,
    *,
    token: str | None = None,
    max_body: int = MAX_BODY_BYTES,
    on_shutdown: Callable[[], None] | None = None,
) -> ASGIApp:
    async def health(request: Request) -> Response:
        return json_response(service.health())

    async def stats(request: Request) -> Response:
        op = ops.lookup("stats")
        result = await service.execute("stats", op, ops.NoArgs())
        return json_response(
            {"store": json.loads(ops.dumps(op, result)), "server": {**service.health(), **service.counts}}
        )

    async def call(request: Request) -> Response:
        name = request.path_params["op"]
        op = ops.lookup(name)
        args = ops.parse(op, await read_body(request, max_body))
        return json_response(ops.dumps(op, await service.execute(name, op, args)))

    async def on_error(request: Request, exc: Exception) -> Response:
        status, body = error_body(exc)
        service.counts["errors"] += 1
        if status >= 500:
            log.error("request failed", exc_info=exc, extra={"path": request.url.path})
        return json_response(body, status)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if on_shutdown:
            on_shutdown()

    app = Starlette(
        routes=[Route("/health", health), Route("/stats", stats), Route("/v1/{op}", call, methods=["POST"])],
        exception_handlers={Exception: on_error, HTTPException: on_error},
        lifespan=lifespan,
    )
    return AccessLog(TokenAuth(app, token), service)


class TokenAuth:
    """Requests over TCP need `Authorization: Bearer <token>`; the Unix socket is guarded by file modes."""

    def __init__(self, app: ASGIApp, token: str | None):
        self.app, self.expected = app, f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server")
        if scope["type"] == "http" and server and server[1] is not None:  # a Unix socket has no port
            given = dict(scope["headers"]).get(b"authorization", b"")
            if self.expected is None or not hmac.compare_digest(given, self.expected):
                body = json.dumps(
                    {
                        "error": {
                            "type": "Unauthorized",
                            "message": "missing or wrong bearer token",
                            "hint": f"send the token in {TOKEN_FILE} in the store folder",
                            "exit_code": 2,
                        }
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class AccessLog:
    """One JSON log line per request: method, path, status, milliseconds."""

    def __init__(self, app: ASGIApp, service: Service):
        self.app, self.service = app, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), [0]

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        self.service.counts["requests"] += 1
        try:
            await self.app(scope, receive, capture)
        finally:
            log.info(
                "request",
                extra={
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status[0],
                    "ms": round((time.perf_counter() - started) * 1000, 2),
                },
            )


def ensure_token(store_dir: Path) -> str:
    """The bearer token for TCP, created once with mode 0600."""
    path = store_dir / TOKEN_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
    os.chmod(path, 0o600)
    return path.read_text().strip()


def _tcp_socket(address: str) -> socket.socket:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise InputError(f"--http expects HOST:PORT or PORT, got {address!r}", hint="e.g. --http 127.0.0.1:8765")
    sock = socket.create_server((host or "127.0.0.1", int(port)), reuse_port=False)
    return sock


def serve(engine: Engine, *, http: str | None = None, grace: float = 30.0, max_body: int = MAX_BODY_BYTES) -> int:
    """Run until SIGTERM/SIGINT. The engine is already open (so a busy store fails before we listen)."""
    import uvicorn

    store_dir = engine.store_dir
    if find_server(store_dir):
        raise LockedError(f"a server already runs for {store_dir}", hint="stop it first (SIGTERM)")
    engine.store  # noqa: B018  opens (and locks) the store for the server's lifetime, as a held Engine
    recovered = engine.recover_interrupted()
    if recovered:
        log.warning("recovered interrupted compaction", extra={"runs": recovered})
    preloaded = engine.warm()  # the model and the vectors queries read, now rather than on first use
    log.info("warm", extra={"vectors_in_memory": preloaded})
    import torch

    # one query embeds at a time per request thread; on two shared cores torch's own threads made a
    # one-sentence encode many times slower (bench/common.py: torch_threads)
    torch.set_num_threads(1)
    sys.setswitchinterval(0.001)  # a compaction's Python loops hand the GIL to a waiting query sooner
    with contextlib.suppress(ExpengineError):
        engine.query("warm up", k=1, touch=False)
    service = Service(engine)
    path = store_dir / SOCKET_FILE
    path.unlink(missing_ok=True)
    uds = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    uds.bind(str(path))
    os.chmod(path, 0o600)
    sockets = [uds]
    token = None
    if http:
        sockets.append(_tcp_socket(http if ":" in http else f"127.0.0.1:{http}"))
        token = ensure_token(store_dir)

    def on_shutdown() -> None:
        # here, not after `run`: uvicorn re-raises SIGTERM once it stops, which ends the process
        path.unlink(missing_ok=True)
        if not service.close(grace):
            log.warning("a write still runs at shutdown; abandoned (a compaction rolls back at the next start)")
            sys.stderr.flush()
            os._exit(0)  # the writer thread holds the DuckDB connection: no interpreter teardown under it
        log.info("stopped")

    app = build_app(service, token=token, max_body=max_body, on_shutdown=on_shutdown)
    config = uvicorn.Config(app, log_config=None, access_log=False, timeout_graceful_shutdown=int(grace))
    log.info("listening", extra={"socket": str(path), "http": http, "pid": os.getpid(), "recovered": len(recovered)})
    uvicorn.Server(config).run(sockets=sockets)
    return 0
