"""Which scripts a store's text is written in, and whether its embedder can read them.

MiniLM's vocabulary is English: most Chinese characters become [UNK], so Chinese texts get vectors
that barely differ. A new store whose first ingest is mostly such text switches to the multilingual
embedder (config `embedder.model = "auto"`); an existing store is told, with the fix."""

from __future__ import annotations

import unicodedata
from collections import Counter
from typing import Iterable

SCRIPTS = ("latin", "cjk", "other")
# share of letters MiniLM cannot read above which a new store takes the multilingual model
SWITCH_SHARE = 0.3
# share above which an ingest into a MiniLM store warns
WARN_SHARE = 0.2


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
    counts = counts if counts is not None else Counter()
    for text in texts:
        counts.update(s for s in map(script_of, text or "") if s)
    return counts


def shares(counts: Counter[str]) -> dict[str, float]:
    """Share of letters per script, rounded to 3 places (all zero for text without letters)."""
    total = sum(counts.values())
    return {s: round(counts[s] / total, 3) if total else 0.0 for s in SCRIPTS}


def unreadable_share(counts: Counter[str]) -> float:
    """Share of letters the English model cannot read (everything but Latin)."""
    total = sum(counts.values())
    return (total - counts["latin"]) / total if total else 0.0


def embedder_warning(model_name: str, counts: Counter[str]) -> str | None:
    """A one-line warning with the fix, when an English-only embedder gets mostly text it cannot read."""
    from ..models.embedder import MINILM, MODEL_NAMES

    share = unreadable_share(counts)
    if model_name != MODEL_NAMES[MINILM] or share < WARN_SHARE:
        return None
    return (
        f"{share:.0%} of this text is not in Latin script, which the embedder {model_name} cannot read: "
        f'set [embedder] model = "multilingual" in the store\'s config.toml, then run `expengine reindex`'
    )
