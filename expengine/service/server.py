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
import json
import logging
import os
import socket
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from .. import __version__
from ..errors import ExpengineError, InputError, LockedError
from . import ops
from .client import SOCKET_FILE, find_server, unix_address
from .edges import AccessLog, HostCheck, TokenAuth, ensure_token, tcp_socket

if TYPE_CHECKING:
    from ..engine import Engine

log = logging.getLogger("expengine.serve")
MAX_BODY_BYTES = 16 * 2**20  # an ingest's records or text; every other operation: operations.ARGS_BODY_BYTES
WRITER_NICE = 10


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

    def __init__(self, engine: Engine, reach: ops.Reach):
        self.engine = engine
        self.reach = reach  # what a client's ingest may read here
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="expengine-writer")
        self.rw = ReadWriteLock()
        self._local = threading.local()
        self._views: list[Any] = []
        self._views_lock = threading.Lock()
        self._generation = 0  # bumped when the views are closed: a thread's view of an older one is stale
        self.busy: str | None = None  # the operation the writer runs now
        self.queued = 0
        self.started = time.time()
        self.counts = {"requests": 0, "errors": 0, "reads_during_write": 0}

    def _view(self) -> Engine:
        """This thread's read view, made again once an exclusive operation closed the views (whether it
        replaced the engine's connection, as a restore does, or failed before touching anything)."""
        view = getattr(self._local, "view", None)
        if view is None or self._local.generation != self._generation:
            with self._views_lock:
                view = self.engine.reader()
                self._local.view, self._local.generation = view, self._generation
                self._views.append(view)
        return view

    def _close_views(self) -> None:
        with self._views_lock:
            self._generation += 1
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
            hooks = {"reach": self.reach} if op.reach else {}
            try:
                if op.mode == "exclusive":
                    with self.rw.exclusive():
                        self._close_views()
                        return op.run(self.engine, args, **hooks)
                return op.run(self.engine, args, **hooks)
            except BaseException:
                if op.mode != "exclusive":  # a failed compaction put its snapshot back: the views' file is gone
                    with self.rw.exclusive():
                        self._close_views()
                raise
            finally:
                self.busy = None
                log.info("write done", extra={"op": name, "ms": round((time.perf_counter() - started) * 1000, 1)})

        return self.writer.submit(job)

    async def execute(self, name: str, op: ops.Op, args: ops.Args) -> Any:
        if op.mode != "read":
            return await asyncio.wrap_future(self.submit(name, op, args))
        touch = name == "query" and getattr(args, "touch", False)
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
        return exc.http_status, {
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


def error_handlers(counts: dict[str, int]) -> dict[Any, Callable[..., Any]]:
    """Starlette's handlers: every error as the JSON body of error_body, counted; a 500 is logged."""

    async def on_error(request: Request, exc: Exception) -> Response:
        status, body = error_body(exc)
        counts["errors"] += 1
        if status >= 500:  # a domain error (a damaged snapshot, a read-only store) is its one line, no traceback
            trace = None if isinstance(exc, ExpengineError) else exc
            log.error("request failed", exc_info=trace, extra={"path": request.url.path, "error": str(exc)})
        return json_response(body, status)

    return {ExpengineError: on_error, HTTPException: on_error, Exception: on_error}


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
    except RecursionError:
        raise InputError(
            f"the JSON is nested deeper than {ops.MAX_JSON_DEPTH} levels", hint="send flatter arguments"
        ) from None


def build_app(
    service: Service,
    *,
    token: str | None = None,
    max_body: int = MAX_BODY_BYTES,
    on_shutdown: Callable[[], None] | None = None,
    ui: bool = False,
) -> ASGIApp:
    async def health(request: Request) -> Response:
        return json_response(service.health())

    async def stats(request: Request) -> Response:
        op = ops.lookup("stats")
        result = await service.execute("stats", op, op.args())
        return json_response(
            {"store": json.loads(ops.dumps(op, result)), "server": {**service.health(), **service.counts}}
        )

    async def call(request: Request) -> Response:
        name = request.path_params["op"]
        op = ops.lookup(name)
        limit = max_body if op.max_body is None else min(op.max_body, max_body)
        args = ops.parse(op, await read_body(request, limit))
        return json_response(ops.dumps(op, await service.execute(name, op, args)))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if on_shutdown:
            on_shutdown()

    app = Starlette(
        routes=[Route("/health", health), Route("/stats", stats), Route("/v1/{op}", call, methods=["POST"])],
        # ExpengineError by name: Starlette re-raises what only the `Exception` handler catches, and
        # uvicorn then logs every 4xx as a traceback (a client could fill the log, or a stderr pipe)
        exception_handlers=error_handlers(service.counts),
        lifespan=lifespan,
    )
    api: ASGIApp = TokenAuth(app, token)
    if ui and token:  # the browser's login checks the API's token: TCP only (`serve` refuses --ui without --http)
        from .ui import UiGate, build_ui

        api = UiGate(build_ui(service, token), api)
    return AccessLog(HostCheck(api), service)


def serve(
    engine: Engine,
    *,
    http: str | None = None,
    grace: float = 30.0,
    max_body: int = MAX_BODY_BYTES,
    ingest_roots: list[str] | tuple[str, ...] = (),
    ui: bool = False,
) -> int:
    """Run until SIGTERM/SIGINT. A busy store fails here, and the socket goes with the failure."""
    store_dir = engine.store_dir
    if find_server(store_dir):
        raise LockedError(f"a server already runs for {store_dir}", hint="stop it first (SIGTERM)")
    reach = ops.Reach.of(ingest_roots, engine.config.serve)
    path = store_dir / SOCKET_FILE
    path.unlink(missing_ok=True)
    # listening before the store is locked: a CLI call while the store opens (migrations) and warms up
    # waits in the backlog for its answer (up to its --wait) instead of finding it locked and no server
    uds = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with unix_address(path) as address:
        uds.bind(address)
    os.chmod(path, 0o600)
    uds.listen(128)
    try:
        engine.store  # noqa: B018  opens (and locks) the store for the server's lifetime, as a held Engine
        return _run(engine, reach, uds, http=http, grace=grace, max_body=max_body, ui=ui)
    finally:
        path.unlink(missing_ok=True)
        uds.close()


class _Server(uvicorn.Server):
    """uvicorn's Server, noting when the stop signal came: one `--grace` covers the whole shutdown
    (uvicorn's wait for open requests, then ours for the writer)."""

    stop_requested: float | None = None

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self.stop_requested is None:
            self.stop_requested = time.monotonic()
        super().handle_exit(sig, frame)


def _run(
    engine: Engine, reach: ops.Reach, uds: socket.socket, *, http: str | None, grace: float, max_body: int, ui: bool
) -> int:
    store_dir = engine.store_dir
    recovered = engine.recover_interrupted()
    if recovered:
        log.warning("recovered interrupted compaction", extra={"runs": recovered})
    preloaded = engine.warm()  # the model and the vectors queries read, now rather than on first use
    log.info("warm", extra={"vectors_in_memory": preloaded})
    torch = sys.modules.get("torch")  # loaded only by the torch encoder; the ONNX one runs one thread a call
    if torch is not None:
        # one query embeds at a time per request thread; on two shared cores torch's own threads made a
        # one-sentence encode many times slower (bench/common.py: torch_threads)
        torch.set_num_threads(1)
    sys.setswitchinterval(0.001)  # a compaction's Python loops hand the GIL to a waiting query sooner
    with contextlib.suppress(ExpengineError):
        engine.query("warm up", k=1, touch=False)
    service = Service(engine, reach)
    path = store_dir / SOCKET_FILE
    sockets = [uds]
    token = None
    if http:
        sockets.append(tcp_socket(http))
        token = ensure_token(store_dir)

    def on_shutdown() -> None:
        # here, not after `run`: uvicorn re-raises SIGTERM once it stops, which ends the process
        path.unlink(missing_ok=True)
        since = server.stop_requested or time.monotonic()
        if not service.close(max(0.0, grace - (time.monotonic() - since))):
            log.warning("a write still runs at shutdown; abandoned (a compaction rolls back at the next start)")
            sys.stderr.flush()
            os._exit(0)  # the writer thread holds the DuckDB connection: no interpreter teardown under it
        log.info("stopped")

    app = build_app(service, token=token, max_body=max_body, on_shutdown=on_shutdown, ui=ui)
    config = uvicorn.Config(app, log_config=None, access_log=False, timeout_graceful_shutdown=grace)  # type: ignore[arg-type]
    server = _Server(config)
    log.info(
        "listening",
        extra={
            "socket": str(path),
            "http": http,
            "ui": ui,
            "pid": os.getpid(),
            "recovered": len(recovered),
            "ingest_roots": [str(r) for r in reach.roots],
        },
    )
    server.run(sockets=sockets)
    return 0
