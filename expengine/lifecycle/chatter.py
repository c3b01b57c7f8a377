"""Chatter and boilerplate go to sleep in the first cycle and never become units.

Two measured rules over the store's active messages, sentence by sentence (a message is chatter when
every sentence is):
- *boilerplate*: the sentence, normalised (lowercase, digits → #, punctuation dropped), recurs in at
  least `chatter.min_sessions` sessions or `chatter.session_share` of them, and has no digit ("Could you
  please provide your user ID?", "###STOP###", "You're welcome"). A sentence with an id or amount is
  never boilerplate, however often its shape recurs ("Flight HAT123").
- *no content*: every word is a stop word, a chatter word of some language (`CHATTER_WORDS`) or a
  speaker's name (or its short form): "Hey Mel! Good to see you!", "Thanks, you too! ###STOP###". A number or any other
  word keeps it. (Measured: also counting words common across the store as empty, as an IDF cut would,
  put real tau-bench requests to sleep: "I'd like to upgrade to economy class" is all common words
  in an airline store.)

The vocabulary is data: a language is one more entry in `CHATTER_WORDS` (and, when sklearn has no stop
words for it, in `STOP_WORDS`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..results import Result
from ..store.db import in_ids
from ..store.derived_runs import fingerprints, store_runs, stored_fingerprints
from ..store.vocabulary import INDEXED_RECORDS_SQL

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext

# Words that greet, thank, agree, react or sign off: they say nothing about anyone or anything.
CHATTER_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        """
        hi hello hey hiya yo greetings morning evening afternoon night bye goodbye cya later farewell cheers
        thanks thank thx ty appreciate appreciated welcome pleasure problem np worries
        ok okay okey sure yes yeah yep yup no nope nah alright right fine got gotcha understood noted
        great good nice cool awesome amazing wow wonderful fantastic lovely perfect excellent sweet neat
        glad happy sounds sound fun exciting excited incredible super totally absolutely definitely indeed
        lol haha hahaha omg aww oh ah hmm um uh
        stop assistance assist help helpful anything else questions question feel free ask day safe travels
        hear chat talk talking catch soon care see meet nice know let please hold moment
        """.split()
    ),
    # Chinese is written without spaces: a run of Chinese characters is empty when these words cover it
    "zh": frozenset(
        """
        你好 您好 嗨 哈喽 早 早上好 下午好 晚上好 晚安 在吗 在的 在 请说 请讲 谢谢 谢谢你 谢谢您 谢 多谢 感谢 辛苦了 辛苦
        不客气 没关系 没事了 没事 再见 拜拜 回见 好的 好 嗯 嗯嗯 哦 噢 哈哈 哈哈哈 呵呵 收到 明白 明白了 知道了 了解
        没问题 可以 行 对 是的 太好了 好滴 先这样 就这样 啦 呀 吧 哈 呢 了 啊
        """.split()
    ),
}
# Stop words by language beyond sklearn's English list (`stop_words`); a language without one adds it here.
STOP_WORDS: dict[str, frozenset[str]] = {"en": frozenset("s t m re ll ve d".split())}  # what "I'm", "you're" leave
MARKERS = ("###STOP###",)  # end-of-dialogue markers simulators and frameworks append
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_WORD = re.compile(r"[^\W\d_]+|\d+|#+\w*#*", re.UNICODE)
_DIGIT = re.compile(r"\d")
_SPEAKER = re.compile(r"^\s*([^:\n]{1,40}):\s")
_ZH_EMPTY = re.compile("(?:" + "|".join(sorted(CHATTER_WORDS["zh"], key=len, reverse=True)) + ")+")


@dataclass
class ChatterReport(Result):
    run_id: str | None
    dry_run: bool
    checked: int = 0
    boilerplate: int = 0
    no_content: int = 0
    dormant: int = 0
    sessions_read: int = 0  # sessions whose messages changed, their shapes computed again (`refresh_shapes`)
    examples: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        return f"{self.dormant} chatter messages asleep ({self.boilerplate} boilerplate, {self.no_content} empty)"


def stop_words() -> frozenset[str]:
    """sklearn's English stop words plus any listed in STOP_WORDS, plus every chatter word."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    extra: set[str] = set()
    for words in (*STOP_WORDS.values(), *CHATTER_WORDS.values()):
        extra.update(words)
    return frozenset(ENGLISH_STOP_WORDS) | frozenset(extra)


def split_speaker(text: str) -> tuple[str | None, str]:
    """'Caroline: hi!' → ('Caroline', 'hi!')."""
    match = _SPEAKER.match(text)
    return (match.group(1).strip(), text[match.end() :]) if match else (None, text)


def sentences(text: str) -> list[str]:
    return [s for s in (p.strip() for p in _SENTENCE.split(text)) if s]


