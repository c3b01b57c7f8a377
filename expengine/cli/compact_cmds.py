"""Compaction commands: compact, snapshots, restore, pin, unpin, forget, history."""

from __future__ import annotations

from .common import app  # noqa: F401
