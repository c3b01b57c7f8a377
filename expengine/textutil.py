"""Small text helpers shared by ingest, compaction, refinement, query and the benchmarks."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+|[^\w\s]")


def approx_tokens(text: str | None) -> int:
    """The one documented token count: words plus punctuation marks (a BPE-free, offline proxy)."""
    return len(_TOKEN.findall(text or ""))
