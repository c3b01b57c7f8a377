"""Hits that say the same thing become one prompt line: "… (said 4 times, 3–27 April 2026)".

A store keeps what was said as it was said: the same request, the same "refund approved" outcome, the
same "I hate cilantro" in five sessions, and a note beside the turn it restates. Ranked by similarity,
such copies sit next to each other and would fill the prompt with one statement. Walking the ranked
candidates best first, a hit is a *repeat* of a kept one when their vectors' cosine reaches
`query.repeat_similarity` (the near-duplicate threshold a cycle merges memories at), or when one text,
as lowercase words without a "Speaker: " label, holds the other's (at least MIN_CONTAINED_WORDS words;
an id or a path counts as one word, whatever its value, so "order W1083185 not found" and "order
W1779302 not found" are one line).
The repeat goes under the kept hit (`Hit.repeats`: its id, date and sources, so `--json` lists every
id and `show` reaches each), and its slot goes to the next hit that says something else: the top `k`
and the token budget fill with distinct statements. This is maximal marginal relevance with a step
for its penalty: a candidate keeps its score unless it is a near-copy of one kept, then it yields.
Where one text holds the other, the kept line shows the longer (it says all the shorter does).

Rules are not repeats of other hits: rules that differ only in values are one rule after refinement
(lifecycle/refine/slots.py, same_fix.py), and a rule among the top `k` whose fix a rule kept above it
gives for another situation goes under that rule, whose line names both conditions (like_rules.py).
Folding like rules by their vectors instead (one line, "and N rules like it", the others' conditions
and fixes left out) cost tau-bench's leave-tasks-out lift (rules only 0.591 → 0.569).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..store.index import MEMORIES, UNITS
from .hits import Hit, Repeat
from .like_rules import SameFix
from .render import SPEAKER_LABEL, same_words
from .score import unit_rows

if TYPE_CHECKING:
    from ..store.row_memo import Rows
    from ..store.store import Store

MIN_CONTAINED_WORDS = 3


def _words(text: str) -> str:
    """The text's words (`same_words`), a "Speaker: " label aside, with a space at either end."""
    return f" {same_words(SPEAKER_LABEL.sub('', text, count=1))} "


def _holds(longer: str, shorter: str) -> bool:
    return shorter.count(" ") - 1 >= MIN_CONTAINED_WORDS and shorter in longer


def hit_vectors(
    store: "Store", hits: list[Hit], units: "Rows | None", known: dict[str, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """id → the vector LanceDB holds for each memory hit and each unit hit whose vector embeds its text
    (a memory's from `known`, what its search returned, held in memory where the index keeps them, else
    one read per table); none is embedded anew."""
    known = known or {}
    found = {h.id: known[h.id] for h in hits if h.type == "memory" and h.id in known}
    memory_ids = [h.id for h in hits if h.type == "memory" and h.id not in found]
    unit_ids = [u.id for u in unit_rows(store, units, [h.id for h in hits if h.type == "unit"]) if u.text_keyed]
    for table, ids in ((MEMORIES, memory_ids), (UNITS, unit_ids)):
        if not ids:
            continue
        with store.index.files.reading():
            held = store.index.held(table)
        found.update(held.by_id(ids) if held is not None else store.index.vectors(table, ids))
    return found


def fold_repeats(
    store: "Store",
    ranked: list[Hit],
    k: int,
    units: "Rows | None" = None,
    known: dict[str, np.ndarray] | None = None,
) -> tuple[list[Hit], dict[str, np.ndarray]]:
    """`ranked` with each repeat folded under the first hit it repeats, and each rule that gives the fix
    of a rule kept above it under that rule while fewer than `k` hits are kept (see the module
    docstring), looked for until `k` distinct non-rule hits are kept; the candidates below stay as they were (the rule slot
    reads them). Order is kept; a kept hit whose repeat holds its text takes that repeat's text. With
    it, the unit-length vectors read, by text (for `render_prompt`'s check of its evidence lines).
    `known`: memory id → its stored vector where the search returned it (`Retrieved.vectors`)."""
    similar = store.config.query.repeat_similarity
    if similar > 1 or k < 1:
        return ranked, {}
    kept: list[Hit] = []
    like_rules = SameFix(store, ranked, units)
    heads: list[tuple[Hit, str, np.ndarray | None]] = []  # (kept non-rule hit, its words, its vector)
    vectors: dict[str, np.ndarray] = {}
    read = 0  # the candidates whose vectors were read: 2k at a time, as far as the folding goes
    for n, hit in enumerate(ranked):
        if len(heads) >= k:
            return kept + ranked[n:], _by_text(ranked[:read], vectors)
        if hit.type == "unit" and hit.kind == "rule":
            if len(kept) >= k or not like_rules.folds(hit):
                kept.append(hit)
            continue
        if n >= read:
            batch = ranked[n : n + 2 * k]
            vectors.update((i, unit_length(v)) for i, v in hit_vectors(store, batch, units, known).items())
            read = n + len(batch)
        words, vector = _words(hit.text), vectors.get(hit.id)
        at = next((h for h in heads if _same(h, hit, words, vector, similar)), None)
        if at is None:
            kept.append(hit)
            heads.append((hit, words, vector))
            continue
        head, head_words, head_vector = at
        if _holds(words, head_words) and len(words) > len(head_words):
            _swap(head, hit)
            heads[heads.index(at)] = (head, words, head_vector if vector is None else vector)
        else:
            head.repeats.append(Repeat.of(hit))
    return kept, _by_text(ranked, vectors)


def _by_text(hits: list[Hit], vectors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {h.text: vectors[h.id] for h in hits if h.id in vectors}


def unit_length(vector: np.ndarray) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float32)
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def _same(
    head: tuple[Hit, str, np.ndarray | None], hit: Hit, words: str, vector: np.ndarray | None, similar: float
) -> bool:
    """Does `hit` (its `words` and unit-length `vector`) repeat the kept `head`? Not where one is a unit
    and the other its source: the unit's line stands for that turn (render.py shows it as evidence, or
    skips it), and it was said once."""
    kept, kept_words, kept_vector = head
    if hit.type != kept.type and (hit.id in kept.source_ids or kept.id in hit.source_ids):
        return False
    if vector is not None and kept_vector is not None and float(vector @ kept_vector) >= similar:
        return True
    return _holds(kept_words, words) or _holds(words, kept_words)


def _swap(head: Hit, longer: Hit) -> None:
    """`head` keeps its place and score but shows `longer`, which holds its text; `head`'s own identity
    goes under it as a repeat."""
    shorter = Repeat.of(head)
    for name in ("id", "type", "text", "source_ids", "kind", "state", "agent", "category", "ts", "expanded"):
        setattr(head, name, getattr(longer, name))
    head.repeats = [shorter, *head.repeats, *longer.repeats]
