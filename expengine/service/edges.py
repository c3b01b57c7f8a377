"""The server's HTTP edges: JSON log lines, the bearer-token check on TCP, the access log and the
token file. `server.py` wires them around the Starlette app."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import secrets
import socket
import sys
import time
from pathlib import Path
from typing import ClassVar, Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import InputError
from .client import TOKEN_FILE

log = logging.getLogger("expengine.serve")


class Counted(Protocol):
    """What the access log needs of the service: its request counters."""

    counts: dict[str, int]


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


def host_allowed(host: str, server_host: str) -> bool:
    """Whether a TCP request's Host header names this server: an IP address (the bound one or another of
    this machine's), `localhost`, this machine's name, or the name the server itself was reached by. A
    web page that turned its own domain's DNS to this machine (DNS rebinding) sends its domain: refused."""
    name = host[1 : host.find("]")] if host.startswith("[") else host.rpartition(":")[0] if ":" in host else host
    name = name.lower().rstrip(".")
    if not host or name in ("localhost", server_host.lower(), socket.gethostname().lower(), socket.getfqdn().lower()):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


async def refuse(send: Send, status: int, kind: str, message: str, hint: str, *extra: tuple[bytes, bytes]) -> None:
    """An edge's refusal, as the JSON error body every other answer has."""
    body = json.dumps({"error": {"type": kind, "message": message, "hint": hint, "exit_code": 2}}).encode()
    headers = [(b"content-type", b"application/json"), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class HostCheck:
    """TCP requests must name this server in `Host` (`host_allowed`); the Unix socket has no host."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server")
        if scope["type"] == "http" and server and server[1] is not None:
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1").strip()
            if not host_allowed(host, str(server[0])):
                shown = host[:80]
                await refuse(send, 421, "MisdirectedRequest", f"the Host {shown!r} is not this server", HOST_HINT)
                return
        await self.app(scope, receive, send)


HOST_HINT = "connect by this machine's address or name (a page on another site cannot reach the server)"


class TokenAuth:
    """Requests over TCP need `Authorization: Bearer <token>` (the scheme in any case, RFC 9110); the Unix
    socket is guarded by file modes."""

    def __init__(self, app: ASGIApp, token: str | None):
        self.app, self.expected = app, token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server")
        if scope["type"] == "http" and server and server[1] is not None:  # a Unix socket has no port
            scheme, _, given = dict(scope["headers"]).get(b"authorization", b"").strip().partition(b" ")
            if (
                self.expected is None
                or scheme.lower() != b"bearer"
                or not hmac.compare_digest(given.strip(), self.expected)
            ):
                hint = f"send the token in {TOKEN_FILE} in the store folder"
                challenge = (b"www-authenticate", b"Bearer")
                await refuse(send, 401, "Unauthorized", "missing or wrong bearer token", hint, challenge)
                return
        await self.app(scope, receive, send)


class AccessLog:
    """One JSON log line per request: method, path, status, milliseconds."""

    def __init__(self, app: ASGIApp, service: Counted):
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


def tcp_socket(address: str) -> socket.socket:
    """Listen on HOST:PORT, PORT or [IPv6]:PORT; a bad address or one in use is one line (exit 2)."""
    host, sep, port = (address if ":" in address else f"127.0.0.1:{address}").rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InputError(f"--http expects HOST:PORT or PORT, got {address!r}", hint="e.g. --http 127.0.0.1:8765")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host or "127.0.0.1", int(port)), family=family, reuse_port=False)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise InputError(f"cannot listen on {address}: {why}", hint="pick a free port, or stop what holds it") from None
