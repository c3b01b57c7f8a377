"""The notes step: each cycle, the turns not noted yet become notes (the package's docstring says how)."""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...results import Result
from ...store.db import in_ids, json_ids
from ...textutil import HAN
from ..chatter import SLEEPABLE_CATEGORIES
from ..common import short
from ..cycle import Skipped
from . import units
from .consolidate import Pending, consolidate
from .merge import Book, Note, slot, words_of
from .people import people
from .reword import rewording
from .statements import TurnNotes, split_speaker, turn_notes
from .subjects import ROLE_NAMES, Person

if TYPE_CHECKING:
    from ...store.store import Store
    from ..cycle import CycleContext

NOTE_CATEGORY = "fact"
# Lessons a conversation's turn may hold ("I love painting", "be careful on the ice"): a note that carries
# such a turn takes its category, so the lesson stays in the hot store while the turn sleeps.
CARRIED_LESSONS = ("preference", "safety")
CONFIDENCE = 0.6  # a template's rewording of one turn; each restatement adds CONFIDENCE_PER_SOURCE
CONFIDENCE_PER_SOURCE = 0.1


@dataclass
class NotesReport(Result):
    run_id: str | None
    dry_run: bool
    turns_checked: int = 0
    notes_written: int = 0
    notes_merged: int = 0
    notes_superseded: int = 0
    notes_consolidated: int = 0  # joined into another note of their speaker's in the session
    reactions_joined: int = 0  # remark-only turns answering the other speaker's noted turn: its note's sources
    turns_carried: int = 0  # covered by their notes: dormant
    turns_chatter: int = 0  # nothing informative: dormant
    turns_kept: int = 0  # not fully carried (or never sleeping): active
    llm_calls: int = 0
    llm_rejected: int = 0  # answers that failed grounding (or the call): the template's wording stayed
    examples: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"{self.notes_written} notes written, {self.notes_merged} merged, {self.notes_superseded} superseded, "
            f"{self.reactions_joined} reactions joined, {self.notes_consolidated} consolidated; "
            f"turns asleep: {self.turns_carried} carried, {self.turns_chatter} chatter; {self.turns_kept} kept"
        )


@dataclass
class Turn:
    id: str
    agent: str
    session: str
    ts: dt.datetime
    role: str | None
    content: str
    category: str
    pinned: bool
    protected: bool  # a protected phrase ("I love", "always"): sleeps only when its notes carry it
    merged_ids: list[str]
    in_session: bool  # the record names its session (else the agent stands for it, and nothing consolidates)
    user: str | None = None  # whose turn: its notes are that person's, and meet only that person's notes


def _of_user(key: str, user: str | None) -> str:
    """An agent's notes (`books`) or a session (reactions, consolidation) as far as one user is in it."""
    return key if user is None else f"{key}\x1f{user}"


def note_id(agent: str, subject: str, statement: str, first_source: str) -> str:
    digest = hashlib.sha256(f"note\x1f{agent}\x1f{subject}\x1f{statement}\x1f{first_source}".encode()).hexdigest()
    return "u-" + digest[:12]


def _pending_turns(store: "Store", changed: tuple[str, list[Any]] = ("TRUE", [])) -> list[Turn]:
    """Active messages of conversations that no note cites yet, oldest first, among the `changed` ones
    (the cycle's new records and sweep: a turn kept active last cycle would be kept again). An agent's
    task runs (messages of a goal, sessions with tool use) are left to refinement's rules and intents."""
    where, params = changed
    rows = store.con.execute(
        "SELECT id, agent, coalesce(session, agent), ts, role, content, category, pinned, protected, merged_ids, "
        "session IS NOT NULL, user "
        "FROM records WHERE kind = 'message' AND state = 'active' AND tool_name IS NULL AND content IS NOT NULL "
        f"AND goal_id IS NULL AND {where} AND coalesce(session, agent) NOT IN "
        "(SELECT DISTINCT coalesce(session, agent) FROM records WHERE kind IN ('tool_call', 'tool_result')) "
        "ORDER BY ts, id",
        params,
    ).fetchall()
    noted = {
        i
        for (i,) in store.con.execute(
            "SELECT DISTINCT s FROM (SELECT unnest(from_json(source_ids, '[\"VARCHAR\"]')) AS s FROM units "
            "WHERE kind = ? AND json_valid(source_ids)) WHERE s IN (SELECT unnest(?))",
            [units.NOTE_KIND, [r[0] for r in rows]],
        ).fetchall()
    }
    return [
        Turn(id_, agent, session, ts, role, content, category, bool(pin), bool(protect), json_ids(merged), known, user)
        for id_, agent, session, ts, role, content, category, pin, protect, merged, known, user in rows
        if id_ not in noted
    ]


