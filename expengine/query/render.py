"""Turn ranked hits into a compact action guide for a system prompt, within a token budget."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np

from ..textutil import approx_tokens, values_as_words
from .novelty import leading, untold, words

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Iterable

    from .hits import Evidence, Hit

HEADER = "Relevant experience (from past runs; verify before relying on it):"
MAX_LINE_CHARS = 400
EVIDENCE_LINES_PER_UNIT = 3
# the kinds whose lines leave out what was said above (`novelty.py`): notes and a conversation's turns
TALK = frozenset({"note", "message"})
# A source counts as quoted when the unit's line holds at least this share of its words, in order
# from its start (templates clip long quotes at a word), and at least MIN_QUOTED_WORDS of them.
QUOTED_SHARE = 0.75
MIN_QUOTED_WORDS = 3
_WORD = re.compile(r"\w+")
SPEAKER_LABEL = re.compile(r"^\s*[^:\n]{1,40}:\s")  # "Caroline: " opening a turn


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_LINE_CHARS else flat[: MAX_LINE_CHARS - 1].rstrip() + "…"


def day(d: "dt.date") -> str:
    """ "7 May 2023": fewer tokens than ISO's "2023-05-07", and the words a question or answer says."""
    return f"{d.day} {d:%B %Y}"


def said(hit: "Hit") -> str:
    """ " (said 4 times, 3–27 April 2026)" for a hit with repeats (the days of those dated); "" without.
    A rule folded into a rule's line is not a repeat: the line names its condition (`like_rules.py`)."""
    repeats = [r for r in hit.repeats if r.kind != "rule"]
    if not repeats:
        return ""
    days = sorted({d.date() for d in (hit.ts, *(r.ts for r in repeats)) if d is not None})
    count = f"said {len(repeats) + 1} times"
    if not days:
        return f" ({count})"
    first, last = days[0], days[-1]
    if first == last:
        span = day(first)
    elif first.year != last.year:
        span = f"{day(first)} – {day(last)}"
    elif first.month != last.month:
        span = f"{first.day} {first:%B} – {last.day} {last:%B %Y}"
    else:
        span = f"{first.day}–{last.day} {last:%B %Y}"
    return f" ({count}, {span})"


def heard_on(hit: "Hit") -> "dt.date | None":
    """The day whose heading a hit's line goes under: what people said (a note, a turn) on a known day.
    Other lines (rules, tool records, undated notes) keep their rank order above the days."""
    return hit.ts.date() if hit.kind in TALK and hit.ts else None


def day_headings(days: "Iterable[dt.date]") -> list[str]:
    """One heading per day, oldest first, the year only where it changes ("7 May 2023:", "20 July:")."""
    headings, year = [], None
    for d in sorted(set(days)):
        headings.append(f"{day(d) if d.year != year else f'{d.day} {d:%B}'}:")
        year = d.year
    return headings


def hit_line(hit: "Hit", text: str | None = None, *, under_day: bool = False) -> str:
    """A hit's prompt line, showing `text` in place of its own (a shortened one, `novelty.untold`);
    `under_day`: the line goes under its day's heading, so its label leaves the day out (a note's
    label is its day alone, so it has none)."""
    if under_day:
        kind = "" if hit.type == "unit" else f"[{hit.kind}] "
        return f"- {kind}{_clip(hit.text if text is None else text)}{said(hit)}"
    if hit.type == "unit" and hit.kind == "note" and hit.ts:
        label = day(hit.ts)  # "[7 May 2023] Caroline went to …": the day the fact is about
    elif hit.type == "unit":
        label = hit.kind
    else:
        label = ", ".join(x for x in (hit.kind, day(hit.ts) if hit.ts else None) if x)
    return f"- [{label}] {_clip(hit.text if text is None else text)}{said(hit)}"


def evidence_line(evidence: "Evidence", text: str | None = None) -> str:
    return f"  - evidence ({evidence.state}): {_clip(evidence.text if text is None else text)}"


def lowercase_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def same_words(text: str) -> str:
    """What two texts that say the same share: their lowercase words, each id and path one word."""
    return " ".join(lowercase_words(values_as_words(text)))


def quoted_in(line: str, source_text: str) -> bool:
    """Does `line` already carry `source_text` verbatim (give or take a "Speaker: " label, punctuation
    and a clipped tail)? Then an evidence line for it would only repeat the unit's words."""
    return _quoted(_spaced_words(line), source_text)


def _spaced_words(line: str) -> str:
    return f" {' '.join(lowercase_words(line))} "


