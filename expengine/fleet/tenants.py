"""`expengine serve --root R`: one process serves many tenants, one store each.

Requests name their store (`POST /v1/<name>/<op>`, the ops of the one-store server). Each tenant's
bearer token is its store's `serve.token` (made on first start, mode 0600): a token opens only its
own store, so another tenant's token gets 403 and no token, or an unknown one, 401, before any store
is touched. Stores open on their first request, sharing this process's embedding model, and close
when idle longer than `idle_s` or when more than `max_open` are open (the least recently used, once
its writer is idle). An open store holds its lock, so a second process that claims it gets 409."""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import AsyncIterator

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import InputError, LockedError, NotFoundError
from ..service import ops
from ..service.client import FLEET_SERVERS, TOKEN_FILE
from ..service.edges import ensure_token
from ..service.server import MAX_BODY_BYTES, Service, error_handlers, json_response, read_body
from . import check_name, fleet_stores
from .runtime import store_engine

log = logging.getLogger("expengine.serve")
RESCAN_S = 5.0


class Tenants:
    """The open stores of a fleet root, by name, opened lazily and closed when idle or over the bound."""

    def __init__(
        self,
        root: Path,
        *,
        max_open: int = 16,
        idle_s: float = 600.0,
        lock_timeout: float = 2.0,
        only: set[str] | None = None,
    ):
        self.root, self.max_open, self.idle_s, self.lock_timeout = root, max_open, idle_s, lock_timeout
        self.only = only  # the names this process serves (its line of the shard map); None: all
        self._open: dict[str, Service] = {}
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()
        self._tokens: dict[str, str] = {}  # token -> store name
        self._scanned = 0.0  # when the root was last listed for new stores (`_load_new`)
        self.counts = {"requests": 0, "errors": 0, "opened": 0, "closed": 0}

    def served(self) -> dict[str, Path]:
        stores = fleet_stores(self.root)
        return {n: p for n, p in stores.items() if self.only is None or n in self.only}

    def load_tokens(self) -> None:
        """Every served store's token (created when missing), at start. Two stores with one token (a store
        copied with its `serve.token`) would read each other: refused, naming both."""
        self._tokens, self._scanned = {}, time.monotonic()
        for name, path in self.served().items():
            token = ensure_token(path)
            other = self._tokens.setdefault(token, name)
            if other != name:
                raise InputError(
                    f"the stores {other!r} and {name!r} of {self.root} have the same {TOKEN_FILE}, so each "
                    "tenant could read the other",
                    hint=f"rotate one: delete {path / TOKEN_FILE} (a new one is made at start) and give it to its clients",
                )

    def _load_new(self) -> None:
        """The tokens of stores added since the last look, at most once per `RESCAN_S` (an unknown token is
        all it takes to ask, so it must not make the server read or write every store's file each time).
        A new store whose token another already has is left out, with a warning."""
        if time.monotonic() - self._scanned < RESCAN_S:
            return
        self._scanned = time.monotonic()
        known = set(self._tokens.values())
        for name, path in self.served().items():
            if name in known:
                continue
            token = ensure_token(path)
            other = self._tokens.setdefault(token, name)
            if other != name:
                log.warning("store left out: its token is another store's", extra={"store": name, "other": other})

    def tenant_of(self, token: str) -> str | None:
        for attempt in range(2):
            for known, name in self._tokens.items():
                if hmac.compare_digest(known.encode(), token.encode()):
                    return name
            if attempt == 0:
                self._load_new()  # a store added since: its token is new
        return None

    def service(self, name: str) -> Service:
        """The open store's service, opened now if it is not (blocking: call off the event loop)."""
        with self._lock:
            found = self._open.get(name)
            if found is None:
                found = self._open[name] = self._start(name)
                self.counts["opened"] += 1
            self._used[name] = time.monotonic()
            self._shed(keep=name)
            return found

    def _start(self, name: str) -> Service:
        path = self.served().get(name)
        if path is None:
            raise NotFoundError(f"no store {name!r} is served here", hint="check the name and the shard map")
        # stores with the same model share it: loaded once in this process
        engine = store_engine(path, lock_timeout=self.lock_timeout)
        try:
            engine.store  # noqa: B018  held open (and locked) while it is in the pool
        except LockedError as exc:
            raise LockedError(f"the store {name!r} is owned by another process", hint=exc.hint) from None
        recovered = engine.recover_interrupted()
        if recovered:
            log.warning("recovered interrupted compaction", extra={"store": name, "runs": recovered})
        return Service(engine, ops.Reach.of((), engine.config.serve))

    def _shed(self, keep: str) -> None:
        """Close idle stores, then the least recently used ones past `max_open` (never one mid-write)."""
        now = time.monotonic()
        by_age = sorted(self._used, key=self._used.__getitem__)
        for name in by_age:
            over = len(self._open) > self.max_open
            if name == keep or not (over or now - self._used[name] > self.idle_s):
                continue
            service = self._open[name]
            if service.busy or service.queued:
                continue
            if service.close(grace=0.0):
                del self._open[name], self._used[name]
                self.counts["closed"] += 1

    def open_names(self) -> list[str]:
        with self._lock:
            return sorted(self._open)

    def close(self, grace: float) -> None:
        with self._lock:
            for service in self._open.values():
                service.close(grace)
            self._open.clear()
            self._used.clear()