def _person(turn: Turn, speakers: dict[str, list[str]]) -> Person | None:
    """Who "I" and "you" are in this turn; None when neither a speaker label nor a known role says it."""
    label = split_speaker(turn.content)[0]
    session = speakers.get(turn.session, [])
    if label and label in session:
        others = [s for s in session if s != label]
        return Person(label, others[0] if len(session) == 2 else None)
    names = ROLE_NAMES["zh" if HAN.search(turn.content) else "en"]
    if turn.role in names:
        other = "assistant" if turn.role == "user" else "user"
        return Person(names[turn.role], names[other])
    return None


def _existing(store: "Store", turn: Turn, overlap: float) -> Book:
    rows = store.con.execute(
        "SELECT id, subject, statement, attribute, as_of, source_ids FROM units "
        "WHERE kind = ? AND status IN ('active', 'dormant') AND agent = ? AND user IS NOT DISTINCT FROM ?",
        [units.NOTE_KIND, turn.agent, turn.user],
    ).fetchall()
    notes = []
    for uid, subject, statement, attribute, as_of, source_ids in rows:
        sources = json_ids(source_ids)
        where, params = in_ids("id", sources)
        days = [ts.date() for (ts,) in store.con.execute(f"SELECT ts FROM records WHERE {where}", params).fetchall()]
        notes.append(
            Note(uid, subject, statement, attribute, as_of.date(), sources, days, words_of(statement, subject))
        )
    return Book(notes, overlap)


def _row(note: Note, turn: Turn) -> dict[str, Any]:
    return {
        "id": note.id,
        "text": note.text,
        "statement": note.statement,
        "subject": note.subject,
        "attribute": note.attribute,
        "as_of": dt.datetime.combine(note.as_of, dt.time()),
        "category": turn.category if turn.category in CARRIED_LESSONS else NOTE_CATEGORY,
        "agent": turn.agent,
        "user": turn.user,
        "support": len(note.source_ids),
        "confidence": CONFIDENCE,
        "source_ids": note.source_ids,
        "method": "template",
        "cluster_key": f"note:{turn.session}",
    }