def _quoted(shown: str, source_text: str) -> bool:
    """`quoted_in` for a line's `_spaced_words`, taken once for all of a unit's sources."""
    for text in (source_text, SPEAKER_LABEL.sub("", source_text, count=1)):
        words = lowercase_words(text)
        shortest = max(MIN_QUOTED_WORDS, math.ceil(len(words) * QUOTED_SHARE))
        for n in range(len(words), shortest - 1, -1):
            if f" {' '.join(words[:n])} " in shown:
                return True
    return False


class _Lines:
    """The vectors of the lines shown so far and whose line each is, to tell when a new line would only
    repeat one (cosine at least `similar`): texts without a vector are never repeats."""

    def __init__(self, vectors: dict[str, np.ndarray] | None, similar: float):
        self.vectors, self.similar = vectors or {}, similar
        self.rows: list[np.ndarray] = []
        self.owners: list["Hit"] = []
        self._matrix: np.ndarray | None = None  # `rows` stacked, until the next `add`

    def repeated(self, text: str) -> "Hit | None":
        """The hit whose line (or evidence line) `text` repeats, if any."""
        vector = self.vectors.get(text)
        if vector is None or not self.rows:
            return None
        if self._matrix is None:
            self._matrix = np.stack(self.rows)
        sims = self._matrix @ vector
        best = int(np.argmax(sims))
        return self.owners[best] if sims[best] >= self.similar else None

    def add(self, text: str, owner: "Hit") -> None:
        vector = self.vectors.get(text)
        if vector is not None:
            self.rows.append(vector)
            self.owners.append(owner)
            self._matrix = None


class _Days:
    """The day headings of the prompt so far: what a line under a new day costs for its heading."""

    def __init__(self) -> None:
        self.days: set["dt.date"] = set()
        self.tokens = 0

    def extra(self, d: "dt.date | None") -> int:
        """The tokens the headings would gain with `d` among them (0: no day, or one already there)."""
        if d is None or d in self.days:
            return 0
        return sum(map(approx_tokens, day_headings(self.days | {d}))) - self.tokens

    def add(self, d: "dt.date | None") -> None:
        if d is not None:
            self.tokens += self.extra(d)
            self.days.add(d)


