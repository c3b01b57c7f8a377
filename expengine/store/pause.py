"""A point where a test can kill the process: what kill -9 mid-write looks like, at a known place.

With `EXPENGINE_TEST_PAUSE_AFTER=<point>` set, the process writes the marker `<store>/.paused-after-<point>`
(its pid inside) when it gets there, then blocks until killed. Once per marker: while the marker is
there, a retry of the killed work (a fleet task Ray runs again, a rerun) passes through."""

from __future__ import annotations

import os
import signal
from pathlib import Path

PAUSE_ENV = "EXPENGINE_TEST_PAUSE_AFTER"
PAUSE_MARKER = ".paused-after-"


def pause_for_tests(store_dir: Path, point: str) -> None:
    marker = store_dir / (PAUSE_MARKER + point)
    if os.environ.get(PAUSE_ENV) == point and not marker.exists():
        marker.write_text(str(os.getpid()), encoding="utf-8")
        while True:
            signal.pause()
