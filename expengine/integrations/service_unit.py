"""`connect … --service`: `expengine serve` as a user service, so every hook finds a running server.
A systemd user unit on Linux (`systemctl --user enable --now expengine.service`), a launchd agent on
macOS (`launchctl load ~/Library/LaunchAgents/dev.expengine.serve.plist`). The file is expengine's own:
`disconnect … --service` removes it."""

from __future__ import annotations

import os
import plistlib
import shlex
import sys
from pathlib import Path

from .files import Change, Removal

SYSTEMD_UNIT = "expengine.service"
LAUNCHD_LABEL = "dev.expengine.serve"


def _command(store: Path | None) -> list[str]:
    return [sys.executable, "-m", "expengine", *(["--store", str(store)] if store else []), "serve"]


def unit_path(platform: str = sys.platform) -> Path:
    if platform == "darwin":
        return Path.home() / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user" / SYSTEMD_UNIT


def unit_text(store: Path | None, platform: str = sys.platform) -> str:
    """The unit: the server started at login and again when it stops."""
    if platform == "darwin":
        plist = {"Label": LAUNCHD_LABEL, "ProgramArguments": _command(store), "RunAtLoad": True, "KeepAlive": True}
        return plistlib.dumps(plist).decode()
    return "\n".join(
        [
            "[Unit]",
            "Description=expengine serve: the memory a coding agent's hooks ask",
            "",
            "[Service]",
            f"ExecStart={shlex.join(_command(store))}",
            "Environment=HF_HUB_OFFLINE=1",
            "Restart=on-failure",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


def connect(store: Path | None) -> Change:
    return Change(unit_path(), unit_text(store))


def disconnect() -> Removal:
    path = unit_path()
    return Removal(path, path)