def normalise(sentence: str) -> str:
    """The shape of a sentence: lowercase words, digits as #, no punctuation."""
    return " ".join(_WORD.findall(_DIGIT.sub("#", sentence.lower())))


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if not w.startswith("#")]


@dataclass
class Message:
    id: str
    session: str
    text: str


@dataclass
class Verdict:
    id: str
    rule: str  # "boilerplate" or "no content"


def _is_name(word: str, names: set[str]) -> bool:
    """A speaker's name or its short form ("Mel" for Melanie)."""
    return word in names or (len(word) >= 3 and any(name.startswith(word) for name in names))


def _body(text: str) -> str:
    body = split_speaker(text)[1]
    for marker in MARKERS:
        body = body.replace(marker, " ")
    return body


@dataclass(frozen=True)
class Shapes:
    """What the counts need of one session's messages: its speakers and its sentences' shapes."""

    session: str
    speakers: frozenset[str]
    shapes: frozenset[str]


def shapes_of(messages: Iterable[Message]) -> list[Shapes]:
    """Each session's speakers and shapes among `messages`."""
    by_session: dict[str, tuple[set[str], set[str]]] = {}
    for m in messages:
        speakers, shapes = by_session.setdefault(m.session, (set(), set()))
        if speaker := split_speaker(m.text)[0]:
            speakers.add(speaker.lower())
        shapes.update(normalise(s) for s in sentences(_body(m.text)))
    return [Shapes(session, frozenset(a), frozenset(b)) for session, (a, b) in by_session.items()]


def detect(
    messages: list[Message],
    *,
    min_sessions: int,
    session_share: float,
    among: Iterable[Shapes] | None = None,
) -> list[Verdict]:
    """The chatter among `messages`, by the two rules above, counted over `among` (the shapes of all the
    agent's active messages, a session's possibly in several parts; by default those of `messages`
    themselves): only the counts of the shapes `messages` have are kept, so memory follows `messages`,
    not the agent's whole history."""
    stop = stop_words()
    parsed = []
    for m in messages:
        body = _body(m.text)
        parts = sentences(body)
        parsed.append((m, body, parts, [normalise(s) for s in parts]))
    wanted = {shape for *_, shapes in parsed for shape in shapes}
    sessions: set[str] = set()
    speakers: set[str] = set()
    seen_in: dict[str, set[str]] = defaultdict(set)
    for counted in shapes_of(messages) if among is None else among:
        sessions.add(counted.session)
        speakers.update(counted.speakers)
        for shape in counted.shapes & wanted:
            seen_in[shape].add(counted.session)
    threshold = max(min_sessions, math.ceil(session_share * len(sessions)))
    names = {w for s in speakers for w in words(s)}
    verdicts = []
    for m, body, parts, shapes in parsed:
        if not parts:
            verdicts.append(Verdict(m.id, "boilerplate"))
            continue
        if all(shape and not _DIGIT.search(s) and len(seen_in[shape]) >= threshold for s, shape in zip(parts, shapes)):
            verdicts.append(Verdict(m.id, "boilerplate"))
            continue
        if not _DIGIT.search(body) and all(
            w in stop or _is_name(w, names) or _ZH_EMPTY.fullmatch(w) for w in words(body)
        ):
            verdicts.append(Verdict(m.id, "no content"))
    return verdicts


_MESSAGES_SQL = f"kind = 'message' AND {INDEXED_RECORDS_SQL} AND tool_name IS NULL"
CHUNK = 2000  # sessions read, written or counted at a time
SHAPES = "chatter"  # derived_runs pass: one session's Shapes, keyed by agent and session
_SESSION_KEY = "coalesce(agent, '') || chr(31) || coalesce(session, id)"


def refresh_shapes(store: "Store", *, full: bool, dry_run: bool) -> tuple[dict[str, Shapes], int]:
    """Keep each session's shapes (of its active messages) in derived_runs, computed again only for the
    sessions whose messages changed (their fingerprint, store/derived_runs.py; every session when `full`),
    so a cycle reads the text of the night's sessions, not the store's. Returns how many sessions were
    read; a dry run writes nothing and returns the changed sessions' shapes instead (by key)."""
    prints = fingerprints(store, _SESSION_KEY, _MESSAGES_SQL)
    old = {} if full else stored_fingerprints(store, SHAPES)
    stale = sorted(key for key, fingerprint in prints.items() if old.get(key) != fingerprint)
    kept: dict[str, Shapes] = {}
    if not dry_run:
        store_runs(store, SHAPES, {}, set(prints))
    for start in range(0, len(stale), CHUNK):
        keys = stale[start : start + CHUNK]
        rows = store.con.execute(
            f"SELECT {_SESSION_KEY}, id, coalesce(session, id), text FROM records "
            f"WHERE {_MESSAGES_SQL} AND {_SESSION_KEY} IN (SELECT unnest(?))",
            [keys],
        ).fetchall()
        by_key: dict[str, list[Message]] = defaultdict(list)
        for key, record_id, session, text in rows:
            by_key[key].append(Message(record_id, session, text or ""))
        fresh = {key: shapes_of(messages)[0] for key, messages in by_key.items()}
        if dry_run:
            kept.update(fresh)
            continue
        payloads = {
            key: json.dumps([found.session, sorted(found.speakers), sorted(found.shapes)])
            for key, found in fresh.items()
        }
        store_runs(store, SHAPES, {key: (prints[key], payloads[key]) for key in payloads}, None)
    return kept, len(stale)


