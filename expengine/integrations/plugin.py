"""`connect claude-code --plugin DIR`: expengine as a Claude Code plugin folder instead of hooks merged
into a settings file. The layout is Claude Code's (plugins reference): `.claude-plugin/plugin.json`
(the manifest; `name` is its one required field), `hooks/hooks.json` (`{"hooks": {event: [matcher
groups]}}`, the settings file's format) and `.mcp.json` (`{"mcpServers": {name: {command, args}}}`).
Every file is expengine's own, so `disconnect --plugin DIR` removes them whole."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import __version__
from .claude_code import with_ours
from .files import Change, Removal

NAME = "expengine"


def files(folder: Path, store: Path | None) -> dict[Path, str]:
    """Each file of the plugin and its content."""
    store_args = ["--store", str(store)] if store else []
    manifest = {
        "name": NAME,
        "version": __version__,
        "description": "Offline memory from your own sessions: test commands, fixes that worked, with evidence.",
    }
    hooks = with_ours({}, store)
    mcp = {"mcpServers": {NAME: {"command": sys.executable, "args": ["-m", "expengine", *store_args, "mcp"]}}}
    return {
        folder / ".claude-plugin" / "plugin.json": _render(manifest),
        folder / "hooks" / "hooks.json": _render({"description": "expengine's context and ingest hooks", **hooks}),
        folder / ".mcp.json": _render(mcp),
    }


def connect(folder: Path, store: Path | None) -> list[Change]:
    return [Change(path, text) for path, text in files(folder.expanduser().resolve(), store).items()]


def disconnect(folder: Path) -> list[Removal]:
    top = folder.expanduser().resolve()
    return [Removal(path, top) for path in files(top, None)]


def _render(value: dict) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