def render_prompt(
    hits: list["Hit"],
    *,
    budget: int | None,
    evidence_floor: float = 0.0,
    note_evidence_floor: float | None = None,
    vectors: dict[str, np.ndarray] | None = None,
    repeat_similarity: float = 0.9,
    once: bool = True,
    by_day: bool = True,
) -> tuple[str, list["Hit"]]:
    """The prompt text and the hits it holds.

    Hits are added in rank order until the next one would pass `budget` tokens
    (`textutil.approx_tokens` of the whole text, header included); then adding stops. A `reserved`
    hit (the rule slot) has its line's tokens set aside first, so neither the hits above it nor their
    evidence lines can use them. Under a unit come up to EVIDENCE_LINES_PER_UNIT of its sources, most similar first, while they fit and reach
    `evidence_floor` (cosine similarity to the query: an unrelated source only spends budget; a note's
    turns, which it restates, reach `note_evidence_floor` where given); a source
    the unit's line already quotes (or whose text an earlier line already shows, or an earlier evidence
    line but for its ids and paths) gets no line but
    stays in `hit.expanded` marked `quoted`, and a
    record already in the prompt (as a memory hit or as evidence above) is not repeated: such a
    memory hit is left out, such a source left out of `hit.expanded`. A hit's `repeats` (`repeats.py`)
    are said by its line ("said N times, …"): their records count as in the prompt. `hit.expanded` keeps just the
    sources whose text is in the prompt under that unit; `source_ids` stay the unit's own sources.
    Given `vectors` (unit length, by text), a line that would repeat one shown above (cosine at least
    `repeat_similarity`) is not added either: a memory hit goes under that line's hit as one of its
    `repeats` (its count updated where the budget allows), a source is marked `quoted`.
    With `once`, a line leaves out its statements that the lines above already say (`novelty.py`).
    With `by_day`, what people said on a known day (`heard_on`) goes under that day's heading, the
    days oldest first below the other lines, each day said once (`arrange`).
    """
    used = approx_tokens(HEADER)
    blocks: list[list[str]] = []  # each kept hit's line and its evidence lines, in rank order
    block_days: list["dt.date | None"] = []  # the day heading each block goes under (None: above the days)
    days = _Days()
    kept: list["Hit"] = []
    in_prompt: set[str] = set()  # records whose text the prompt already holds
    texts_in_prompt: set[str] = set()  # evidence texts shown (`same_words`), so like sources are not repeated
    set_aside = sum(approx_tokens(hit_line(h)) for h in hits if h.reserved)
    said = _Lines(vectors, repeat_similarity)
    at: dict[int, int] = {}  # id(hit) → its block's index
    told: set[str] = set()  # the words of the lines shown (`once`: a statement said in them is left out)
    shows: dict[int, str] = {}  # id(hit) → the text its line shows
    # a source text's `same_words`, once a prompt: sources of units say the same things again and again
    words_of: dict[str, str] = {}
    for hit in hits:
        if hit.type == "memory" and hit.id in in_prompt:
            continue
        owner = said.repeated(hit.text) if hit.type == "memory" else None
        if owner is not None:
            room = None if budget is None else budget - used - set_aside
            block = at[id(owner)]
            used += _fold(owner, hit, blocks[block], room, shows[id(owner)], under_day=block_days[block] is not None)
            in_prompt.update(hit.source_ids)
            continue
        talk = once and hit.kind in TALK  # what people said; rules and tool records keep their wording
        shows[id(hit)] = untold(hit.text, told) if talk else hit.text
        heard = heard_on(hit) if by_day else None
        line = hit_line(hit, shows[id(hit)], under_day=heard is not None)
        cost = approx_tokens(line) + days.extra(heard)
        if hit.reserved:
            set_aside -= cost
        if budget is not None and used + cost + set_aside > budget:
            if set_aside:
                continue  # a lower hit that does not fit leaves room for the reserved rule below
            room = budget - used - days.extra(heard)
            under_day = heard is not None
            part = (
                leading(shows[id(hit)], lambda t: approx_tokens(hit_line(hit, t, under_day=under_day)) <= room)
                if talk
                else None
            )
            if part is not None:
                blocks.append([hit_line(hit, part, under_day=under_day)])
                block_days.append(heard)
                hit.expanded = []
                kept.append(hit)
            break
        at[id(hit)] = len(blocks)
        blocks.append([line])
        block_days.append(heard)
        days.add(heard)
        used += cost
        told |= words(line) | (words(day(heard)) if heard else set())
        said.add(hit.text, hit)
        if hit.type == "memory":
            in_prompt.update(hit.source_ids)
        in_prompt.update(i for r in hit.repeats for i in (r.id, *r.source_ids) if r.type == "memory")
        shown, evidence_lines = [], 0
        floor = note_evidence_floor if hit.kind == "note" and note_evidence_floor is not None else evidence_floor
        line_words, quoted = _spaced_words(line), {}  # whether the line quotes a source text, by text
        for evidence in hit.expanded:
            if evidence.id in in_prompt:
                continue
            text = evidence.text
            if text not in words_of:
                words_of[text] = same_words(text)
            if text not in quoted:
                quoted[text] = _quoted(line_words, text)
            shown_as = words_of[text]
            if quoted[text] or shown_as in texts_in_prompt or said.repeated(text):
                evidence.quoted = True
            elif evidence_lines < EVIDENCE_LINES_PER_UNIT and evidence.similarity >= floor:
                extra = evidence_line(evidence, untold(evidence.text, told) if talk else None)
                extra_cost = approx_tokens(extra)
                if budget is not None and used + extra_cost + set_aside > budget:
                    continue
                blocks[-1].append(extra)
                used += extra_cost
                told |= words(extra)
                evidence_lines += 1
                texts_in_prompt.add(shown_as)
                said.add(evidence.text, hit)
            else:
                continue
            shown.append(evidence)
            in_prompt.add(evidence.id)
        hit.expanded = shown
        kept.append(hit)
    return ("\n".join([HEADER, *arrange(blocks, block_days)]) if kept else ""), kept


def arrange(blocks: list[list[str]], block_days: list["dt.date | None"]) -> list[str]:
    """The blocks without a day in rank order, then each day's heading (oldest first) over its blocks
    in rank order: a day is said once, however many lines were said on it."""
    lines = [line for block, d in zip(blocks, block_days) if d is None for line in block]
    dated = sorted({d for d in block_days if d is not None})
    for heading, d in zip(day_headings(dated), dated):
        lines.append(heading)
        lines.extend(line for block, on in zip(blocks, block_days) if on == d for line in block)
    return lines


def _fold(owner: "Hit", hit: "Hit", block: list[str], room: int | None, text: str, *, under_day: bool) -> int:
    """Put `hit` under `owner` as a repeat and show the new count on `owner`'s line (`block[0]`) when
    it fits in `room` tokens (None: no budget); the tokens that took."""
    from .hits import Repeat

    owner.repeats.append(Repeat.of(hit))
    line = hit_line(owner, text, under_day=under_day)
    extra = approx_tokens(line) - approx_tokens(block[0])
    if room is not None and extra > room:
        return 0
    block[0] = line
    return extra
