"""A fresh Python process on the repository's code with the hub offline: how the tests check what a
cold command imports (a module already loaded in the test process would hide it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_offline_python(*args: str) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in the repository root, output captured as text, bounded by a timeout."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
