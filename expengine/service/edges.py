"""The server's HTTP edges: JSON log lines, the bearer-token check on TCP, the access log and the
token file. `server.py` wires them around the Starlette app."""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import sys
import time
from pathlib import Path
from typing import ClassVar, Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
