"""What a user keeps out of the store, before a transcript line leaves the hook's process.

- `<private>…</private>` anywhere in a line's text becomes `[private]` (an unclosed `<private>`
  hides the rest of that text);
- a `.expengineignore` at the project's root (gitignore syntax, read with `pathspec`) names files:
  a tool call that reads, writes or names such a file, and its result, are dropped.
Secrets and personal data are then redacted by ingest, as for every record.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IGNORE_FILE = ".expengineignore"
PRIVATE = re.compile(r"<private>.*?(</private>|\Z)", re.DOTALL | re.IGNORECASE)
PATH_KEYS = ("file_path", "path", "notebook_path", "filename")


def hide_private(value: Any) -> Any:
    """`value` with every `<private>` span of its strings replaced, at any depth."""
    if isinstance(value, str):
        return PRIVATE.sub("[private]", value) if "<private>" in value.lower() else value
    if isinstance(value, list):
        return [hide_private(v) for v in value]
    if isinstance(value, dict):
        return {k: hide_private(v) for k, v in value.items()}
    return value


def _root(cwd: str) -> Path | None:
    """The nearest folder at or above `cwd` holding a .expengineignore, up to the git top level."""
    if not cwd or not os.path.isdir(cwd):
        return None
    for folder in (Path(cwd), *Path(cwd).parents):
        if (folder / IGNORE_FILE).is_file():
            return folder
        if (folder / ".git").exists():
            return None
    return None


@dataclass
class Privacy:
    root: Path | None = None
    spec: Any = None  # a pathspec.GitIgnoreSpec, None without a .expengineignore
    dropped: set[str] = field(default_factory=set)  # tool_use ids whose results are dropped too

    @classmethod
    def for_project(cls, cwd: str) -> "Privacy":
        root = _root(cwd)
        if root is None:
            return cls()
        import pathspec

        lines = (root / IGNORE_FILE).read_text(encoding="utf-8").splitlines()
        return cls(root, pathspec.GitIgnoreSpec.from_lines(lines))

    def ignored(self, name: str) -> bool:
        """Whether a path a tool names (absolute, or relative to the root) is ignored."""
        if self.spec is None or self.root is None or not name or "\n" in name:
            return False
        path = Path(name)
        if path.is_absolute():
            try:
                path = path.resolve().relative_to(self.root.resolve())
            except (ValueError, OSError):
                return False
        return bool(self.spec.match_file(str(path)))

    def _names_ignored(self, tool_input: Any) -> bool:
        if not isinstance(tool_input, dict):
            return False
        if any(isinstance(tool_input.get(k), str) and self.ignored(tool_input[k]) for k in PATH_KEYS):
            return True
        command = tool_input.get("command")
        if isinstance(command, str):
            try:
                words = shlex.split(command)
            except ValueError:
                words = command.split()
            return any(self.ignored(w) for w in words if "/" in w or "." in w)
        return False

    def _blocks(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The line without the ignored files' calls and results; None when nothing is left of it."""
        message = obj.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            return obj
        content = message["content"]
        kept = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use" and self._names_ignored(block.get("input")):
                self.dropped.add(str(block.get("id")))
            elif (
                isinstance(block, dict)
                and block.get("type") == "tool_result"
                and block.get("tool_use_id") in self.dropped
            ):
                obj = {k: v for k, v in obj.items() if k != "toolUseResult"}  # the result's copy Claude Code keeps
            else:
                kept.append(block)
        if not kept:
            return None
        return {**obj, "message": {**message, "content": kept}} if len(kept) != len(content) else obj

    def filter(self, objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The lines as they may be stored."""
        out = []
        for obj in objs:
            kept = self._blocks(obj) if self.spec is not None else obj
            if kept is not None:
                out.append(hide_private(kept))
        return out
