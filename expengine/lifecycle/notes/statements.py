"""A turn's informative statements, each rewritten as one self-contained note.

Per sentence of a turn (and the caption of an image it shared):
- questions, greetings, thanks and reactions ("Wow, that's awesome!", "That's really cool.") say
  nothing about anyone or anything: they are *chatter* and make no note;
- any other sentence is a statement: interjections and filler words are dropped ("Wow,", "so",
  "really", "just"), first and second person become names (`subjects.py`), relative times become
  dates (`dates.py`), clauses that only evaluate and hedges are cut (`lean.py`). Content words
  (names, objects, places, numbers, titles) are never dropped;
- a sentence that starts with a pronoun ("It was so powerful.") continues the one before it and
  joins its note; opening the turn, it is noted under its speaker's name ("Caroline: It …"). A
  sentence saying "you" with no addressee is *unresolved*, and the turn stays active;
- a *remark* (`is_remark`: nothing of the speaker, no name, number, title or time) and the caption
  go with the turn's other statements, whose notes carry the turn; a turn of remarks only keeps them,
  unless it answers the other speaker's noted turn (`__init__.py`: then it joins that note).

A turn is covered when it has no unresolved sentence and its notes hold every content word of its
statements that a note may not drop; then it can sleep (see `__init__.py`).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from functools import lru_cache

from ...textutil import HAN
from ..chatter import CHATTER_WORDS, stop_words
from . import dates, subjects
from .lean import IGNORABLE, OPINION_WORDS, base, compact, lean, without_evaluations

_SPEAKER = re.compile(r"^\s*([^:：\n]{1,40})(?::\s+|：\s*)")
_CAPTION = re.compile(r"\s*\(shared image: (?P<caption>[^)]*)\)\s*$")
# Latin stops end a sentence only before a space (not "e.x", "3.5", "U.S.A"); CJK stops need none
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])\s*|\n+")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
# A sentence that opens like this and names nothing new reacts to the other speaker.
_REACTION = re.compile(
    r"(?i)^(?:that'?s|that is|that was|that sounds|sounds|it sounds|it'?s so|what an?|how|so glad|glad|"
    r"i'?m (?:so |really )?(?:glad|happy|sorry|proud)|you'?re|you are|you'?d|you'?ve got|you look|good (?:for you|luck|job)|"
    r"congrats|congratulations|keep (?:it )?up|i love (?:that|this|it)|love (?:that|this|it)|can'?t wait|"
    r"thanks|thank you|wow|woo+hoo+|yay|hooray|nice|great|awesome|cool|amazing|aw+|oh|yeah|yes|no way|totally|i agree|agreed|"
    r"me too|same here|take care|see you|bye|hope|i hope|i bet|i'?m sure|i can (?:tell|see|imagine)|let'?s|"
    r"(?:so )?excited|no doubts?|long time|lots? (?:has|is) been|can'?t agree|keep going|no prob(?:lem)?|"
    r"hang in there|catch(?:ing)? up|yum+|phew|oof|mm+)\b"
)
MAX_REACTION_WORDS = 3
_YOU = re.compile(r"(?i)\byou(?:r|rs|rself|'re|'ve|'d|'ll)?\b")
_ME = re.compile(r"\bI\b|(?i:\b(?:my|me|mine|myself|we|our|us)\b)|\bI'")
_PROPER = re.compile(r"(?<![.!?]\s)\b[A-Z][a-z]+\b")
_LEADING = re.compile(
    r"(?i)^(?:(?:wow|oh|ah|aw+|hey|hi|hello|yeah|yes|yep|haha+|lol|omg|well|um|hmm|okay|ok|gosh|man|dude|"
    r"honestly|anyway|btw|by the way|you know|i mean|so(?! far)|and|but|plus|also|totally|definitely)\b[\s,!.…-]*)+"
)
_FILLER = re.compile(
    r"\b(?:really|so(?!\s+(?:far|good|much|many|that|long)\b)|just|totally|super|actually|literally|definitely|"
    r"kinda|sorta|basically)\s+"
)
_PRONOUN_START = re.compile(
    r"(?i)^(?:it|it's|its|this|that|these|those|he|she|they|they're|he's|she's|there|here|here's)\b"
)
_ZH_QUESTION = re.compile(r"[?？]$|[吗呢吧]$")
_ZH_LEADING = re.compile(
    r"^(?:(?:你好|您好|嗨|哈喽|早上好|晚上好)[啊呀]?(?:AI伴侣)?|哈哈+|嗯+|哦+|啊+|哇+|嘿|当然了|当然|好的|是的|没问题|其实|说实话|对了)[，,！!、\s]*"
)
_ZH_REACTION = re.compile(
    r"(?:很|非常|真)?(?:高兴|开心)(?:认识|见到)?[你您]?|(?:谢谢|感谢|多谢)[你您]?(?:的\S{0,6})?|不客气|没关系|真[棒好]|太[好棒]了|"
    r"好[呀啊的]?|是[啊呀的]|没错|当然|嗯+|哈+|哇+|加油|祝[你您]\S{0,8}|AI伴侣|(?:亲爱的)?小?助手|"
    r"(?:那|这)?(?:听起来|看起来|感觉)(?:很|真|非常)?(?:不错|棒|有趣|好|厉害)[啊呀]?|不用谢|不好意思|真的吗|听[你您]这么说"
)
_ZH_FILLER = re.compile(r"(?:真的|非常|特别|十分|挺|蛮|超级)")
_ZH_EMPTY = re.compile("(?:" + "|".join(sorted(CHATTER_WORDS["zh"], key=len, reverse=True)) + r"|[，,。！!？?、\s])+")


@dataclass
class Statement:
    text: str  # the note's wording
    sentence: str  # the sentence(s) it came from, as said
    day: dt.date  # the day the fact is about
    said_on: dt.date  # the day of the turn
    caption: bool = False  # the caption of an image the turn shared
    dated: bool = False  # a relative time in it became a date


@dataclass
class TurnNotes:
    speaker: str
    statements: list[Statement] = field(default_factory=list)
    chatter: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    remarks_only: bool = False  # every statement a remark (`is_remark`), no caption: a reaction to the turn before

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
            for w in content_words(without_evaluations(dates.resolve(_said(s.sentence), s.said_on).text, _stop()))
            # "it's", "lot's", "life's": a note may drop what the contraction adds to a stop or ignorable word
            if w not in IGNORABLE and w not in self.names and base(w) not in _stop() and base(w) not in IGNORABLE
        }
        return said <= noted


def _said(sentence: str) -> str:
    """A sentence less the openers and fillers a note drops on purpose."""
    return _tidy_chinese(sentence) if HAN.search(sentence) else _LEADING.sub("", sentence)


@lru_cache(maxsize=1)
def _stop() -> frozenset[str]:
    return stop_words()


# Chinese has no spaces: its content "words" are characters, less pronouns and particles.
_ZH_STOP = frozenset("我你您他她它们的了是在和也就都很吗呢吧啊呀哦嗯这那个着过把被")


def content_words(text: str) -> list[str]:
    """Lowercase words that are neither stop words nor chatter (Chinese: characters, less particles)."""
    stop = _stop()
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if HAN.search(word):
            out.extend(c for c in word if c not in _ZH_STOP and not _ZH_EMPTY.fullmatch(c))
        elif word not in stop:
            out.append(word)
    return out


_AGREEMENT = {"haven't": "hasn't", "don't": "doesn't", "aren't": "isn't", "weren't": "wasn't"}


def _stem(word: str) -> str:
    """loves → love, goes → go, tries → try: a note says "Caroline loves" where she said "I love"."""
    if word in _AGREEMENT:
        return _AGREEMENT[word]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes", "oes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") and len(word) > 3 and not word.endswith("ss") else word


def split_speaker(text: str) -> tuple[str | None, str]:
    """'Caroline: hi!' → ('Caroline', 'hi!'); '张曼婷：你好' → ('张曼婷', '你好')."""
    match = _SPEAKER.match(text)
    return (match.group(1).strip(), text[match.end() :]) if match else (None, text)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def is_chatter(sentence: str, names: set[str]) -> bool:
    """A question, a greeting or a reaction: nothing a later reader could use."""
    if HAN.search(sentence):
        return bool(_ZH_QUESTION.search(sentence) or _ZH_EMPTY.fullmatch(sentence) or not _tidy_chinese(sentence))
    if sentence.rstrip().endswith("?"):
        return True
    words = [w for w in content_words(sentence) if w not in names]
    if not words:
        return True
    if re.search(r"\d", sentence):
        return False
    # what follows an interjection decides: "Yeah, that pic was from a show I went to." is no reaction
    reacts = _REACTION.match(_unaddressed(sentence, names))
    if reacts and len(words) <= MAX_REACTION_WORDS:
        return True
    proper = {w.lower() for w in _PROPER.findall(sentence[1:])} - names
    if proper:
        return False
    # praise of the other speaker ("You're doing an awesome job looking after your family!") and feelings
    # with nothing to hold on to ("Taking care of ourselves is so important.") name no one and nothing
    return (bool(_YOU.search(sentence)) and not _ME.search(sentence)) or all(w in OPINION_WORDS for w in words)


# A caption is a description, read as one: its articles carry nothing ("photo of dog on beach").
_ARTICLE = re.compile(r"(?i)\b(?:a|an|the)\s+")
_TITLE = re.compile(r"《[^》]+》|\"[^\"]{2,}\"|\d")


# A sentence that opens with a verb has its speaker for subject: "Got the tattoo a few years ago."
_IMPLICIT_ME = re.compile(
    r"(?i)^(?:just |also |finally |recently |still |really )?(?:[a-z]+ed|[a-z]+ing|got|been|gonna|had|have|went|made|"
    r"took|saw|found|bought|love|need|want|wanna|gotta|can't|won't|don't|didn't|can|will|would)\b"
)


def is_remark(sentence: str, dated: bool = False) -> bool:
    """A sentence that says nothing of its speaker (no I, my, we; no 我; not opening with a verb whose
    subject is the speaker) and names no one, no number, no title, no time: a comment ("The colors blend
    nicely."), general advice ("散步可以改善心血管健康"). In a turn that also states something of its
    speaker, the note of that statement carries the turn, remark and all."""
    if dated or _TITLE.search(sentence):
        return False
    if HAN.search(sentence):
        return "我" not in sentence
    opening = _LEADING.sub("", sentence)
    return not (_ME.search(sentence) or _PROPER.search(sentence[1:]) or _IMPLICIT_ME.match(opening))


def _names_something(sentence: str, names: set[str]) -> bool:
    """A title, a quoted name, a number, or a capitalised word that is no speaker's name."""
    if _TITLE.search(sentence):
        return True
    return not HAN.search(sentence) and bool({w.lower() for w in _PROPER.findall(sentence[1:])} - names - {"i"})


def _unaddressed(sentence: str, names: set[str]) -> str:
    """The sentence less its openers and a name said to the other speaker ("Hey Mel, long time no chat!"
    → "long time no chat!"): no part of the statement, and no sign of one."""
    text = _LEADING.sub("", sentence).strip()
    head = re.match(r"^([A-Z][a-z]+)[,!]\s+", text)
    return text[head.end() :] if head and head.group(1).lower() in names else text


def _tidy_english(sentence: str, names: set[str]) -> str:
    text = _FILLER.sub("", _unaddressed(sentence, names))
    text = re.sub(r"\s+([,.;!])", r"\1", re.sub(r"[!]+", ".", text))
    return re.sub(r"\s{2,}", " ", text).strip(" ,-")


def _tidy_chinese(sentence: str) -> str:
    """Openers, fillers and clauses that only greet, thank or react ("很高兴认识你") dropped."""
    text = _ZH_FILLER.sub("", _ZH_LEADING.sub("", sentence))
    clauses = [c for c in re.split(r"[，,]", text) if c.strip() and not _ZH_REACTION.fullmatch(c.strip(" 。！!"))]
    return "，".join(clauses).strip("，, ")


def _finish(text: str, chinese: bool, person: subjects.Person) -> str:
    """The note's last touch: a sentence that names neither speaker, or opens with a pronoun, says who
    said it ("Caroline: the transgender stories were inspiring.", "Caroline: they've been there …")."""
    named = any(n and n in text for n in (person.me, person.you)) and not _PRONOUN_START.match(text)
    if chinese:
        text = text.rstrip("。！!；;") + "。"
        return text if named else f"{person.me}：{text}"
    text = lean(text.rstrip(" .;!…"))  # a note is one line: no articles that carry nothing, no full stop
    text = text[:1].upper() + text[1:]
    return text if named else f"{person.me}: {text}"


_CLAUSE = re.compile(r"[,，]\s*")


def _with_statement_clauses(parts: list[str]) -> list[str]:
    """A question that opens with a statement ("我很喜欢绘画、弹钢琴和品茶，你觉得有什么好的书可以推荐给我吗？")
    splits into the statement and the question, so the statement is not lost with the question."""
    out = []
    for sentence in parts:
        clauses = _CLAUSE.split(sentence)
        if sentence.rstrip().endswith(("?", "？", "吗")) and len(clauses) > 1:
            head = "，".join(clauses[:-1]) if HAN.search(sentence) else ", ".join(clauses[:-1])
            out += [head + ("。" if HAN.search(sentence) else "."), clauses[-1]]
        else:
            out.append(sentence)
    return out


def _question_note(sentence: str, person: subjects.Person, day: dt.date, chinese: bool) -> Statement | None:
    """A question that names something, as a note of who asked it: "Melanie asked: Did Caroline go to the
    Paris exhibit?"; None when it is no question or its "you" has no addressee."""
    if not sentence.rstrip().endswith(("?", "？", "吗", "呢")):
        return None
    tidy = _tidy_chinese(sentence) if chinese else _tidy_english(sentence, set())
    resolved = dates.resolve(tidy, day)
    named = (subjects.chinese if chinese else subjects.english)(resolved.text, person)
    if named is None:
        return None
    text = f"{person.me}问：{named}" if chinese else f"{person.me} asked: {named[:1].upper() + named[1:]}"
    return Statement(text, sentence, resolved.day or day, day)


MIN_SUBJECT_SENTENCE_WORDS = 3
# A verb's -s form opening a sentence, followed by what follows a verb: "tastes like soap", "smells so
# good", "looks great on me"
_S_VERB_OPENING = re.compile(
    r"(?i)^[a-z]+[^s\W]s\s+(?:like|so|really|too|great|good|bad|awful|amazing|terrible|nice|the|a|an|my|me|him|her|them|"
    r"it|us|to|at|in|on|with|for|from|more|less|just|even|better|worse)\b"
)


_PAST_OPENING = re.compile(
    r"(?i)^(?:just |also |finally |recently |still )?(?:[a-z]+ed|got|been|had|went|made|took|saw|found|bought)\b"
)


def _subjectless(sentence: str) -> bool:
    """A sentence with no subject of its own: it opens with a verb in the past or its -s form ("Made a
    bowl.", "tastes like soap"); not with a gerund, which is a subject ("Seeing the players was
    motivating"), nor with an imperative ("Don't give up", "Have a great time"), and asking nothing."""
    if sentence.rstrip().endswith("?"):
        return False  # "Does it remind you …?" asks
    opening = _LEADING.sub("", sentence)
    return bool(_PAST_OPENING.match(opening) or _S_VERB_OPENING.match(opening))


def _names_its_subject(said: list[tuple[bool, Statement]]) -> bool:
    """Is the turn's last statement so far a remark ("cilantro is the worst") that a sentence without a
    subject (`_subjectless`: "tastes like soap") goes on about? The two are one note then: a note of
    the second alone would say "the user: Tastes like soap", and the remark's could be left out as a
    remark beside a statement."""
    if not said or not said[-1][0] or said[-1][1].caption:
        return False
    return len(said[-1][1].sentence.split()) >= MIN_SUBJECT_SENTENCE_WORDS  # not "Ugh." or a cut "J.K."


def turn_notes(content: str, *, person: subjects.Person, day: dt.date, names: set[str]) -> TurnNotes:
    """The notes of one turn's text (`content` may start with "Speaker: "), said on `day`."""
    _, body = split_speaker(content)
    caption = _CAPTION.search(body)
    if caption:
        body = body[: caption.start()]
    result = TurnNotes(speaker=person.me, names=names)
    said: list[tuple[bool, Statement]] = []  # (a remark?, the statement), in the turn's order
    parts = _with_statement_clauses(sentences(body))
    for n, sentence in enumerate(parts):
        chinese = bool(HAN.search(sentence))
        if is_chatter(sentence, names):
            if not _names_something(sentence, names):
                result.chatter.append(sentence)
            elif (asked := _question_note(sentence, person, day, chinese)) is not None:
                said.append((False, asked))  # may be all the turn says of a title, a number, a name
            else:
                result.unresolved.append(sentence)
            continue
        tidy = _tidy_chinese(sentence) if chinese else _tidy_english(sentence, names)
        resolved = dates.resolve(tidy, day)
        named = (subjects.chinese if chinese else subjects.english)(resolved.text, person)
        if named is None:
            result.unresolved.append(sentence)
            continue
        named = named if chinese else compact(named, names, _stop())
        continues = not chinese and _PRONOUN_START.match(tidy)
        small = len([w for w in content_words(tidy) if w not in names]) <= MAX_REACTION_WORDS
        # "That new cafe is great. Has the best lattes.": a sentence going on about it follows
        followed = n + 1 < len(parts) and _subjectless(parts[n + 1])
        if not named or (continues and not said and small and not followed and not _names_something(tidy, names)):
            result.chatter.append(sentence)  # "It was so much fun!" opening a turn reacts to the turn before
            continue
        if continues and said:
            remark, last = said[-1]
            # "It was …" continues in lower case; a clause cut off its opening may now start with a name
            named = named[:1].lower() + named[1:] if _PRONOUN_START.match(named) else named
            joined = last.text + "; " + named
            remark = remark and is_remark(sentence, resolved.text != tidy)
            said[-1] = (remark, Statement(_finish(joined, False, person), f"{last.sentence} {sentence}", last.day, day))
            continue
        dated = resolved.text != tidy
        remark = is_remark(sentence, dated)
        if not chinese and _names_its_subject(said) and _subjectless(tidy):
            # "cilantro is the worst. tastes like soap": the remark names what the sentence is about
            _, last = said[-1]
            said_by = f"{person.me}: "  # `_finish` says it again, where the joined text names no one
            joined = f"{last.text.removeprefix(said_by)}; {named[:1].lower()}{named[1:]}"
            merged = Statement(
                _finish(joined, False, person),
                f"{last.sentence} {sentence}",
                last.day if last.dated else resolved.day or day,
                day,
                dated=last.dated or dated,
            )
            said[-1] = (remark, merged)
            continue
        note = Statement(_finish(named, chinese, person), sentence, resolved.day or day, day, dated=dated)
        said.append((remark, note))
    if caption and caption.group("caption").strip():
        shared = "分享了一张照片：" if HAN.search(caption.group("caption")) else "shared "
        wording = f"{person.me} {shared}{_ARTICLE.sub('', caption.group('caption')).strip()}"
        said.append((True, Statement(_finish(wording, False, person), caption.group(0), day, day, caption=True)))
    # remarks and the caption go with a statement of the speaker's, whose note then carries the turn
    facts = [statement for remark, statement in said if not remark]
    result.statements = facts or [statement for _, statement in said]
    result.remarks_only = bool(said) and not facts and not caption
    result.chatter += [statement.sentence for remark, statement in said if remark and facts]
    return result
