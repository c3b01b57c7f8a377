"""Coding agents: `connect` / `disconnect` Claude Code or Codex, the `hook` they run, and `export
agents-md` (a project's rules in its AGENTS.md or CLAUDE.md)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from ..errors import InputError
from .common import JSON_OPTION, app, call, emit_json, stdout

export_app = typer.Typer(help="Write what was learned where an agent reads it.", no_args_is_help=True)
app.add_typer(export_app, name="export")


class Agent(str, Enum):
    claude_code = "claude-code"
    codex = "codex"


AGENT = typer.Argument(..., help="claude-code or codex.")
PROJECT = typer.Option(
    None, "--project", help="Claude Code: this project's .claude/settings.local.json; Codex: its AGENTS.md too."
)
USER = typer.Option(False, "--user", help="Claude Code: the user's settings (the default).")
DRY_RUN = typer.Option(False, "--dry-run", help="Print exactly what would be written; change nothing.")
PLUGIN = typer.Option(
    None, "--plugin", help="Claude Code: a plugin folder (manifest, hooks/hooks.json, .mcp.json) instead of settings."
)
SERVICE = typer.Option(
    False, "--service", help="Also `serve` as a user service (systemd user unit on Linux, launchd agent on macOS)."
)


def _plugin(agent: Agent, plugin: Optional[Path], project: Optional[Path], user: bool) -> Optional[Path]:
    if plugin is not None and (agent is not Agent.claude_code or project is not None or user):
        raise InputError("--plugin is for claude-code alone", hint="drop --project / --user, or --plugin")
    return plugin


def _project(project: Optional[Path], user: bool) -> Optional[Path]:
    if project is not None and user:
        raise InputError("--project and --user name two settings files", hint="give one of them")
    if project is not None and not project.expanduser().is_dir():
        raise InputError(f"--project {project}: not a folder", hint="give the project's root folder")
    return project


def _store(ctx: typer.Context) -> Optional[Path]:
    store = (ctx.obj or {}).get("store")
    return Path(store).expanduser().resolve() if store else None


def _show(changes: list, dry_run: bool, as_json: bool) -> None:
    """Apply each change (unless a dry run) and say what was or would be written."""
    done = []
    for change in changes:
        changed = change.changes
        backup = None if dry_run else change.apply()
        done.append({"path": str(change.path), "changes": changed, "backup": backup and str(backup)})
        if dry_run:
            done[-1]["text"] = change.text
        if as_json:
            continue
        if backup is not None:
            stdout.print(f"backed up {change.path} to {backup}")
        stdout.print(change.describe(dry_run, changed))
    if as_json:
        emit_json({"dry_run": dry_run, "files": done})


def _rules(ctx: typer.Context, folder: Path) -> tuple[str, list[str]]:
    """The project a folder holds, and its rules rendered with their evidence."""
    from ..ingest.sessions import project_of

    name = project_of(str(folder.expanduser().resolve())) or ""
    return name, call(ctx, "agent_context", situation="export", project=name)["lines"]


@app.command()
def connect(
    ctx: typer.Context,
    agent: Agent = AGENT,
    project: Optional[Path] = PROJECT,
    user: bool = USER,
    plugin: Optional[Path] = PLUGIN,
    service: bool = SERVICE,
    dry_run: bool = DRY_RUN,
    as_json: bool = JSON_OPTION,
) -> None:
    """Connect a coding agent: Claude Code gets expengine's hooks (context at session start, at a prompt
    and after a failed command; its transcript ingested when it stops), Codex the MCP server. Existing
    settings are merged, never overwritten, and backed up."""
    from ..integrations import claude_code, codex, service_unit
    from ..integrations import plugin as claude_plugin

    folder = _project(project, user)
    changes: list = []
    plugin = _plugin(agent, plugin, project, user)
    if plugin is not None:
        changes = claude_plugin.connect(plugin, _store(ctx))
    elif agent is Agent.claude_code:
        changes = [claude_code.connect(folder, _store(ctx))]
    else:
        changes = [codex.connect(_store(ctx))]
        if folder is not None:
            from ..integrations.agents_md import export

            changes.append(export(folder.expanduser() / "AGENTS.md", *_rules(ctx, folder)))
    if service:
        changes.append(service_unit.connect(_store(ctx)))
    _show(changes, dry_run, as_json)


@app.command()
def disconnect(
    ctx: typer.Context,
    agent: Agent = AGENT,
    project: Optional[Path] = PROJECT,
    user: bool = USER,
    plugin: Optional[Path] = PLUGIN,
    service: bool = SERVICE,
    dry_run: bool = DRY_RUN,
    as_json: bool = JSON_OPTION,
) -> None:
    """Undo `connect`: remove only what it wrote (the AGENTS.md section stays: it is the project's file)."""
    from ..integrations import claude_code, codex, service_unit
    from ..integrations import plugin as claude_plugin

    folder = _project(project, user)
    changes: list = []
    plugin = _plugin(agent, plugin, project, user)
    if plugin is not None:
        changes = claude_plugin.disconnect(plugin)
    elif agent is Agent.claude_code:
        changes = [claude_code.disconnect(folder)]
    else:
        changes = [codex.disconnect()]
    if service:
        changes.append(service_unit.disconnect())
    _show(changes, dry_run, as_json)


@app.command()
def hook(ctx: typer.Context, event: str = typer.Argument("", help="SessionStart, UserPromptSubmit, …")) -> None:
    """What Claude Code runs at each event, with its JSON on stdin (`connect` writes the same through
    `python -S …/hook_client.py`, which skips this CLI's start-up). Always exits 0."""
    from ..integrations.hook_client import main

    store = _store(ctx)
    main([*(["--store", str(store)] if store else []), event])


@export_app.command("agents-md")
def agents_md(
    ctx: typer.Context,
    project: Path = typer.Option(Path("."), "--project", help="The project's folder."),
    write: Optional[Path] = typer.Option(
        None, "--write", help="Merge the section into this file (AGENTS.md, CLAUDE.md); else print it."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """The project's active rules, each with its evidence, as a delimited section; the rest of the file is
    left as it is, and a second run with nothing new changes no byte."""
    from ..integrations.agents_md import export, section

    name, lines = _rules(ctx, project)
    if write is not None:
        _show([export(write.expanduser(), name, lines)], False, as_json)
    elif as_json:
        emit_json({"project": name, "lines": lines, "section": section(name, lines)})
    else:
        stdout.print(section(name, lines))
