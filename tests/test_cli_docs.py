"""Every command is documented in README; `--help` is instant (no heavy imports); offline guard works."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import typer

REPO = Path(__file__).resolve().parents[1]


def _command_paths() -> list[str]:
    from expengine.cli import app

    group = typer.main.get_command(app)
    paths = []
    for name, command in group.commands.items():
        sub = getattr(command, "commands", None)
        if sub:
            paths.extend(f"{name} {child}" for child in sub)
        else:
            paths.append(name)
    return paths


def test_every_command_is_documented_in_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    missing = [path for path in _command_paths() if f"expengine {path}" not in readme]
    assert not missing, f"README does not document: {missing}"


def test_every_reporting_command_offers_json():
    from expengine.cli import app

    group = typer.main.get_command(app)
    # serve and mcp are long-running; a hook's stdout is what Claude Code reads (JSON already)
    silent = {"config init", "restore", "pin", "unpin", "serve", "mcp", "hook"}
    for path in _command_paths():
        command = group
        for part in path.split():
            command = command.commands[part]
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        if path not in silent:
            assert "--json" in options, f"`expengine {path}` has no --json"


def test_help_imports_nothing_heavy():
    code = "import sys, expengine.cli; print(sorted(m for m in ('torch', 'duckdb', 'lancedb', 'sentence_transformers', 'llama_cpp', 'sklearn') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_suite_cannot_reach_the_network():
    from conftest import NetworkAccessError

    with pytest.raises(NetworkAccessError):
        socket.create_connection(("198.51.100.7", 443), timeout=1)
