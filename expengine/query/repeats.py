"""Hits that say the same thing become one prompt line: "… (said 4 times, 3–27 April 2026)".

A store keeps what was said as it was said: the same request, the same "refund approved" outcome, the
same "I hate cilantro" in five sessions, and a note beside the turn it restates. Ranked by similarity,
such copies sit next to each other and would fill the prompt with one statement. Walking the ranked
candidates best first, a hit is a *repeat* of a kept one when their vectors' cosine reaches
`query.repeat_similarity` (the near-duplicate threshold a cycle merges memories at), or when one text,
as lowercase words without a "Speaker: " label, holds the other's (at least MIN_CONTAINED_WORDS words).
The repeat goes under the kept hit (`Hit.repeats`: its id, date and sources, so `--json` lists every
id and `show` reaches each), and its slot goes to the next hit that says something else: the top `k`
and the token budget fill with distinct statements. This is maximal marginal relevance with a step
for its penalty: a candidate keeps its score unless it is a near-copy of one kept, then it yields.
Where one text holds the other, the kept line shows the longer (it says all the shorter does).

Rules are left as they are: the rule slot keeps one, and rules that differ only in values are one
rule after refinement (lifecycle/refine/slots.py).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from ..store.index import MEMORIES, UNITS
from .hits import Hit, Repeat
from .score import unit_rows

if TYPE_CHECKING:
    from ..store.row_memo import Rows
    from ..store.store import Store

MIN_CONTAINED_WORDS = 3
_SPEAKER = re.compile(r"^\s*[^:\n]{1,40}:\s")
_WORD = re.compile(r"\w+")


def _words(text: str) -> str:
    return f" {' '.join(_WORD.findall(_SPEAKER.sub('', text, count=1).lower()))} "


def _holds(longer: str, shorter: str) -> bool:
    return shorter.count(" ") - 1 >= MIN_CONTAINED_WORDS and shorter in longer


def hit_vectors(store: "Store", hits: list[Hit], units: "Rows | None") -> dict[str, np.ndarray]:
    """id → the vector LanceDB holds for each memory hit and each unit hit whose vector embeds its text
    (held in memory where the index keeps them, else one read per table); none is embedded anew."""
    found: dict[str, np.ndarray] = {}
    memory_ids = [h.id for h in hits if h.type == "memory"]
    unit_ids = [u.id for u in unit_rows(store, units, [h.id for h in hits if h.type == "unit"]) if u.text_keyed]
    for table, ids in ((MEMORIES, memory_ids), (UNITS, unit_ids)):
        if not ids:
            continue
        with store.index.files.reading():
            held = store.index.held(table)
        found.update(held.by_id(ids) if held is not None else store.index.vectors(table, ids))
    return found


def fold_repeats(
    store: "Store", ranked: list[Hit], k: int, units: "Rows | None" = None
) -> tuple[list[Hit], dict[str, np.ndarray]]:
    """`ranked` with each repeat folded under the first hit it repeats (see the module docstring), looked
    for until `k` distinct non-rule hits are kept; the candidates below stay as they were (the rule slot
    reads them). Order is kept; a kept hit whose repeat holds its text takes that repeat's text. With
    it, the unit-length vectors read, by text (for `render_prompt`'s check of its evidence lines)."""
    similar = store.config.query.repeat_similarity
    if similar > 1 or k < 1:
        return ranked, {}
    window = _window(ranked, k)
    vectors = {i: unit_length(v) for i, v in hit_vectors(store, window, units).items()}
    by_text = {h.text: vectors[h.id] for h in window if h.id in vectors}
    words = [_words(h.text) for h in window]
    near = _near(window, vectors, similar)
    kept: list[Hit] = []
    heads: list[int] = []  # positions in `window` of the kept non-rule hits; a swapped head's words move
    for n, hit in enumerate(window):
        if hit.type == "unit" and hit.kind == "rule":
            kept.append(hit)
            continue
        at = next((h for h in heads if _same(window[h], hit, near[h, n], words[h], words[n])), None)
        if at is None:
            kept.append(hit)
            heads.append(n)
        elif _holds(words[n], words[at]) and len(words[n]) > len(words[at]):
            _swap(window[at], hit)
            words[at] = words[n]
        else:
            window[at].repeats.append(Repeat.of(hit))
    return kept + ranked[len(window) :], by_text


def unit_length(vector: np.ndarray) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float32)
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def _same(head: Hit, hit: Hit, near: bool, head_words: str, words: str) -> bool:
    """Does `hit` repeat `head`? Not where one is a unit and the other its source: the unit's line
    stands for that turn (render.py shows it as evidence, or skips it), and it was said once."""
    if hit.type != head.type and (hit.id in head.source_ids or head.id in hit.source_ids):
        return False
    return near or _holds(head_words, words) or _holds(words, head_words)


def _near(hits: list[Hit], vectors: dict[str, np.ndarray], similar: float) -> np.ndarray:
    """Which pairs of `hits` are near-duplicates by cosine (False where a vector is missing)."""
    matrix = np.zeros((len(hits), max((v.shape[0] for v in vectors.values()), default=1)), dtype=np.float32)
    for n, hit in enumerate(hits):
        vector = vectors.get(hit.id)
        if vector is not None:
            matrix[n] = vector
    return (matrix @ matrix.T) >= similar


def _window(ranked: list[Hit], k: int) -> list[Hit]:
    """The ranked candidates down to the one whose distinct non-rule texts number `k` twice over: enough
    to refill `k` slots when half the best ones repeat each other, without reading every candidate's
    vector."""
    seen: set[str] = set()
    for n, hit in enumerate(ranked):
        seen.add(" ".join(hit.text.lower().split()))
        if len(seen) >= 2 * k:
            return ranked[: n + 1]
    return ranked


def _swap(head: Hit, longer: Hit) -> None:
    """`head` keeps its place and score but shows `longer`, which holds its text; `head`'s own identity
    goes under it as a repeat."""
    shorter = Repeat.of(head)
    for name in ("id", "type", "text", "source_ids", "kind", "state", "agent", "category", "ts", "expanded"):
        setattr(head, name, getattr(longer, name))
    head.repeats = [shorter, *head.repeats, *longer.repeats]
