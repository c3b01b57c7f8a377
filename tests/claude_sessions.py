"""Claude Code transcripts as Claude Code 2.x writes them, and its hooks run as it runs them (JSON on
stdin, exit code, stdout), for the live-loop tests."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from expengine.integrations.claude_code import hook_command

REPO = Path(__file__).resolve().parents[1]
CWD = "/home/dev/projects/demo"


class Transcript:
    """A session's JSONL file, written line by line as Claude Code appends to it."""

    def __init__(self, path: Path, session: str, cwd: str = CWD):
        self.path, self.session, self.cwd, self.n = path, session, cwd, 0
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def _line(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        self.n += 1
        obj = {
            "parentUuid": None,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session,
            "version": "2.1.39",
            "gitBranch": "main",
            "type": kind,
            "message": message,
            "uuid": f"{self.path.stem}-{self.n}",
            "timestamp": f"2026-02-11T20:{self.n // 60:02d}:{self.n % 60:02d}.000Z",
            **extra,
        }
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(obj) + "\n")

    def noise(self) -> None:
        """A hook progress line: most of a real transcript, and no memory."""
        self.n += 1
        line = {"type": "progress", "sessionId": self.session, "cwd": self.cwd, "data": {"type": "hook_progress"}}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def prompt(self, text: str) -> None:
        self._line("user", {"role": "user", "content": text})

    def command(self, command: str, output: str, *, failed: bool = False) -> str:
        call_id = f"toolu_{self.path.stem}_{self.n}"
        tool_use = {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}
        self._line("assistant", {"role": "assistant", "content": [tool_use]})
        result = {"type": "tool_result", "tool_use_id": call_id, "content": output, "is_error": failed}
        self._line("user", {"role": "user", "content": [result]})
        return call_id

    def read(self, file_path: str, output: str) -> None:
        call_id = f"toolu_{self.path.stem}_{self.n}"
        tool_use = {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": file_path}}
        self._line("assistant", {"role": "assistant", "content": [tool_use]})
        result = {"type": "tool_result", "tool_use_id": call_id, "content": output}
        self._line("user", {"role": "user", "content": [result]}, toolUseResult={"file": {"content": output}})

    def say(self, text: str) -> None:
        self._line("assistant", {"role": "assistant", "content": [{"type": "text", "text": text}]})


def run_hook(store: Path, event: str, payload: dict[str, Any], **env: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the hook command `connect` writes, run as Claude Code runs it."""
    child = subprocess.run(
        hook_command(event, store),
        shell=True,
        input=json.dumps({"hook_event_name": event, **payload}),
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **env},
        timeout=300,
    )
    return child.returncode, child.stdout, child.stderr


def context_of(stdout: str) -> str:
    """The additionalContext a hook's stdout gives Claude Code ("" for none)."""
    if not stdout.strip():
        return ""
    return str(json.loads(stdout)["hookSpecificOutput"]["additionalContext"])
