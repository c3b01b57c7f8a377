"""Every command is in the generated CLI reference; `--help` is instant (no heavy imports); offline guard works."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import typer
from helpers import REPO, load_script

docs_reference = load_script(REPO / "scripts" / "docs_reference.py", "docs_reference")


def _command_paths() -> list[str]:
    return [" ".join(words) for words in docs_reference.command_paths()]


def _generated(page: str) -> str:
    """What cog put between a page's markers."""
    text = (REPO / "docs" / "reference" / page).read_text(encoding="utf-8")
    return text.split("]]] -->", 1)[1].split("<!-- [[[end]]]", 1)[0].strip("\n")


def test_the_cli_reference_is_generated_from_help_and_covers_every_command():
    """docs/reference/cli.md is `--help` as it is now (regenerate with `cog -r docs/reference/cli.md`)."""
    page = _generated("cli.md")
    assert page == docs_reference.cli_reference().strip("\n"), "run: cog -r docs/reference/cli.md"
    missing = [path for path in _command_paths() if f"## expengine {path}\n" not in page]
    assert not missing, missing


def test_the_configuration_reference_has_every_default():
    assert _generated("configuration.md") == docs_reference.config_reference().strip("\n"), (
        "run: cog -r docs/reference/configuration.md"
    )


def test_every_reporting_command_offers_json():
    from expengine.cli import app

    group = typer.main.get_command(app)
    # serve and mcp are long-running; a hook's stdout is what Claude Code reads (JSON already)
    silent = {"config init", "restore", "pin", "unpin", "serve", "mcp", "hook"}
    for path in _command_paths():
        command = group
        for part in path.split():
            command = command.commands[part]
        if getattr(command, "commands", None):
            continue  # a group: its commands are checked
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
