"""`expengine hook EVENT`: what Claude Code runs at each moment of a session, with the hook's JSON on stdin.

- SessionStart: the project's standing knowledge (test and build commands, what is not installed,
  pitfalls with their fixes), within a budget;
- UserPromptSubmit: the few units relevant to the prompt (nothing relevant prints nothing);
- PostToolUse / PostToolUseFailure on a failed command: the fix that worked for that error's kind;
- Stop / SubagentStop / SessionEnd: the transcript's new lines are handed to a detached process that
  ingests them (transcripts.py), so the agent never waits for the store.

Context goes out as Claude Code reads it: `{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`
on stdout. Every hook fails open: whatever goes wrong, stdout stays empty, the error goes to the store's
`hooks.log`, and the exit code is 0, so a broken memory never stops an agent.

Imports only the standard library and the client at module level: through a running `expengine serve`
a hook is one HTTP call on the store's socket. Without a server, the store is opened here (cold).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from ..ingest.sessions import project_of

CONTEXT_EVENTS = {
    "SessionStart": "session-start",
    "UserPromptSubmit": "prompt",
    "PostToolUse": "failure",
    "PostToolUseFailure": "failure",
}
INGEST_EVENTS = ("Stop", "SubagentStop", "SessionEnd", "PreCompact")
EVENTS = (*CONTEXT_EVENTS, *INGEST_EVENTS)
LOG_FILE = "hooks.log"
LOG_BYTES = 1_000_000  # the log is cut to its newer half past this
SERVER_WAIT_S = 0.3  # a busy server is not waited for: the hook answers nothing instead
COLD_LOCK_WAIT_S = 1.0
FOREGROUND_ENV = "EXPENGINE_HOOK_FOREGROUND"  # "1": ingest in the hook's own process (tests, replays)
BUDGET_ENV = "EXPENGINE_HOOK_BUDGET"  # tokens of SessionStart context (default 400)


def store_dir(given: str | None = None) -> Path:
    from ..paths import default_store_dir

    return Path(given).expanduser() if given else default_store_dir()


def log(store: Path, event: str, message: str) -> None:
    """One JSON line in the store's hooks.log (never raises: logging is the last resort)."""
    try:
        if not store.is_dir():
            return
        path = store / LOG_FILE
        if path.exists() and path.stat().st_size > LOG_BYTES:
            data = path.read_bytes()
            path.write_bytes(data[len(data) // 2 :].split(b"\n", 1)[-1])
        line = {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "event": event, "message": message}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
    except Exception:
        pass


def failed_output(event: str, payload: dict[str, Any]) -> str | None:
    """The error text of a failed shell command, or None (a success, or another tool)."""
    if payload.get("tool_name") not in ("Bash", "shell", "local_shell"):
        return None
    if event == "PostToolUseFailure":
        return str(payload.get("error") or payload.get("error_message") or "error")
    response = payload.get("tool_response")
    if isinstance(response, dict):
        code = response.get("exit_code", response.get("exitCode"))
        if response.get("is_error") or (isinstance(code, int) and code != 0):
            return "\n".join(str(response.get(k) or "") for k in ("stdout", "stderr")).strip() or "error"
    return None


def context_request(event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The `agent_context` arguments this event asks for, or None when it asks for nothing."""
    situation = CONTEXT_EVENTS[event]
    project = project_of(str(payload.get("cwd") or os.getcwd())) or ""
    text: str | None = None
    if situation == "prompt":
        text = str(payload.get("prompt") or "").strip()
    elif situation == "failure":
        text = failed_output(event, payload)
    if situation != "session-start" and not text:
        return None
    args: dict[str, Any] = {"situation": situation, "project": project, "text": text}
    if situation == "session-start" and os.environ.get(BUDGET_ENV):
        args["budget"] = int(os.environ[BUDGET_ENV])
    return args


def ask(store: Path, args: dict[str, Any]) -> str:
    """The context text: from the store's server when one answers at once, else from the store itself."""
    from ..service.client import find_server

    client = find_server(store, wait=SERVER_WAIT_S)
    if client is not None:
        return str(client.call("agent_context", args).get("text") or "")
    if not (store / "expengine.duckdb").exists():
        return ""  # no store yet: nothing is known, and a hook never creates one
    from ..engine import Engine
    from ..service import ops

    with Engine(store=store, lock_timeout=COLD_LOCK_WAIT_S) as engine:
        return str(ops.run(engine, "agent_context", args).get("text") or "")


def hand_off(store: Path, payload: dict[str, Any]) -> None:
    """Ingest the transcript's new lines: in a detached process (the agent goes on at once), or here
    when FOREGROUND_ENV is set."""
    transcript = payload.get("transcript_path")
    if not transcript:
        return
    argv = ["--store", str(store), "ingest-transcript", str(transcript), str(payload.get("cwd") or "")]
    if os.environ.get(FOREGROUND_ENV) == "1":
        from .transcripts import ingest_transcript

        ingest_transcript(store, Path(transcript), str(payload.get("cwd") or ""))
        return
    subprocess.Popen(
        [sys.executable, "-m", "expengine.integrations.hooks", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def run(event: str, raw: str, store: Path) -> str:
    """What the hook prints for `event` given its stdin `raw` ("" for nothing)."""
    payload = json.loads(raw) if raw.strip() else {}
    if not isinstance(payload, dict):
        raise ValueError("the hook's stdin is not a JSON object")
    event = event or str(payload.get("hook_event_name") or "")
    if event in INGEST_EVENTS:
        hand_off(store, payload)
        return ""
    if event not in CONTEXT_EVENTS:
        raise ValueError(f"unknown hook event {event!r} (one of {', '.join(EVENTS)})")
    args = context_request(event, payload)
    text = ask(store, args) if args else ""
    if not text:
        return ""
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


def main(argv: list[str] | None = None) -> int:
    """`[--store DIR] EVENT` (or `ingest-transcript PATH CWD`, the detached worker). Always exits 0."""
    args = list(sys.argv[1:] if argv is None else argv)
    given = None
    if args[:1] == ["--store"] and len(args) > 1:
        given, args = args[1], args[2:]
    store = store_dir(given)
    event = args[0] if args else ""
    try:
        if event == "ingest-transcript":
            from .transcripts import ingest_transcript

            ingest_transcript(store, Path(args[1]), args[2] if len(args) > 2 else "")
            return 0
        out = run(event, sys.stdin.read(), store)
    except BaseException as exc:  # fail open: the agent goes on without memory
        log(store, event or "?", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
        return 0
    if out:
        sys.stdout.write(out + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
