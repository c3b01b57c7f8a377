"""Small text helpers shared by ingest, compaction, refinement, query and the benchmarks."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+|[^\w\s]")


def approx_tokens(text: str | None) -> int:
    """The one documented token count: words plus punctuation marks (a BPE-free, offline proxy)."""
    return len(_TOKEN.findall(text or ""))


# Han, kana and Hangul: the scripts written without spaces between words
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def normalized(text: str | None) -> str:
    """Lower case with single spaces: how two wordings are compared for sameness."""
    return " ".join((text or "").lower().split())
