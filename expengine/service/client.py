"""Talk to a running `expengine serve` over its Unix socket (or TCP with the token).

Imports only the standard library: a CLI call answered by the server must start in well under a
second, so nothing here may pull in torch, DuckDB or LanceDB.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
from pathlib import Path
from typing import Any, Iterator

from .. import errors
from ..errors import ExpengineError

SOCKET_FILE = "serve.sock"
TOKEN_FILE = "serve.token"
FLEET_SERVERS = ".servers"  # <root>/.servers/<pid>.json: the address of each `serve --root` process of a fleet
HEALTH_TIMEOUT_S = 0.5
BUSY_HEALTH_TIMEOUT_S = 10.0
SUN_PATH_BYTES = 100  # sockaddr_un holds 108 bytes on Linux (104 on macOS), the final NUL included


@contextlib.contextmanager
def unix_address(path: Path) -> Iterator[str]:
    """The address to bind or connect `path` by. A path too long for sockaddr_un goes through its folder's
    file descriptor (/proc/self/fd/N/NAME, Linux), so a store folder may be as deep as any other folder."""
    if len(os.fsencode(str(path))) < SUN_PATH_BYTES or not os.path.isdir("/proc/self/fd"):
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


class _UnixConnection(http.client.HTTPConnection):
    """http.client over AF_UNIX: the stdlib speaks HTTP/1.1, only the transport differs."""

    def __init__(self, path: str, timeout: float | None):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            with unix_address(Path(self.socket_path)) as address:
                sock.connect(address)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def remote_error(status: int, body: Any) -> ExpengineError:
    """The server's error as the exception direct mode would have raised, with the same exit code."""
    err = (body or {}).get("error") if isinstance(body, dict) else None
    err = err if isinstance(err, dict) else {}
    cls = getattr(errors, str(err.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, ExpengineError)):
        cls = ExpengineError
    exc = cls(err.get("message") or f"the server answered HTTP {status}", hint=err.get("hint"))
    exc.exit_code = int(err.get("exit_code") or 1)
    return exc


class Client:
    """One server; `call(op, args)` returns the operation's JSON or raises its error."""

    def __init__(
        self,
        *,
        socket_path: str | Path | None = None,
        url: str | None = None,
        token: str | None = None,
        store: str | None = None,
    ):
        self.socket_path = str(socket_path) if socket_path else None
        self.url, self.token = url, token
        self.prefix = f"/v1/{store}" if store else "/v1"  # a fleet server names the store in the path

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        if self.socket_path:
            return _UnixConnection(self.socket_path, timeout)
        host, _, port = (self.url or "").removeprefix("http://").rstrip("/").rpartition(":")
        return http.client.HTTPConnection(host, int(port), timeout=timeout)

    def request(self, method: str, path: str, body: Any = None, *, timeout: float | None = None) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        conn = self._connection(timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        try:
            return response.status, json.loads(raw or b"null")
        except json.JSONDecodeError:
            return response.status, {"error": {"message": raw.decode(errors="replace")[:200]}}

    def health(self, timeout: float = HEALTH_TIMEOUT_S) -> dict[str, Any] | None:
        """The server's /health answer, or None when nothing answers in time."""
        try:
            status, body = self.request("GET", "/health", timeout=timeout)
        except OSError:
            return None
        return body if status == 200 and isinstance(body, dict) else None

    def call(self, op: str, args: dict[str, Any] | None = None) -> Any:
        """The operation's JSON; an error answer is raised as `remote_error` makes it."""
        status, body = self.request("POST", f"{self.prefix}/{op}", args or {})
        if status >= 400:
            raise remote_error(status, body)
        return body


def find_server(store_dir: Path, *, wait: float = BUSY_HEALTH_TIMEOUT_S) -> Client | None:
    """The server owning `store_dir`, if its socket exists and answers /health. A socket nobody listens
    on (a killed server) is refused at once; a listening but busy or still warming server (it listens
    before it loads the model) is asked again until `wait` seconds have passed."""
    path = store_dir / SOCKET_FILE
    if not path.exists():
        return None
    client = Client(socket_path=path)
    try:
        status, body = client.request("GET", "/health", timeout=HEALTH_TIMEOUT_S)
    except TimeoutError:
        return client if client.health(timeout=max(wait, HEALTH_TIMEOUT_S)) else None
    except OSError:
        return None
    return client if status == 200 and isinstance(body, dict) else None


def find_fleet_server(root: Path, name: str) -> Client | None:
    """The `serve --root` process that serves the store `name` of the fleet `root`: the first listed one
    that accepts the store's own token (a process of another shard refuses it; a dead one is skipped)."""
    folder, token_file = root / FLEET_SERVERS, root / name / TOKEN_FILE
    if not folder.is_dir() or not token_file.exists():
        return None
    token = token_file.read_text(encoding="utf-8").strip()
    for entry in sorted(folder.glob("*.json")):
        try:
            url = json.loads(entry.read_text(encoding="utf-8"))["url"]
            status, _ = Client(url=url, token=token).request("GET", f"/v1/{name}/health", timeout=HEALTH_TIMEOUT_S)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if status == 200:
            return Client(url=url, token=token, store=name)
    return None
