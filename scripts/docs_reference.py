"""The generated parts of the docs: every command's `--help` (docs/reference/cli.md) and every config
key's default (docs/reference/configuration.md). cog writes them into those pages (`cog -r`), CI runs
`cog --check`, and tests/test_cli_docs.py compares them too, so the pages cannot drift from the code."""

from __future__ import annotations

from typing import Any

WIDTH = 100


def command_paths() -> list[list[str]]:
    """Every command as its words after `expengine`, groups before their commands, in `--help` order."""
    import typer.main

    from expengine.cli import app

    def walk(group: Any, prefix: list[str]) -> list[list[str]]:
        paths = []
        for name, command in group.commands.items():
            paths.append([*prefix, name])
            if getattr(command, "commands", None):
                paths.extend(walk(command, [*prefix, name]))
        return paths

    return walk(typer.main.get_command(app), [])


def help_text(words: list[str]) -> str:
    from typer.testing import CliRunner

    from expengine.cli import app

    env = {"TERMINAL_WIDTH": str(WIDTH), "COLUMNS": str(WIDTH), "NO_COLOR": "1"}
    result = CliRunner().invoke(app, [*words, "--help"], prog_name="expengine", env=env, terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    return "\n".join(line.rstrip() for line in result.output.strip().splitlines())


def cli_reference() -> str:
    """One section per command: its `--help`, as the command line prints it."""
    parts = ["## expengine\n\n```\n" + help_text([]) + "\n```\n"]
    for words in command_paths():
        title = " ".join(["expengine", *words])
        parts.append(f"## {title}\n\n```\n{help_text(words)}\n```\n")
    return "\n".join(parts)


def config_reference() -> str:
    """Every section and key of config.toml with its default (what `expengine config init` writes)."""
    import tomli_w

    from expengine.config import Config

    return "```toml\n" + tomli_w.dumps(Config().to_dict()).strip() + "\n```\n"
