"""`connect` / `disconnect` on real settings files that already hold the user's own hooks, and `export
agents-md` on a file with the user's own text."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from expengine.cli import app
from expengine.errors import ExpengineError
from expengine.integrations.claude_code import MARKER

USER_HOOKS = {
    "model": "opus",
    "hooks": {
        "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "npx prettier --write"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def _cli(*args: str, store: Path | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*(["--store", str(store)] if store else []), *args])
    error = result.exception
    return (error.exit_code if isinstance(error, ExpengineError) else result.exit_code), result.stdout


@pytest.fixture
def claude_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "claude"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps(USER_HOOKS, indent=2) + "\n")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    return home / "settings.json"


def test_connect_dry_run_prints_the_merged_settings_and_changes_nothing(claude_home: Path, tmp_path: Path) -> None:
    before = claude_home.read_bytes()
    code, out = _cli("connect", "claude-code", "--dry-run", store=tmp_path / "store")
    assert code == 0 and claude_home.read_bytes() == before
    header, _, body = out.partition("\n")
    assert header == f"would write {claude_home}:"
    merged = json.loads(body)
    assert merged["model"] == "opus"
    assert merged["hooks"]["PostToolUse"][0] == USER_HOOKS["hooks"]["PostToolUse"][0]
    assert merged["hooks"]["Stop"][0] == USER_HOOKS["hooks"]["Stop"][0]
    ours = merged["hooks"]["SessionStart"][0]["hooks"][0]
    assert ours["type"] == "command" and MARKER in ours["command"] and "SessionStart" in ours["command"]
    assert merged["hooks"]["PostToolUse"][1]["matcher"] == "Bash"
    assert sys.executable in ours["command"] and str(tmp_path / "store") in ours["command"]
    assert not list(claude_home.parent.glob("*backup*"))


def test_connect_merges_backs_up_is_idempotent_and_disconnect_undoes_it(claude_home: Path) -> None:
    before = claude_home.read_text()
    code, out = _cli("connect", "claude-code", "--user")
    assert code == 0 and "backed up" in out and f"wrote {claude_home}" in out
    backups = list(claude_home.parent.glob("settings.json.expengine-backup-*"))
    assert [b.read_text() for b in backups] == [before]
    connected = claude_home.read_text()
    assert _cli("connect", "claude-code")[1].strip() == f"{claude_home}: unchanged"
    assert claude_home.read_text() == connected
    assert _cli("disconnect", "claude-code")[0] == 0
    assert json.loads(claude_home.read_text()) == USER_HOOKS


def test_connect_a_project_writes_its_local_settings(tmp_path: Path) -> None:
    project = tmp_path / "demo"
    project.mkdir()
    assert _cli("connect", "claude-code", "--project", str(project))[0] == 0
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert set(settings["hooks"]) >= {"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"}
    assert _cli("connect", "claude-code", "--project", str(project), "--user")[0] == 2


def test_connect_codex_adds_an_mcp_server_and_leaves_the_rest_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tomllib

    home = tmp_path / "codex"
    home.mkdir()
    config = home / "config.toml"
    original = '# my settings\nmodel = "o3"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
    config.write_text(original)
    monkeypatch.setenv("CODEX_HOME", str(home))
    code, out = _cli("connect", "codex", "--dry-run")
    assert code == 0 and out.startswith(f"would write {config}:\n{original}")
    assert config.read_text() == original
    assert _cli("connect", "codex")[0] == 0
    parsed = tomllib.loads(config.read_text())
    assert parsed["model"] == "o3" and parsed["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    assert parsed["mcp_servers"]["expengine"]["args"][-1] == "mcp"
    assert config.read_text().startswith(original)
    assert _cli("disconnect", "codex")[0] == 0
    assert config.read_text() == original


def test_export_agents_md_keeps_the_rest_of_the_file_and_is_idempotent(tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("# House rules\n\nUse tabs.\n")
    store = tmp_path / "store"
    assert _cli("export", "agents-md", "--project", str(tmp_path), store=store)[0] == 3  # no store: nothing made
    assert not store.exists()
    assert _cli("config", "init", store=store)[0] == 0
    code, out = _cli("export", "agents-md", "--project", str(tmp_path), "--write", str(agents), store=store)
    assert code == 0, out
    text = agents.read_text()
    assert text.startswith("# House rules\n\nUse tabs.\n\n<!-- expengine:begin -->\n")
    assert text.endswith("<!-- expengine:end -->\n")
    before = agents.stat().st_mtime_ns
    assert _cli("export", "agents-md", "--project", str(tmp_path), "--write", str(agents), store=store)[0] == 0
    assert agents.read_text() == text and agents.stat().st_mtime_ns == before


def test_connect_a_plugin_folder_writes_claude_code_s_layout_and_disconnect_removes_it(tmp_path: Path) -> None:
    folder, store = tmp_path / "expengine-plugin", tmp_path / "store"
    code, out = _cli("connect", "claude-code", "--plugin", str(folder), "--dry-run", store=store)
    assert code == 0 and not folder.exists()
    assert f"would write {folder / '.claude-plugin' / 'plugin.json'}:" in out and '"name": "expengine"' in out
    assert _cli("connect", "claude-code", "--plugin", str(folder), store=store)[0] == 0
    hooks = json.loads((folder / "hooks" / "hooks.json").read_text())["hooks"]
    command = hooks["SessionStart"][0]["hooks"][0]["command"]
    assert MARKER in command and str(store) in command and hooks["PostToolUse"][0]["matcher"] == "Bash"
    assert json.loads((folder / ".mcp.json").read_text())["mcpServers"]["expengine"]["args"][-1] == "mcp"
    assert json.loads((folder / ".claude-plugin" / "plugin.json").read_text())["name"] == "expengine"
    assert _cli("connect", "claude-code", "--plugin", str(folder), "--project", str(tmp_path))[0] == 2
    assert _cli("disconnect", "claude-code", "--plugin", str(folder))[0] == 0
    assert not folder.exists()


def test_connect_service_writes_a_user_unit_and_disconnect_removes_it(
    tmp_path: Path, claude_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import plistlib

    from expengine.integrations.service_unit import unit_text

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    unit = tmp_path / "config" / "systemd" / "user" / "expengine.service"
    store = tmp_path / "store"
    code, out = _cli("connect", "claude-code", "--service", "--dry-run", store=store)
    assert code == 0 and not unit.exists()
    assert (
        f"would write {unit}:\n[Unit]" in out
        and f"ExecStart={sys.executable} -m expengine --store {store} serve" in out
    )
    assert _cli("connect", "claude-code", "--service", store=store)[0] == 0
    assert "WantedBy=default.target" in unit.read_text() and "hooks" in json.loads(claude_home.read_text())
    assert _cli("disconnect", "claude-code", "--service", "--dry-run")[1].count(f"would remove {unit}") == 1
    assert unit.exists()
    assert _cli("disconnect", "claude-code", "--service")[0] == 0
    assert not unit.exists() and json.loads(claude_home.read_text()) == USER_HOOKS
    plist = plistlib.loads(unit_text(store, "darwin").encode())
    assert plist["ProgramArguments"][-3:] == ["--store", str(store), "serve"] and plist["KeepAlive"] is True
