"""Restatements merge, changes supersede.

- The same fact said again (same subject, content words overlapping by `notes.restatement_overlap`,
  Jaccard, at least `MIN_WORDS` of them) becomes one note with both sources and both dates.
- A single-valued fact (home, name, job: the patterns refinement already mines) said with a new value
  supersedes the subject's older note on it: "Jon moved to Boston" replaces "Jon lives in New York".
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from ...textutil import HAN
from ..refine.facts import SINGLE_VALUED, ZH_FACTS
from .dates import day_text
from .statements import _stem, content_words

MIN_WORDS = 3
_ALSO = re.compile(r"\s*\((?:also said on|又在) [^)]*\)$")


@dataclass
class Note:
    id: str
    subject: str
    statement: str  # the wording without the dates of restatements
    attribute: str | None  # a single-valued slot ("home"), or None
    as_of: dt.date
    source_ids: list[str]
    days: list[dt.date] = field(default_factory=list)  # the days it was said on, first = as_of
    words: frozenset[str] = frozenset()

    @property
    def text(self) -> str:
        later = sorted({d for d in self.days if d != self.as_of})
        if not later:
            return self.statement
        if HAN.search(self.statement):
            return f"{self.statement}（又在 {'、'.join(f'{d:%Y-%m-%d}' for d in later)}）"
        return f"{self.statement.rstrip('.')} (also said on {', '.join(day_text(d) for d in later)})"


def words_of(statement: str, subject: str) -> frozenset[str]:
    """What a statement says, for comparing: stemmed content words without the subject's name."""
    names = {w.lower() for w in subject.split()}
    return frozenset(_stem(w) for w in content_words(_ALSO.sub("", statement)) if w not in names)


def slot(sentence: str) -> str | None:
    """The single-valued attribute a sentence states (home, name, job), if any."""
    for attribute, pattern in SINGLE_VALUED:
        if pattern.search(sentence):
            return attribute
    for attribute, pattern, _, single in ZH_FACTS:
        if single and pattern.search(sentence):
            return attribute
    return None


def restates(a: frozenset[str], b: frozenset[str], overlap: float) -> bool:
    """The same content words, or (with at least MIN_WORDS of them) an overlap of `overlap` or more."""
    if a and a == b:
        return True
    if min(len(a), len(b)) < MIN_WORDS:
        return False
    return len(a & b) / len(a | b) >= overlap


class Book:
    """The active notes of one agent, by subject, as the pass adds to them."""

    def __init__(self, notes: list[Note], overlap: float):
        self.overlap = overlap
        self.by_subject: dict[str, list[Note]] = {}
        for note in notes:
            self.add(note)

    def __contains__(self, note: Note) -> bool:
        """Still one of the subject's active notes (not superseded since)."""
        return any(other is note for other in self.by_subject.get(note.subject, []))

    def add(self, note: Note) -> None:
        self.by_subject.setdefault(note.subject, []).append(note)

    def remove(self, note: Note) -> None:
        self.by_subject[note.subject].remove(note)

    def restated(self, note: Note) -> Note | None:
        """The active note `note` says again, if any."""
        size = len(note.words)
        for other in self.by_subject.get(note.subject, []):
            if abs(len(other.words) - size) <= size * (1 - self.overlap) + 1 and restates(
                other.words, note.words, self.overlap
            ):
                return other
        return None

    def replaced(self, note: Note) -> Note | None:
        """The subject's older note on the same single-valued attribute, if the new one changes it."""
        if note.attribute is None:
            return None
        return next(
            (o for o in self.by_subject.get(note.subject, []) if o.attribute == note.attribute and o.id != note.id),
            None,
        )
