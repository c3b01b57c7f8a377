"""Refinement commands: refine, units, trace."""

from __future__ import annotations

from .common import app  # noqa: F401
