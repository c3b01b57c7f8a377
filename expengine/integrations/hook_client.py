"""The command Claude Code runs at each hook: `python3 -S hook_client.py [--store DIR] EVENT`, the hook's
JSON on stdin.

A hook runs at every prompt and every failed command, so its cost is the agent's wait. This file imports
the standard library only (and nothing of expengine, whose package start-up alone costs more than the
budget), so that with `-S` a hook answered by a running `expengine serve` costs one bare Python start-up
and one request on the store's socket. The request is written by hand, not through http.client: that
module's import (the email package) is a fifth of the budget, and one POST with `Connection: close`
needs no more than a status line and a body.

- A context event (SessionStart, UserPromptSubmit, PostToolUse*) asks the server's `agent_context`
  with the hook's cwd and session; the server names the project.
- An ingest event (Stop, SessionEnd, …) starts the detached worker that stores the transcript's new lines.
- No server on the socket: the cold path, `python -m expengine.integrations.hooks`, opens the store.

Every hook fails open: whatever goes wrong, stdout stays empty, the error goes to the store's
`hooks.log`, and the exit code is 0, so a broken memory never stops an agent.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # holds `expengine/`
COLD_MODULE = "expengine.integrations.hooks"
CONTEXT_EVENTS = {
    "SessionStart": "session-start",
    "UserPromptSubmit": "prompt",
    "PostToolUse": "failure",
    "PostToolUseFailure": "failure",
}
INGEST_EVENTS = ("Stop", "SubagentStop", "SessionEnd", "PreCompact")
EVENTS = (*CONTEXT_EVENTS, *INGEST_EVENTS)
SHELL_TOOLS = ("Bash", "shell", "local_shell")
SOCKET_FILE = "serve.sock"  # the server's (service/client.py)
LOG_FILE = "hooks.log"
LOG_BYTES = 1_000_000  # the log is cut to its newer half past this
SERVER_TIMEOUT_S = 8.0  # a server that accepted but does not answer in time: the hook answers nothing
# (under the 10 s that connect gives Claude Code's hook: claude_code.TIMEOUT_S)
FOREGROUND_ENV = "EXPENGINE_HOOK_FOREGROUND"  # "1": ingest in the hook's own process (tests, replays)
BUDGET_ENV = "EXPENGINE_HOOK_BUDGET"  # tokens of SessionStart context (default 400)


class ServerError(Exception):
    """The server answered, with an error: logged, and the hook prints nothing (not the cold path)."""


def store_dir(given: str | None) -> str:
    if given:
        return os.path.abspath(os.path.expanduser(given))
    sys.path.insert(0, ROOT)
    from expengine.paths import default_store_dir  # standard library only; costs the package's start-up

    return str(default_store_dir())


def log(store: str, event: str, message: str) -> None:
    """One JSON line in the store's hooks.log (never raises: logging is the last resort)."""
    try:
        if not os.path.isdir(store):
            return
        path = os.path.join(store, LOG_FILE)
        if os.path.exists(path) and os.path.getsize(path) > LOG_BYTES:
            with open(path, "rb") as f:
                data = f.read()
            with open(path, "wb") as f:
                f.write(data[len(data) // 2 :].split(b"\n", 1)[-1])
        line = {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "event": event, "message": message}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
    except Exception:
        pass


def failed_output(event: str, payload: dict) -> str | None:
    """The error text of a failed shell command, or None (a success, or another tool)."""
    if payload.get("tool_name") not in SHELL_TOOLS:
        return None
    if event == "PostToolUseFailure":
        return str(payload.get("error") or payload.get("error_message") or "error")
    response = payload.get("tool_response")
    if isinstance(response, dict):
        code = response.get("exit_code", response.get("exitCode"))
        if response.get("is_error") or (isinstance(code, int) and code != 0):
            return "\n".join(str(response.get(k) or "") for k in ("stdout", "stderr")).strip() or "error"
    return None


def context_request(event: str, payload: dict) -> dict | None:
    """The `agent_context` arguments this event asks for, or None when it asks for nothing."""
    situation = CONTEXT_EVENTS[event]
    text = None
    if situation == "prompt":
        text = str(payload.get("prompt") or "").strip()
    elif situation == "failure":
        text = failed_output(event, payload)
    if situation != "session-start" and not text:
        return None
    args: dict[str, object] = {"situation": situation, "cwd": str(payload.get("cwd") or os.getcwd()), "text": text}
    if payload.get("session_id"):
        args["session"] = str(payload["session_id"])
    if situation == "session-start" and os.environ.get(BUDGET_ENV):
        args["budget"] = int(os.environ[BUDGET_ENV])
    return args


def ask_server(store: str, args: dict) -> str | None:
    """The context text from the store's running server; None when no server listens on its socket.
    The socket is reached from the store folder, so a deep folder never meets sockaddr_un's limit."""
    body = json.dumps(args).encode()
    request = (
        b"POST /v1/agent_context HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(SERVER_TIMEOUT_S)
        here = os.getcwd()
        os.chdir(store)
        try:
            sock.connect(SOCKET_FILE)
        except (FileNotFoundError, ConnectionRefusedError):
            return None
        finally:
            os.chdir(here)
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    finally:
        sock.close()
    head, _, payload = b"".join(chunks).partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1:2]
    if status != [b"200"]:
        raise ServerError(f"the server answered {b' '.join(status).decode() or 'nothing'}: {payload[:200]!r}")
    return str(json.loads(payload).get("text") or "")


def cold(store: str, event: str, raw: str) -> str:
    """The hook run by the package itself (it opens the store): its stdout."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    child = subprocess.run(
        [sys.executable, "-m", COLD_MODULE, "--store", store, event],
        input=raw,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    return child.stdout.strip()


def hand_off(store: str, payload: dict) -> None:
    """The transcript's new lines go to a detached worker: the agent goes on at once."""
    import subprocess

    transcript = payload.get("transcript_path")
    if not transcript:
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    subprocess.Popen(
        [sys.executable, "-m", COLD_MODULE, "--store", store, "ingest-transcript", str(transcript)]
        + [str(payload.get("cwd") or "")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        close_fds=True,
    )


def run(event: str, raw: str, store: str) -> str:
    """What the hook prints for `event` given its stdin `raw` ("" for nothing)."""
    payload = json.loads(raw) if raw.strip() else {}
    if not isinstance(payload, dict):
        raise ValueError("the hook's stdin is not a JSON object")
    event = event or str(payload.get("hook_event_name") or "")
    if event in INGEST_EVENTS:
        if os.environ.get(FOREGROUND_ENV) == "1":
            return cold(store, event, raw)
        hand_off(store, payload)
        return ""
    if event not in CONTEXT_EVENTS:
        raise ValueError(f"unknown hook event {event!r} (one of {', '.join(EVENTS)})")
    args = context_request(event, payload)
    if not args:
        return ""
    if not os.path.exists(os.path.join(store, "expengine.duckdb")):
        return ""  # no store yet: nothing is known, and a hook never creates one
    text = ask_server(store, args) if os.path.exists(os.path.join(store, SOCKET_FILE)) else None
    if text is None:
        return cold(store, event, raw)
    return hook_output(event, text)


def hook_output(event: str, text: str) -> str:
    """The context as Claude Code reads it from a hook's stdout ("" for none)."""
    if not text:
        return ""
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


def arguments(argv: list[str] | None) -> tuple[str | None, list[str]]:
    """(the `--store DIR` given or None, the rest) of a hook's command line."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--store"] and len(args) > 1:
        return args[1], args[2:]
    return None, args


def fail_open(event: str, given: str | None, hook: Callable[[str], str]) -> int:
    """Print what `hook(store)` returns; whatever goes wrong, print nothing and log it to the store's
    hooks.log (the agent goes on without memory). The exit code is always 0."""
    store = ""
    try:
        store = store_dir(given)
        out = hook(store)
    except BaseException as exc:
        import traceback

        log(store, event or "?", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
        return 0
    if out:
        sys.stdout.write(out + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`[--store DIR] EVENT`. Always exits 0."""
    given, args = arguments(argv)
    event = args[0] if args else ""
    return fail_open(event, given, lambda store: run(event, sys.stdin.read(), store))


if __name__ == "__main__":
    sys.exit(main())
