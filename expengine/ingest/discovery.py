"""Where coding agents leave their logs on this machine, found without reading them.

Each tool's default folder, moved by the variables the tool itself honours (`CLAUDE_CONFIG_DIR`,
`CODEX_HOME`, `XDG_DATA_HOME`, `XDG_CONFIG_HOME`, `APPDATA`), and Aider's histories under the roots
given. A source is one unit a tool writes: a JSONL file it appends to (`lines`: read from where the
last run stopped), a file it rewrites whole (`whole`: read again when it changed, its records'
ids keep that idempotent), a folder of one event per file (`folder`, OpenHands), or a SQLite database
(`database`, opencode's and Goose's newer stores: read from the last row read).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .formats import goose as goose_format
from .formats import opencode as opencode_format
from .formats.cline import API_FILE, METADATA_FILE, UI_FILE

TOOLS = ("claude-code", "codex", "gemini-cli", "cline", "roo-code", "opencode", "goose", "openhands", "aider")
AIDER_HISTORY = ".aider.chat.history.md"
# folders never searched for Aider histories: big, and never a project's root
_PRUNE = {".git", "node_modules", ".venv", "venv", "__pycache__", ".cache", ".tox", "dist", "build", ".mypy_cache"}
AIDER_DEPTH = 6
_EDITORS = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf")
_EXTENSIONS = {"cline": "saoudrizwan.claude-dev", "roo-code": "rooveterinaryinc.roo-cline"}


@dataclass(frozen=True)
class Source:
    tool: str
    path: str
    kind: str  # lines | whole | folder | database
    format: str


def read_with_another(path: Path) -> bool:
    """A file a tool writes beside a session, read with that session's file rather than on its own: a
    Cline task's metadata (and its API history where the panel's file is there), opencode's messages
    and parts (read with their session's file)."""
    if path.name == METADATA_FILE or (path.name == API_FILE and (path.parent / UI_FILE).is_file()):
        return True
    parts = path.parts
    return len(parts) > 3 and parts[-3] in ("message", "part") and (path.parents[2] / "session").is_dir()


def _env_dir(name: str, default: Path) -> Path:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else default


def _data_home() -> Path:
    return _env_dir("XDG_DATA_HOME", Path.home() / ".local" / "share")


def _editor_config_dirs() -> list[Path]:
    """Where VS Code and its forks keep `User/globalStorage`, per platform."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif sys.platform.startswith("win"):
        base = _env_dir("APPDATA", Path.home() / "AppData" / "Roaming")
    else:
        base = _env_dir("XDG_CONFIG_HOME", Path.home() / ".config")
    return [base / editor / "User" / "globalStorage" for editor in _EDITORS]


def _files(folder: Path, pattern: str) -> list[Path]:
    return sorted(p for p in folder.glob(pattern) if p.is_file()) if folder.is_dir() else []


def claude_code() -> Iterator[Source]:
    home = _env_dir("CLAUDE_CONFIG_DIR", Path.home() / ".claude")
    for p in _files(home / "projects", "**/*.jsonl"):
        yield Source("claude-code", str(p), "lines", "claude-code")


def codex() -> Iterator[Source]:
    home = _env_dir("CODEX_HOME", Path.home() / ".codex")
    for folder in ("sessions", "archived_sessions"):
        for p in _files(home / folder, "**/*.jsonl"):
            yield Source("codex", str(p), "lines", "codex")


def gemini_cli() -> Iterator[Source]:
    tmp = _env_dir("GEMINI_CLI_HOME", Path.home()) / ".gemini" / "tmp"
    for p in _files(tmp, "*/chats/**/*"):
        if p.suffix == ".jsonl":
            yield Source("gemini-cli", str(p), "lines", "gemini-cli")
        elif p.suffix == ".json":
            yield Source("gemini-cli", str(p), "whole", "gemini-cli")


def cline(tool: str = "cline") -> Iterator[Source]:
    """A task folder is one source: its `ui_messages.json` (read with the files beside it), or its API
    history where the panel's file is missing."""
    roots = [d / _EXTENSIONS[tool] / "tasks" for d in _editor_config_dirs()]
    if tool == "cline":
        roots.append(Path.home() / ".cline" / "data" / "tasks")
    for root in roots:
        for task in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
            for name in (UI_FILE, API_FILE):
                if (task / name).is_file():
                    yield Source(tool, str(task / name), "whole", "cline")
                    break


def opencode() -> Iterator[Source]:
    """Its database; and from before it, a stored session's info file stands for the session (opencode
    rewrites it as the session moves on)."""
    home = _data_home() / "opencode"
    for p in _files(home, opencode_format.DATABASE_GLOB):
        yield Source("opencode", str(p), "database", "opencode")
    for p in _files(home / "storage" / "session", "*/*.json"):
        yield Source("opencode", str(p), "whole", "opencode")


def goose() -> Iterator[Source]:
    sessions = _data_home() / "goose" / "sessions"
    if (sessions / goose_format.DATABASE).is_file():
        yield Source("goose", str(sessions / goose_format.DATABASE), "database", "goose")
    for p in _files(sessions, "*.jsonl"):
        yield Source("goose", str(p), "lines", "goose")


def openhands() -> Iterator[Source]:
    home = _env_dir("OPENHANDS_HOME", Path.home() / ".openhands")
    for folder in ("sessions", "conversations"):
        root = home / folder
        for events in sorted(root.glob("*/events")) if root.is_dir() else []:
            if events.is_dir():
                yield Source("openhands", str(events), "folder", "openhands")


def aider(roots: list[str]) -> Iterator[Source]:
    """`.aider.chat.history.md` in each project under `roots` (Aider writes it to the git root)."""
    for root in roots:
        base = Path(root).expanduser()
        if base.is_file() and base.name == AIDER_HISTORY:
            yield Source("aider", str(base), "whole", "aider")
            continue
        for folder, dirs, files in os.walk(base):
            depth = len(Path(folder).relative_to(base).parts)
            dirs[:] = [] if depth >= AIDER_DEPTH else sorted(d for d in dirs if d not in _PRUNE)
            if AIDER_HISTORY in files:
                yield Source("aider", str(Path(folder) / AIDER_HISTORY), "whole", "aider")


def find_sources(tools: list[str] | None = None, roots: list[str] | None = None) -> list[Source]:
    """Every source of the tools named (all by default); Aider's only under `roots`."""
    wanted = set(tools or TOOLS)
    finders = {
        "claude-code": claude_code,
        "codex": codex,
        "gemini-cli": gemini_cli,
        "cline": lambda: cline("cline"),
        "roo-code": lambda: cline("roo-code"),
        "opencode": opencode,
        "goose": goose,
        "openhands": openhands,
        "aider": lambda: aider(roots or []),
    }
    return [s for tool in TOOLS if tool in wanted for s in finders[tool]()]
