"""Which scripts a store's text is written in, and whether its embedder can read them.

MiniLM's vocabulary is English: most Chinese characters become [UNK], so Chinese texts get vectors
that barely differ. A new store whose first ingest (all its files) is largely such text takes the
multilingual embedder (config `embedder.model = "auto"`); one where only part of it is (English logs
beside Chinese ones: the README's demo store) takes the mixed one, which keeps MiniLM for English
text (the multilingual model costs English recall); an existing store is told, with the fix.
Text is counted in words, as a model reads it: a run of letters of one script is one word, and so
is each CJK character (Chinese has no spaces), so English tool names and JSON keys in a Chinese log
do not outweigh its sentences."""

from __future__ import annotations

from collections import Counter

# share of words MiniLM cannot read from which a new store takes the multilingual model, and from
# which a file of a later ingest into a MiniLM store is named in the warning
SWITCH_SHARE = 0.2
# share of a whole ingest from which an ingest into a MiniLM store warns (and a new store takes the
# mixed model, as it does when one of its files reaches SWITCH_SHARE)
WARN_SHARE = 0.1


def pick_model(counts: Counter[str], by_file: dict[str, Counter[str]]) -> str | None:
    """The packaged model a new store on `auto` takes for the words of its first ingest (total and per
    file): None to stay on MiniLM."""
    from ..models.embedder import MIXED, MULTILINGUAL

    share = unreadable_share(counts)
    if share >= SWITCH_SHARE:
        return MULTILINGUAL
    if share >= WARN_SHARE or any(unreadable_share(c) >= SWITCH_SHARE for c in by_file.values()):
        return MIXED
    return None


def unreadable_share(counts: Counter[str]) -> float:
    """Share of words the English model cannot read (everything but Latin)."""
    total = sum(counts.values())
    return (total - counts["latin"]) / total if total else 0.0


def embedder_warning(model_name: str, counts: Counter[str], by_file: dict[str, Counter[str]]) -> str | None:
    """A one-line warning with the fix, when an English-only embedder gets text it cannot read: a tenth
    of the ingest, or a file with a fifth or more (named)."""
    from ..models.embedder import INT8_SUFFIX, MINILM, MODEL_NAMES

    files = {name: unreadable_share(c) for name, c in by_file.items() if unreadable_share(c) >= SWITCH_SHARE}
    share = unreadable_share(counts)
    # MiniLM, fp32 or int8
    if model_name.removesuffix(INT8_SUFFIX) != MODEL_NAMES[MINILM] or (share < WARN_SHARE and not files):
        return None
    named = ", ".join(f"{name} {part:.0%}" for name, part in files.items())
    return (
        f"{share:.0%} of this text" + (f" ({named})" if named else "") + f" is in scripts the embedder {model_name} "
        "cannot read, so it will be hard to find: run `expengine reindex --model mixed` to re-embed this "
        "store's non-English text with the multilingual model (English text keeps its vectors), or ingest such "
        "logs into a store of their own"
    )
