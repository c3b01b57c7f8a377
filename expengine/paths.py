"""Where a store lives by default. Standard library only: a hook or a client call through a running
server reads it without loading the config's dataclasses."""

from __future__ import annotations

import os
from pathlib import Path


def default_store_dir() -> Path:
    """EXPENGINE_HOME, else the per-user data folder (XDG_DATA_HOME/expengine)."""
    env = os.environ.get("EXPENGINE_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "expengine"
