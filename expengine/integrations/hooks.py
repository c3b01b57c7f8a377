"""The hooks' cold path, `python -m expengine.integrations.hooks [--store DIR] EVENT`: what hook_client.py
runs when no `expengine serve` answers on the store's socket, and the detached worker
(`ingest-transcript PATH CWD`) that stores a transcript's new lines.

- SessionStart: the project's standing knowledge (test and build commands, what is not installed,
  pitfalls with their fixes), within a budget;
- UserPromptSubmit: the few units relevant to the prompt (nothing relevant prints nothing);
- PostToolUse / PostToolUseFailure on a failed command: the fix that worked for that error's kind;
- Stop / SubagentStop / SessionEnd: the transcript's new lines are handed to a detached process that
  ingests them (transcripts.py), so the agent never waits for the store.

Fails open as the client does: stdout empty, the error in the store's `hooks.log`, exit code 0.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from .hook_client import (
    CONTEXT_EVENTS,
    EVENTS,
    FOREGROUND_ENV,
    INGEST_EVENTS,
    arguments,
    context_request,
    fail_open,
    hand_off,
    hook_output,
)

COLD_LOCK_WAIT_S = 1.0


def ask(store: Path, args: dict[str, Any]) -> str:
    """The context text, from the store opened here ("" when there is no store yet)."""
    if not (store / "expengine.duckdb").exists():
        return ""  # a hook never creates a store
    from ..engine import Engine

    with Engine(store=store, lock_timeout=COLD_LOCK_WAIT_S) as engine:
        return str(engine.agent_context(**args).get("text") or "")


def run(event: str, raw: str, store: Path) -> str:
    """What the hook prints for `event` given its stdin `raw` ("" for nothing)."""
    payload = json.loads(raw) if raw.strip() else {}
    if not isinstance(payload, dict):
        raise ValueError("the hook's stdin is not a JSON object")
    event = event or str(payload.get("hook_event_name") or "")
    if event in INGEST_EVENTS:
        transcript = payload.get("transcript_path")
        if transcript and os.environ.get(FOREGROUND_ENV) == "1":
            from .transcripts import ingest_transcript

            ingest_transcript(store, Path(transcript), str(payload.get("cwd") or ""))
        else:
            hand_off(str(store), payload)
        return ""
    if event not in CONTEXT_EVENTS:
        raise ValueError(f"unknown hook event {event!r} (one of {', '.join(EVENTS)})")
    args = context_request(event, payload)
    return hook_output(event, ask(store, args) if args else "")


def answer(store: Path, args: list[str]) -> str:
    """The cold hook `args[0]` (its stdin read here), or the detached worker's ingest (`ingest-transcript
    PATH CWD`, which prints nothing)."""
    if args[:1] == ["ingest-transcript"]:
        from .transcripts import ingest_transcript

        ingest_transcript(store, Path(args[1]), args[2] if len(args) > 2 else "")
        return ""
    return run(args[0] if args else "", sys.stdin.read(), store)


def main(argv: list[str] | None = None) -> int:
    """`[--store DIR] EVENT` (or `ingest-transcript PATH CWD`, the detached worker). Always exits 0."""
    given, args = arguments(argv)
    return fail_open(args[0] if args else "", given, lambda store: answer(Path(store), args))


if __name__ == "__main__":
    sys.exit(main())