def _refuse(status: int, message: str) -> Response:
    hint = f"send the {TOKEN_FILE} of your own store as `Authorization: Bearer <token>`"
    kind = "Unauthorized" if status == 401 else "Forbidden"
    response = json_response({"error": {"type": kind, "message": message, "hint": hint, "exit_code": 2}}, status)
    if status == 401:
        response.headers["www-authenticate"] = "Bearer"
    return response


def build_app(tenants: Tenants, *, max_body: int = MAX_BODY_BYTES) -> Starlette:
    def tenant(request: Request) -> str | None:
        scheme, _, given = request.headers.get("authorization", "").strip().partition(" ")
        return tenants.tenant_of(given.strip()) if scheme.lower() == "bearer" and given.strip() else None

    def authorised(request: Request, name: str) -> Response | None:
        found = tenant(request)
        if found is None:
            return _refuse(401, "missing or unknown bearer token")
        if found != name:
            return _refuse(403, f"this token is not for the store {name!r}")
        return None

    async def call(request: Request) -> Response:
        tenants.counts["requests"] += 1
        name, op_name = request.path_params["store"], request.path_params["op"]
        check_name(name)
        refused = authorised(request, name)
        if refused is not None:
            return refused
        op = ops.lookup(op_name)
        limit = max_body if op.max_body is None else min(op.max_body, max_body)
        args = ops.parse(op, await read_body(request, limit))
        service = await run_in_threadpool(tenants.service, name)
        return json_response(ops.dumps(op, await service.execute(op_name, op, args)))

    async def health(request: Request) -> Response:
        """Up or not, for anyone; the counters for a tenant's token only."""
        if tenant(request) is None:
            return json_response({"status": "ok"})
        return json_response({"status": "ok", "open": len(tenants.open_names()), **tenants.counts})

    async def store_health(request: Request) -> Response:
        """Whether this process serves the store for this token (how `mcp --root` finds its server)."""
        name = check_name(request.path_params["store"])
        refused = authorised(request, name)
        return refused or json_response({"status": "ok", "store": name, "open": name in tenants.open_names()})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        server_entry(tenants.root).unlink(missing_ok=True)
        tenants.close(grace=30.0)

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/{store}/health", store_health, methods=["GET"]),
            Route("/v1/{store}/{op}", call, methods=["POST"]),
        ],
        exception_handlers=error_handlers(tenants.counts),
        lifespan=lifespan,
    )


def read_shard_map(path: Path, shard: str) -> set[str]:
    """The store names `shard` serves: the map is lines of `<store> <shard>` (`#` starts a comment)."""
    names = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 2:
            raise InputError(f"{path}:{number}: expected `<store> <shard>`, got {line.strip()!r}")
        if fields[1] == shard:
            names.add(check_name(fields[0]))
    return names


def serve_fleet(tenants: Tenants, *, http: str, max_body: int = MAX_BODY_BYTES) -> int:
    """Run until SIGTERM/SIGINT on TCP `http` (HOST:PORT or PORT), every request with a tenant's token."""
    import uvicorn

    from ..service.edges import HostCheck, tcp_socket

    tenants.load_tokens()
    sock = tcp_socket(http)
    host, port = sock.getsockname()[:2]
    log.info("listening", extra={"http": f"{host}:{port}", "root": str(tenants.root), "stores": len(tenants._tokens)})
    app = HostCheck(build_app(tenants, max_body=max_body))
    config = uvicorn.Config(app, log_config=None, access_log=False)
    entry = server_entry(tenants.root)
    entry.parent.mkdir(exist_ok=True)
    local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else f"[{host}]" if ":" in host else host
    entry.write_text(json.dumps({"url": f"http://{local}:{port}", "pid": os.getpid()}), encoding="utf-8")
    uvicorn.Server(config).run(sockets=[sock])  # the lifespan removes the entry (uvicorn re-raises SIGTERM)
    return 0


def server_entry(root: Path) -> Path:
    """`<root>/.servers/<pid>.json`: this process's address while it serves, so that `mcp --root R
    --store-name N` on the machine finds it. A killed process leaves its file; nothing answers there, so
    it is skipped, and the next process with that pid writes over it."""
    return root / FLEET_SERVERS / f"{os.getpid()}.json"
