"""A turn's informative statements, each rewritten as one self-contained note.

Per sentence of a turn (and the caption of an image it shared):
- questions, greetings, thanks and reactions ("Wow, that's awesome!", "That's really cool.") say
  nothing about anyone or anything: they are *chatter* and make no note;
- any other sentence is a statement: interjections and filler words are dropped ("Wow,", "so",
  "really", "just"), first and second person become names (`subjects.py`), relative times become
  dates (`dates.py`). Content words (names, objects, places, numbers, titles) are never dropped;
- a sentence that starts with a pronoun ("It was so powerful.") continues the one before it and
  joins its note ("…; it was powerful."); as a turn's first statement it has no subject, and so
  does a sentence saying "you" with no addressee: these are *unresolved*, and the turn stays active.

A turn is covered when it has no unresolved sentence and its notes hold every content word of its
statements; then it can sleep (see `__init__.py`).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from functools import lru_cache

from ..chatter import CHATTER_WORDS, stop_words
from . import dates, subjects

_SPEAKER = re.compile(r"^\s*([^:\n]{1,40}):\s+")
_CAPTION = re.compile(r"\s*\(shared image: (?P<caption>[^)]*)\)\s*$")
_SENTENCE = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")
_CJK = re.compile(r"[\u3400-\u9fff]")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
# A sentence that opens like this and names nothing new reacts to the other speaker.
_REACTION = re.compile(
    r"(?i)^(?:that'?s|that is|that was|that sounds|sounds|it sounds|it'?s so|what an?|how|so glad|glad|"
    r"i'?m (?:so |really )?(?:glad|happy|sorry|proud)|you'?re|you are|you'?d|you'?ve got|you look|good (?:for you|luck|job)|"
    r"congrats|congratulations|keep (?:it )?up|i love (?:that|this|it)|love (?:that|this|it)|can'?t wait|"
    r"thanks|thank you|wow|nice|great|awesome|cool|amazing|aw+|oh|yeah|yes|no way|totally|i agree|agreed|"
    r"me too|same here|take care|see you|bye|hope|i hope|i bet|i'?m sure|i can (?:tell|see|imagine))\b"
)
MAX_REACTION_WORDS = 3
_YOU = re.compile(r"(?i)\byou(?:r|rs|rself|'re|'ve|'d|'ll)?\b")
_ME = re.compile(r"\bI\b|(?i:\b(?:my|me|mine|myself|we|our|us)\b)|\bI'")
_PROPER = re.compile(r"(?<![.!?]\s)\b[A-Z][a-z]+\b")
_LEADING = re.compile(
    r"(?i)^(?:(?:wow|oh|ah|aw+|hey|hi|hello|yeah|yes|yep|haha+|lol|omg|well|um|hmm|okay|ok|gosh|man|dude|"
    r"honestly|anyway|btw|by the way|you know|i mean|so|and|but|plus|also|totally|definitely)\b[\s,!.…-]*)+"
)
_FILLER = re.compile(r"\b(?:really|so|just|totally|super|actually|literally|definitely|kinda|sorta|basically)\s+")
_PRONOUN_START = re.compile(r"(?i)^(?:it|it's|its|this|that|these|those|he|she|they|they're|he's|she's|there)\b")
_ZH_QUESTION = re.compile(r"[?？]$|[吗呢吧]$")
_ZHMAX_REACTION_WORDS = 3
_YOU = re.compile(r"(?i)\byou(?:r|rs|rself|'re|'ve|'d|'ll)?\b")
_ME = re.compile(r"\bI\b|(?i:\b(?:my|me|mine|myself|we|our|us)\b)|\bI'")
_PROPER = re.compile(r"(?<![.!?]\s)\b[A-Z][a-z]+\b")
_LEADING = re.compile(r"^(?:哈哈+|嗯+|哦+|啊+|哇+|嘿|当然了|当然|好的|是的|没问题|其实|说实话|对了)[，,！!、\s]*")
_ZH_FILLER = re.compile(r"(?:真的|非常|特别|十分|挺|蛮|超级)")
_ZH_EMPTY = re.compile("(?:" + "|".join(sorted(CHATTER_WORDS["zh"], key=len, reverse=True)) + r"|[，,。！!？?、\s])+")


@dataclass
class Statement:
    text: str  # the note's wording
    sentence: str  # the sentence(s) it came from, as said
    day: dt.date  # the day the fact is about
    said_on: dt.date  # the day of the turn
    caption: bool = False  # the caption of an image the turn shared


@dataclass
class TurnNotes:
    speaker: str
    statements: list[Statement] = field(default_factory=list)
    chatter: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)

    @property
    def covered(self) -> bool:
        """Nothing informative is left only in the turn: every sentence is chatter or in a note."""
        if self.unresolved:
            return False
        noted = {_stem(w) for s in self.statements for w in content_words(s.text)}
        said = {
            _stem(w)
            for s in self.statements
            if not s.caption
            for w in content_words(dates.resolve(_LEADING.sub("", s.sentence), s.said_on).text)
            if w not in DROPPED_WORDS and w not in self.names
        }
        return said <= noted


# What a note may leave out of its sentence: person words (names stand in) and filler.
DROPPED_WORDS = frozenset(
    "i me my mine myself we us our ours ourselves you your yours yourself "
    "i'm i've i'll i'd we're we've we'll we'd you're you've you'll you'd "
    "really so just totally super actually literally definitely kinda sorta basically".split()
)


@lru_cache(maxsize=1)
def _stop() -> frozenset[str]:
    return stop_words()


def content_words(text: str) -> list[str]:
    """Lowercase words that are neither stop words nor chatter (Chinese: runs of Han characters)."""
    stop = _stop()
    return [w for w in _WORD.findall(text.lower()) if w not in stop and not _ZH_EMPTY.fullmatch(w)]


def _stem(word: str) -> str:
    """loves → love, goes → go, tries → try: a note says "Caroline loves" where she said "I love"."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("es") and len(word) > 3 and word[-3] in "sxzho":
        return word[:-2]
    return word[:-1] if word.endswith("s") and len(word) > 3 and not word.endswith("ss") else word


