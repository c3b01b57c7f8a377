"""A speaker's short notes of one session consolidate into one note, the subject said once.

LoCoMo's speakers take turns: each turn of Caroline's says a fact or two, and each became a note that
opens with her name. The new notes of one subject, one session and one day (and one category: a
preference stays a preference) are packed in order into notes of at most `notes.consolidate_tokens`
tokens: "Caroline went to support group on 7 May 2023; is looking into counseling jobs; …". The
first note keeps its id and takes the others' sources; the others are superseded by it (their history
says so). A statement keeps its own resolved date in its wording; the consolidated note's day is the
common day of its statements, else the day they were said.

Not consolidated: a note on a single-valued attribute (it must stay apart to be superseded), a
restated note (its wording names its dates), Chinese notes.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...textutil import HAN, approx_tokens
from .merge import Book, Note, words_of
from .subjects import their

if TYPE_CHECKING:
    from ...store.store import Store


@dataclass
class Candidate:
    note: Note
    said_on: dt.date


@dataclass
class Pending:
    """The new notes a pass may consolidate, by (session, day said, subject, category), in order."""

    groups: dict[tuple[str, dt.date, str, str], list[Candidate]] = field(default_factory=dict)
    restated: set[str] = field(default_factory=set)

    def add(self, note: Note, *, session: str, said_on: dt.date, category: str) -> None:
        if note.attribute is None and not HAN.search(note.statement):
            self.groups.setdefault((session, said_on, note.subject, category), []).append(Candidate(note, said_on))


def tail(statement: str, subject: str) -> str:
    """A statement as it reads after its subject's first one: "Caroline is looking into …" → "is
    looking into …", "Caroline: transgender stories …" → "transgender stories …"."""
    if statement.startswith(f"{subject}: "):
        return statement[len(subject) + 2 :]
    if re.match(rf"{re.escape(subject)} (?=[a-z])(?!and others\b)", statement):  # "Jon and others'll …" stays
        return statement[len(subject) + 1 :]
    return statement


def packs(candidates: list[Candidate], limit: int) -> list[list[Candidate]]:
    """Consecutive runs of candidates whose joined wording stays within `limit` tokens."""
    out: list[list[Candidate]] = []
    size = 0
    for candidate in candidates:
        cost = approx_tokens(candidate.note.statement)
        if out and size + cost <= limit:
            out[-1].append(candidate)
            size += cost
        else:
            out.append([candidate])
            size = cost
    return [pack for pack in out if len(pack) > 1]


def consolidate(
    store: "Store",
    pending: Pending,
    book: dict[str, Book],
    limit: int,
    *,
    agent_of: dict[str, str],
    run_id: str | None,
    now: dt.datetime,
) -> dict[str, str]:
    """Write the consolidated notes; absorbed note id → the note that now carries it."""
    from ...store import units as owner
    from . import units

    moved: dict[str, str] = {}
    for (session, said_on, subject, _), candidates in pending.groups.items():
        live = [c for c in candidates if c.note.id not in pending.restated and c.note in book[agent_of[session]]]
        for pack in packs(live, limit):
            head, rest = pack[0].note, [c.note for c in pack[1:]]
            # said once: each statement named its subject's possessive; after the first, it is "their"
            statement = their("; ".join([head.statement, *(tail(n.statement, subject) for n in rest)]), [subject])
            days = {n.as_of for n in [head, *rest]}
            head.statement = statement
            head.as_of = days.pop() if len(days) == 1 else said_on
            head.days = [head.as_of]
            head.words = words_of(statement, subject)
            head.source_ids = list(dict.fromkeys(i for n in [head, *rest] for i in n.source_ids))
            why = f"consolidated with {len(rest)} more notes of {subject} said on {said_on:%Y-%m-%d}"
            units.merge(store, head, why=why, run_id=run_id, now=now, new_day=True)
            ids = [n.id for n in rest]
            owner.set_status(
                store, ids, "superseded", winner=head.id, reason="consolidated into one note", run_id=run_id, now=now
            )
            for note in rest:
                book[agent_of[session]].remove(note)
                moved[note.id] = head.id
    return moved
