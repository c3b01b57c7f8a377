"""A note's wording cut to the facts it states.

A statement keeps every clause that names something (a person, an object, a place, a number, a title,
a date, an action), and loses the clauses that only evaluate or feel ("…, which is pretty exciting",
"…; it's a great way to relax after a long day") and the hedges and intensifiers inside the rest
("pretty", "kind of", "a bit"). Which words a note may lose is one list, `IGNORABLE`, so the coverage
check (`statements.TurnNotes.covered`) and the cut agree: a turn whose notes lost only ignorable words
is still carried by them, and its full text stays reachable as the evidence line under its note.
A clause that opens with "it was", "they're"… and says only how something was (`evaluates`) goes too,
and the coverage check leaves it out the same way (`without_evaluations`). The wording is lean
(`lean`): no articles that carry nothing, no full stop (a note is one line).
"""

from __future__ import annotations

import re

# Words of feeling and evaluation: a sentence made only of these (and stop words) holds no fact.
OPINION_WORDS = frozenset(
    """
    love loves loved loving way ways support supportive supporting supported lot lots new tough difference thing
    things hard important importance life seeing need needs having best moments moment joy positive inspiring
    inspired inspire inspires gonna taking little feeling feelings feel feels felt long helps help helped helping
    person experience experiences special means mean meant times come comes coming impact dream dreams getting
    motivated motivating motivation world journey better key stuff makes make making rewarding look looks
    looking worth brings bring brought took plus finding memories memory wanted different happened started
    wants want share sharing trying try tried pushing push staying stay real think thinking thought able recently
    blast pretty express expressing proud giving give gives encouragement encouraging appreciate appreciates
    remember energy progress goals goal true beauty wait strong keeps keep knows know creative creating huge
    remind reminds reminder reminded enjoy enjoying enjoyed reach kind change sorry thinks truly challenges
    challenge learn learning happen create gives passion passionate success kindness forward finally hoping hope
    hopes magical thankful grateful tell acceptance especially lucky comfort determined growth far emotions
    emotional mind easy cause ready happy happiness glad excited exciting amazing awesome great good fun cool nice
    lovely wonderful beautiful incredible fantastic sweet cute crazy wild perfect fulfilling meaningful
    worthwhile valuable vital crucial essential powerful peaceful peace calm relaxing relax relaxed chill
    stress stressful tired busy fine ok okay sure totally absolutely definitely lately recently always sometimes
    people everyone anyone someone something anything everything nothing others other ones one day days
    hear heard glad wish believe believes belief agree understand understands true truth heart kinds
    """.split()
)

# What a note may leave out of its sentence: person words (names stand in) and filler.
DROPPED_WORDS = frozenset(
    "i me my mine myself we us our ours ourselves you your yours yourself "
    "i'm i've i'll i'd we're we've we'll we'd you're you've you'll you'd "
    "really so just totally super actually literally definitely kinda sorta basically".split()
)
# Words that soften, intensify or pad: a note states the fact without them.
HEDGE_WORDS = frozenset(
    "pretty kinda sorta quite very too btw even all sure though anyway honestly bit little somewhat "
    "literally seriously tbh whole much many lot lots gotta gonna wanna cuz".split()
)
IGNORABLE = OPINION_WORDS | DROPPED_WORDS | HEDGE_WORDS
_HEDGE = re.compile(
    r"(?i)\b(?:pretty(?=\s+\w+)|kind of|sort of|kinda|sorta|a bit|a little bit|quite|very|btw|honestly|tbh|"
    r"literally|seriously)\b\s*"
)
# Where a clause ends: a comma, semicolon, colon or dash, or before a word that opens an aside.
_CUT = re.compile(
    r"(\s*[,;:]\s+|\s+[-–—]+\s+|\s+(?=(?:which|but|because|since|cuz|though|although)\b)"
    r"|\s+(?=and (?:it|it's|that|that's|this|they|they're|there)\b))",
    re.IGNORECASE,
)
_OPENER = re.compile(r"(?i)^(?:which|but|because|since|cuz|though|although|and|so|plus)\b\s*")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
# An article a note leaves out ("went to a support group" → "went to support group"), as a caption's
# are: not inside a quoted title, not before a capitalised word ("the Louvre", "The Lord of the Rings"),
# not where it carries meaning ("a few", "a little", "a lot", "a while" differ from "few", "little"),
# and not in a resolved date ("the weekend before 13 September 2023").
_KEPT_AFTER = (
    r"(?=[a-z0-9])(?!(?:few|little|lot|lots|couple|bit|while|number|bunch|kind|sort|same|one|ones)\b)"
    r"(?!\w+ before\b)"  # the date resolver's "the week before 8 May 2023"
)
_ARTICLE = re.compile(r"\b(?:a|an|the)\s+" + _KEPT_AFTER)
_OPENING_ARTICLE = re.compile(r"^(?:The|A|An)\s+" + _KEPT_AFTER)
_QUOTED = re.compile(r"\"[^\"]*\"|《[^》]*》")
_DIGIT = re.compile(r"\d")