def split_speaker(text: str) -> tuple[str | None, str]:
    match = _SPEAKER.match(text)
    if match and not _CJK.search(match.group(1)[:1] or "") and " " not in match.group(1).strip()[20:]:
        return match.group(1).strip(), text[match.end() :]
    return None, text


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def is_chatter(sentence: str, names: set[str]) -> bool:
    """A question, a greeting or a reaction: nothing a later reader could use."""
    if _CJK.search(sentence):
        return bool(_ZH_QUESTION.search(sentence) or _ZH_EMPTY.fullmatch(sentence))
    if sentence.rstrip().endswith("?"):
        return True
    words = [w for w in content_words(sentence) if w not in names]
    if not words:
        return True
    if re.search(r"\d", sentence):
        return False
    if _REACTION.match(sentence) and len(words) <= MAX_REACTION_WORDS:
        return True
    # praise of the other speaker ("You're doing an awesome job looking after your family!") says how the
    # speaker feels about what the other one said, which the other one's own turn carries
    proper = {w.lower() for w in _PROPER.findall(sentence[1:])} - names
    return bool(_YOU.search(sentence)) and not _ME.search(sentence) and not proper


def _tidy_english(sentence: str, names: set[str]) -> str:
    text = _LEADING.sub("", sentence).strip()
    # a name said to the other speaker ("Caroline, I …") is no part of the statement
    head = re.match(r"^([A-Z][a-z]+)[,!]\s+", text)
    if head and head.group(1).lower() in names:
        text = text[head.end() :]
    text = _FILLER.sub("", text)
    text = re.sub(r"\s+([,.;!])", r"\1", re.sub(r"[!]+", ".", text))
    return re.sub(r"\s{2,}", " ", text).strip(" ,-")


def _tidy_chinese(sentence: str) -> str:
    text = _ZH_LEADING.sub("", sentence)
    return _ZH_FILLER.sub("", text).strip("，, ")


def _finish(text: str, chinese: bool) -> str:
    if chinese:
        return text.rstrip("。！!；;") + "。"
    text = text.rstrip(" .;!…")
    return text[:1].upper() + text[1:] + "."


def turn_notes(content: str, *, person: subjects.Person, day: dt.date, names: set[str]) -> TurnNotes:
    """The notes of one turn's text (`content` may start with "Speaker: "), said on `day`."""
    _, body = split_speaker(content)
    caption = _CAPTION.search(body)
    if caption:
        body = body[: caption.start()]
    result = TurnNotes(speaker=person.me, names=names)
    for sentence in sentences(body):
        chinese = bool(_CJK.search(sentence))
        if is_chatter(sentence, names):
            result.chatter.append(sentence)
            continue
        tidy = _tidy_chinese(sentence) if chinese else _tidy_english(sentence, names)
        resolved = dates.resolve(tidy, day)
        named = (subjects.chinese if chinese else subjects.english)(resolved.text, person)
        if named is None:
            result.unresolved.append(sentence)
            continue
        continues = not chinese and _PRONOUN_START.match(tidy)
        if continues and not result.statements:
            # "It was so much fun!" opening a turn reacts to what was said before it
            small = len([w for w in content_words(tidy) if w not in names]) <= MAX_REACTION_WORDS
            (result.chatter if small and not re.search(r"\d", tidy) else result.unresolved).append(sentence)
            continue
        if continues:
            last = result.statements[-1]
            joined = last.text.rstrip(".") + "; " + named[:1].lower() + named[1:]
            result.statements[-1] = Statement(_finish(joined, False), f"{last.sentence} {sentence}", last.day, day)
            continue
        result.statements.append(Statement(_finish(named, chinese), sentence, resolved.day or day, day))
    if caption and caption.group("caption").strip():
        shared = "分享了一张照片：" if _CJK.search(caption.group("caption")) else "shared "
        result.statements.append(
            Statement(_finish(f"{person.me} {shared}{caption.group('caption').strip()}", False), caption.group(0), day, day, caption=True)
        )
    return result