def _agent_shapes(store: "Store", agent: str, fresh: dict[str, Shapes]) -> Iterator[Shapes]:
    """Every session's shapes of the agent's active messages: those `refresh_shapes` kept, read `CHUNK`
    sessions at a time, `fresh` (a dry run's) in place of the stored ones."""
    prefix = f"{agent or ''}\x1f"
    yield from (found for key, found in fresh.items() if key.startswith(prefix))
    after = prefix
    while True:
        rows = store.con.execute(
            "SELECT run_key, payload FROM derived_runs WHERE pass = ? AND starts_with(run_key, ?) AND run_key > ? "
            f"ORDER BY run_key LIMIT {int(CHUNK)}",
            [SHAPES, prefix, after],
        ).fetchall()
        if not rows:
            return
        after = rows[-1][0]
        for key, payload in rows:
            if key not in fresh:
                session, speakers, shapes = json.loads(payload)
                yield Shapes(session, frozenset(speakers), frozenset(shapes))


def sleep_chatter(
    store: "Store",
    *,
    dry_run: bool,
    run_id: str | None = None,
    now: dt.datetime | None = None,
    changed: tuple[str, list[Any]] = ("TRUE", []),
    full: bool = False,
) -> ChatterReport:
    """Active chatter messages go dormant with category 'chatter' (so refinement never quotes them).
    Pinned, protected and lesson records (errors, outcomes, feedback, preferences, safety) stay.
    Only the `changed` messages are judged (`CycleContext.changed`: the cycle's new ones and its sweep),
    against counts over all the agent's active messages (their sessions' shapes, `refresh_shapes`)."""
    from ..store.state import set_state

    started = time.monotonic()
    cfg = store.config.chatter
    report = ChatterReport(run_id=run_id, dry_run=dry_run)
    where, params = changed
    rows = store.con.execute(
        "SELECT id, agent, coalesce(session, id), text, category, pinned OR protected FROM records "
        f"WHERE {_MESSAGES_SQL} AND {where} ORDER BY ts, id",
        params,
    ).fetchall()
    by_agent: dict[str, list[Message]] = defaultdict(list)
    eligible: set[str] = set()
    for record_id, agent, session, text, category, kept in rows:
        by_agent[agent].append(Message(record_id, session, text or ""))
        if not kept and category in SLEEPABLE_CATEGORIES:
            eligible.add(record_id)
    fresh: dict[str, Shapes] = {}
    if by_agent:
        fresh, report.sessions_read = refresh_shapes(store, full=full, dry_run=dry_run)
    found: list[Verdict] = []
    for agent, messages in by_agent.items():
        found.extend(
            v
            for v in detect(
                messages,
                min_sessions=cfg.min_sessions,
                session_share=cfg.session_share,
                among=_agent_shapes(store, agent, fresh),
            )
            if v.id in eligible
        )
    report.checked = len(rows)
    report.boilerplate = sum(v.rule == "boilerplate" for v in found)
    report.no_content = sum(v.rule == "no content" for v in found)
    text_of = {m.id: m.text for ms in by_agent.values() for m in ms}
    report.examples = list(dict.fromkeys(text_of[v.id][:80] for v in found))[:5]
    if not dry_run and found:
        ids = [v.id for v in found]
        where, params = in_ids("id", ids)
        store.con.execute(f"UPDATE records SET category = 'chatter' WHERE {where}", params)
        report.dormant = set_state(
            store, ids, "dormant", reason="chatter: says nothing specific", run_id=run_id, now=now
        )
    report.seconds = round(time.monotonic() - started, 3)
    return report


# Categories ingest gives ordinary messages, and an agent's own "smalltalk" label; lessons (error, outcome,
# feedback, preference, safety) never sleep.
SLEEPABLE_CATEGORIES = ("chatter", "smalltalk", "conversation", "process", "fact", "message", "note")


class ChatterStep:
    """Chatter is judged among the cycle's new and swept messages, counted over all active ones, every
    cycle (after goal cleanup, before clustering)."""

    def run(self, store: "Store", ctx: "CycleContext") -> ChatterReport:
        return sleep_chatter(store, dry_run=False, run_id=ctx.run_id, now=ctx.now, changed=ctx.changed(), full=ctx.full)