def states_something(clause: str, names: set[str], stop: frozenset[str]) -> bool:
    """A clause with a number, or a content word that is neither ignorable nor a speaker's name."""
    if _DIGIT.search(clause):
        return True
    return any(
        w not in stop and w not in IGNORABLE and w not in names and base(w) not in IGNORABLE and base(w) not in stop
        for w in _WORD.findall(clause.lower())
    )


_CONTRACTION = re.compile(r"'(?:s|re|m|ll|ve|d)$")


def base(word: str) -> str:
    """A word less its contraction ("it's" → "it", "they're" → "they", "Melanie's" → "melanie"): a
    contracted stop word says no more than the stop word."""
    return _CONTRACTION.sub("", word)


def lean(text: str) -> str:
    """A note's English wording without the articles that carry nothing (see `_ARTICLE`); quoted titles
    are left as they are."""
    out, at = [], 0
    for quoted in _QUOTED.finditer(text):
        out += [_ARTICLE.sub("", text[at : quoted.start()]), quoted.group(0)]
        at = quoted.end()
    out.append(_ARTICLE.sub("", text[at:]))
    return _OPENING_ARTICLE.sub("", "".join(out))


# A clause that opens with "it was", "it's been", "they're", "there's", "it made", "it looks"… says how
# something was ("it was fun and lively", "it's been a wild ride", "they're comfy"); with at most
# MAX_EVALUATION_FACTS words that are neither stop words nor ignorable, and no name, number or title,
# it evaluates what the sentence said before it, and a note leaves it to the sleeping turn.
_EVALUATION = re.compile(
    r"(?i)^(?:and |but |which |so )?(?:it|that|this|they|there)(?:'s|'re|'ll be| is| was| are| were| has been|"
    r"'s been| have been| looks?| looked| seems?| seemed| sounds?| sounded| feels?| felt| makes?| made)\b"
)
_NAMED = re.compile(r"\d|\"|《|\b[A-Z][a-z]+|\b[A-Z]{2,}\b")
MAX_EVALUATION_FACTS = 2
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def evaluates(clause: str, stop: frozenset[str]) -> bool:
    """The clause only says how something was (see `_EVALUATION`)."""
    if not _EVALUATION.match(clause) or _NAMED.search(clause[1:]):
        return False
    facts = [w for w in _WORD.findall(clause.lower()) if not ({w, base(w)} & (stop | IGNORABLE))]
    return len(facts) <= MAX_EVALUATION_FACTS


def without_evaluations(text: str, stop: frozenset[str]) -> str:
    """`text` less its evaluating clauses (what a note leaves out, for the coverage check)."""
    kept = []
    for sentence in _SENTENCE_END.split(text):
        parts = _CUT.split(sentence)
        kept += [clause for clause in parts[0::2] if not evaluates(clause, stop)]
    return " ".join(kept)


def compact(text: str, names: set[str], stop: frozenset[str]) -> str:
    """`text` less its clauses that state nothing or only evaluate, and its hedges; empty when no clause
    states anything."""
    parts = _CUT.split(text)
    clauses, cuts = parts[0::2], ["", *parts[1::2]]
    kept = [
        (cut, clause)
        for cut, clause in zip(cuts, clauses)
        if states_something(clause, names, stop) and not evaluates(clause, stop)
    ]
    if not kept:
        return ""
    out = _OPENER.sub("", kept[0][1]) + "".join(cut + clause for cut, clause in kept[1:])
    out = _HEDGE.sub("", out)
    return re.sub(r"\s{2,}", " ", out).strip(" ,;:-")
