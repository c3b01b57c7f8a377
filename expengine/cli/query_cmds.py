"""Query commands: query, feedback, show."""

from __future__ import annotations

from .common import app  # noqa: F401