def write_notes(
    store: "Store",
    *,
    dry_run: bool = False,
    run_id: str | None = None,
    now: dt.datetime,
    llm: Any = None,
    max_llm_calls: int | None = None,
    changed: tuple[str, list[Any]] = ("TRUE", []),
) -> NotesReport:
    """One pass over the turns not noted yet (see the module docstring); `now` stamps every change.
    `llm` is the cycle's model provider (used only where `llm.model_path` is set). `changed`: SQL
    for the records to look at (`CycleContext.changed`), every record by default."""
    from ...store.state import set_state

    started = time.monotonic()
    cfg = store.config.notes
    report = NotesReport(run_id=run_id, dry_run=dry_run)
    turns = _pending_turns(store, changed)
    report.turns_checked = len(turns)
    if not turns:
        report.seconds = round(time.monotonic() - started, 3)
        return report
    speakers, names = people(store, {t.agent for t in turns}, keep=not dry_run)
    reword = rewording(store, llm, max_llm_calls)
    books: dict[str, Book] = {}
    touched: list[str] = []
    carried: dict[str, list[str]] = defaultdict(list)  # note id → turns it lets sleep
    chatter: list[str] = []
    previous: dict[str, tuple[str, Note]] = {}  # per session: the turn before's speaker and last note
    pending = Pending()  # new notes that may consolidate with their speaker's others of the session
    agent_of: dict[str, str] = {}
    for turn in turns:
        person = _person(turn, speakers)
        book_key, thread = _of_user(turn.agent, turn.user), _of_user(turn.session, turn.user)
        agent_of[thread] = book_key
        if person is None:
            report.turns_kept += 1
            continue
        found: TurnNotes = turn_notes(turn.content, person=person, day=turn.ts.date(), names=names[book_key])
        book = books.get(book_key) or books.setdefault(book_key, _existing(store, turn, cfg.restatement_overlap))
        sources = list(dict.fromkeys([turn.id, *turn.merged_ids]))
        sleepable = turn.category in SLEEPABLE_CATEGORIES and not (turn.pinned or turn.protected)
        # a protected turn ("I love painting") that its notes carry sleeps too: the note takes its category,
        # and a unit standing for a protected record never decays (store/units.SPARED_SQL)
        carries = bool(found.statements) and found.covered and not turn.pinned
        carried_kind = turn.category in SLEEPABLE_CATEGORIES or turn.category in CARRIED_LESSONS
        carries = carries and (sleepable or turn.category in CARRIED_LESSONS)
        answered = previous.get(thread)
        if carries and found.remarks_only and answered and answered[0] != person.me and answered[1] in book:
            # a reaction to the other speaker's noted turn ("Love the blue vase in the pic.") joins that note
            touched.append(_join(store, answered[1], turn, sources, run_id, now))
            carried[answered[1].id].append(turn.id)
            report.reactions_joined += 1
            continue
        # a turn that stays active says everything itself: its notes are only the dates it resolves
        statements = found.statements if carries else [s for s in found.statements if s.dated]
        for statement in statements:
            reword(statement, turn.content)
        written = [
            _note(store, book, statement, person, turn, sources, report, pending, run_id, now)
            for statement in statements
        ]
        ids = [note.id for note in written]
        touched.extend(ids)
        if written:
            previous[thread] = (person.me, written[-1])
        else:
            previous.pop(thread, None)  # a reaction answers the turn right before it
        if not found.statements and not found.unresolved and not turn.pinned and (sleepable or carried_kind):
            chatter.append(turn.id)  # a protected phrase in chatter ("I'm always here for you!") protects nothing
        elif carries:
            carried[ids[0]].append(turn.id)
        else:
            report.turns_kept += 1
        if len(report.examples) < 5 and found.statements:
            report.examples.append(short(found.statements[0].text))
    if cfg.consolidate_tokens:
        moved = consolidate(store, pending, books, cfg.consolidate_tokens, agent_of=agent_of, run_id=run_id, now=now)
        report.notes_consolidated = len(moved)
        for absorbed, head in moved.items():
            carried[head].extend(carried.pop(absorbed, []))
    for note, turn_ids in carried.items():
        report.turns_carried += set_state(
            store, turn_ids, "dormant", reason=f"carried by note {note}", run_id=run_id, now=now
        )
    report.turns_chatter = set_state(
        store, chatter, "dormant", reason="chatter: nothing informative", run_id=run_id, now=now
    )
    units.flush(store, list(dict.fromkeys(touched)))
    report.llm_calls, report.llm_rejected = reword.calls, reword.rejected
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _note(
    store: "Store",
    book: Book,
    statement: Any,
    person: Person,
    turn: Turn,
    sources: list[str],
    report: NotesReport,
    pending: Pending,
    run_id: str | None,
    now: dt.datetime,
) -> Note:
    """Write one statement: merged into the note it restates, or a new note (superseding the note on the
    same single-valued attribute it changes). The note that now carries it."""
    note = Note(
        id=note_id(turn.agent, person.me, statement.text, turn.id),
        subject=person.me,
        statement=statement.text,
        attribute=slot(statement.sentence),
        as_of=statement.day,
        source_ids=sources,
        days=[statement.day],
        words=words_of(statement.text, person.me),
    )
    again = book.restated(note)
    if again is not None:
        again.source_ids = list(dict.fromkeys([*again.source_ids, *sources]))
        again.days = [*again.days, statement.said_on]
        units.merge(store, again, why=f"restated in {turn.id} on {statement.said_on:%Y-%m-%d}", run_id=run_id, now=now)
        report.notes_merged += 1
        pending.restated.add(again.id)
        return again
    old = book.replaced(note)
    row = _row(note, turn)
    units.insert(store, [row], run_id=run_id, now=now)
    if turn.in_session:
        pending.add(
            note, session=_of_user(turn.session, turn.user), said_on=statement.said_on, category=row["category"]
        )
    book.add(note)
    report.notes_written += 1
    if old is not None:
        units.supersede(
            store,
            old.id,
            note.id,
            why=f"{note.attribute} changed in {turn.id}: {note.statement}",
            run_id=run_id,
            now=now,
        )
        book.remove(old)
        report.notes_superseded += 1
        store.history_log(note.id, "supersedes", old.id, run_id=run_id, at=now)
    return note


def _join(store: "Store", note: Note, turn: Turn, sources: list[str], run_id: str | None, now: dt.datetime) -> str:
    """A reaction's turn becomes one more source of the note it reacts to (its wording unchanged); the id."""
    note.source_ids = list(dict.fromkeys([*note.source_ids, *sources]))
    units.merge(store, note, why=f"reaction in {turn.id}", run_id=run_id, now=now)
    return note.id


class NotesStep:
    """Notes are written every cycle, after chatter sleeps and before clustering."""

    def run(self, store: "Store", ctx: "CycleContext") -> "NotesReport | Skipped":
        if not store.config.notes.enabled:
            return Skipped("notes off (notes.enabled = false)")
        return write_notes(
            store,
            dry_run=ctx.dry_run,
            run_id=ctx.run_id,
            now=ctx.now,
            llm=ctx.llm,
            max_llm_calls=ctx.max_llm_calls,
            changed=ctx.changed(),
        )
