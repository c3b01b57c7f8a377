"""`connect claude-code`: expengine's hooks in a Claude Code settings file, merged into what is there.

Claude Code reads hooks from `~/.claude/settings.json` (the user's, `CLAUDE_CONFIG_DIR` when set) and
`<project>/.claude/settings.local.json` (a project's, not committed: the command names this machine's
Python). Each event holds matcher groups, `{"matcher": "Bash", "hooks": [{"type": "command",
"command": …, "timeout": …}]}`; every group that matches runs. The command is hook_client.py under
`python -S` (standard library only: a hook through a running server costs one bare start-up). Ours are
recognised by the file they run (`MARKER`), so a second connect replaces them, `disconnect` removes only them, and the user's own
hooks and settings are kept as they were. The file is backed up before it is changed.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from . import hook_client
from .files import Change

MARKER = "hook_client.py"
TIMEOUT_S = 10  # Claude Code's own default is 60 s; a hook of ours answers in well under one
# event → matcher ("" for events that take none); PostToolUse* only for shell commands
EVENTS = {
    "SessionStart": "",
    "UserPromptSubmit": "",
    "PostToolUse": "Bash",
    "PostToolUseFailure": "Bash",
    "Stop": "",
    "SessionEnd": "",
}


def settings_path(project: Path | None) -> Path:
    if project is not None:
        return project.expanduser().resolve() / ".claude" / "settings.local.json"
    home = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(home).expanduser() if home else Path.home() / ".claude") / "settings.json"


def hook_command(event: str, store: Path | None) -> str:
    """The command line Claude Code runs: this Python without site-packages, the stdlib hook client."""
    words = [sys.executable, "-S", hook_client.__file__, *(["--store", str(store)] if store else []), event]
    return " ".join(shlex.quote(w) for w in words)


def _ours(hook: Any) -> bool:
    command = str(hook.get("command") or "") if isinstance(hook, dict) else ""
    return MARKER in command or hook_client.COLD_MODULE in command


def without_ours(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings less every hook of ours (and groups or events that held only ours)."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return settings
    kept_events: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept_events[event] = groups
            continue
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                kept_groups.append(group)
                continue
            left = [h for h in inner if not _ours(h)]
            if left:
                kept_groups.append({**group, "hooks": left} if len(left) != len(inner) else group)
        if kept_groups:
            kept_events[event] = kept_groups
    out = {k: v for k, v in settings.items() if k != "hooks"}
    if kept_events:
        out["hooks"] = kept_events
    return out


def with_ours(settings: dict[str, Any], store: Path | None) -> dict[str, Any]:
    """The settings with one group of ours per event, after the user's own."""
    out = without_ours(settings)
    hooks = dict(out.get("hooks") or {})
    for event, matcher in EVENTS.items():
        group: dict[str, Any] = {"matcher": matcher} if matcher else {}
        group["hooks"] = [{"type": "command", "command": hook_command(event, store), "timeout": TIMEOUT_S}]
        hooks[event] = [*(hooks.get(event) or []), group]
    out["hooks"] = hooks
    return out


def _read(path: Path) -> dict[str, Any]:
    from ..errors import InputError

    if not path.exists():
        return {}
    try:
        settings = json.loads(path.read_text(encoding="utf-8") or "{}")
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg})", hint="fix the file, then run connect again"
        ) from None
    if not isinstance(settings, dict):
        raise InputError(f"{path}:1: the settings are not a JSON object", hint="fix the file, then connect again")
    return settings


def connect(project: Path | None, store: Path | None) -> Change:
    path = settings_path(project)
    return Change(path, _render(with_ours(_read(path), store)))


def disconnect(project: Path | None) -> Change:
    path = settings_path(project)
    return Change(path, _render(without_ours(_read(path))) if path.exists() else None)


def _render(settings: dict[str, Any]) -> str:
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n"
