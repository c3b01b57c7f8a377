"""`connect codex`: expengine as an MCP server in Codex's `config.toml` (`$CODEX_HOME`, else `~/.codex`).

Codex starts the servers of its `[mcp_servers.<name>]` tables over stdio; ours runs `expengine mcp`
on the store, so the agent can call memory_query and memory_show. The table is written as text
(`BEGIN` / `END` comment lines around it) so that the rest of the file, its comments and order
included, stays byte for byte as the user wrote it; the file is parsed before and after to be sure
it stays valid TOML.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import tomllib

from .files import Change

SERVER = "expengine"
BEGIN = "# expengine:begin (written by `expengine connect codex`; `expengine disconnect codex` removes it)"
END = "# expengine:end"


def config_path() -> Path:
    home = os.environ.get("CODEX_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".codex") / "config.toml"


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def server_block(store: Path | None) -> str:
    args = ["-m", "expengine", *(["--store", str(store)] if store else []), "mcp"]
    return "\n".join(
        [
            BEGIN,
            f"[mcp_servers.{SERVER}]",
            f"command = {_toml_string(sys.executable)}",
            "args = [" + ", ".join(_toml_string(a) for a in args) + "]",
            END,
            "",
        ]
    )


def without_ours(text: str) -> str:
    """The file less our block (and the blank line we put before it)."""
    start = text.find(BEGIN)
    if start < 0:
        return text
    end = text.find(END, start)
    end = len(text) if end < 0 else end + len(END)
    if text[end : end + 1] == "\n":
        end += 1
    head = text[:start]
    if head.endswith("\n\n"):
        head = head[:-1]
    return head + text[end:]


def _check(path: Path, text: str) -> None:
    from ..errors import InputError

    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML ({exc})", hint="fix the file, then run connect again") from None
    if BEGIN not in text and SERVER in (parsed.get("mcp_servers") or {}):
        raise InputError(
            f"{path}: [mcp_servers.{SERVER}] is already there, not written by connect",
            hint="remove or rename that table, then run connect again",
        )


def connect(store: Path | None) -> Change:
    path = config_path()
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    _check(path, text)
    rest = without_ours(text)
    separator = "" if not rest or rest.endswith("\n\n") else ("\n" if rest.endswith("\n") else "\n\n")
    new = rest + separator + server_block(store)
    tomllib.loads(new)
    return Change(path, new)


def disconnect() -> Change:
    path = config_path()
    return Change(path, without_ours(path.read_text(encoding="utf-8")) if path.exists() else None)
