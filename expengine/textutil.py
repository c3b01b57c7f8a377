"""Small text helpers shared by ingest, compaction, refinement, query and the benchmarks."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Iterable

_TOKEN = re.compile(r"\w+|[^\w\s]")


def approx_tokens(text: str | None) -> int:
    """The one documented token count: words plus punctuation marks (a BPE-free, offline proxy)."""
    return len(_TOKEN.findall(text or ""))


# Han, kana and Hangul: the scripts written without spaces between words
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def normalized(text: str | None) -> str:
    """Lower case with single spaces: how two wordings are compared for sameness."""
    return " ".join((text or "").lower().split())


# Words per script, as a model reads them: a run of letters of one script is one word, and so is each
# CJK character (Chinese has no spaces), so English tool names and JSON keys in a Chinese log do not
# outweigh its sentences (ingest/scripts.py decides the embedder from these counts).
SCRIPTS = ("latin", "cjk", "other")
_LETTERS = re.compile(r"[^\W\d_]+")


def script_of(char: str) -> str | None:
    """latin, cjk (Han, kana, Hangul) or other for a letter; None for digits, spaces and punctuation."""
    if not char.isalpha():
        return None
    if char.isascii():
        return "latin"
    name = unicodedata.name(char, "")
    if name.startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL")):
        return "cjk"
    return "latin" if name.startswith("LATIN") else "other"


def count_scripts(texts: Iterable[str], counts: Counter[str] | None = None) -> Counter[str]:
    """Words per script (see the module's docstring), added to `counts`."""
    counts = counts if counts is not None else Counter()
    for text in texts:
        for match in _LETTERS.finditer(text or ""):
            word = match.group()
            if word.isascii():
                counts["latin"] += 1
                continue
            previous = None
            for char in word:
                script = script_of(char)
                if script and (script == "cjk" or script != previous):
                    counts[script] += 1
                previous = script
    return counts


def shares(counts: Counter[str]) -> dict[str, float]:
    """Share of words per script, rounded to 3 places (all zero for text without letters)."""
    total = sum(counts.values())
    return {s: round(counts[s] / total, 3) if total else 0.0 for s in SCRIPTS}
