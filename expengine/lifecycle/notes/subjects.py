"""Who a turn's pronouns name: first person → the speaker, second person → the addressee.

A LoCoMo-style turn carries its speaker ("Caroline: I went …"); a session with exactly two speakers
gives each turn an addressee, the other one. A turn without a speaker label is named by its role
(`user` → "the user" / 用户, `assistant` → "the assistant" / 助手), and its addressee is the other role.
Where there is no addressee, a sentence that says "you" cannot be made self-contained (`Person.you`
is None and the caller keeps the turn).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ROLE_NAMES = {"en": {"user": "the user", "assistant": "the assistant"}, "zh": {"user": "用户", "assistant": "助手"}}
# Words that follow a subject without taking a third-person -s: modals, past forms, adverbs.
_UNCHANGED = frozenset(
    """
    can could will would should might must may shall did had was wasn't didn't couldn't can't cannot won't
    wouldn't shouldn't hadn't mustn't went got felt took made saw came found thought bought brought told said
    gave met left ran began knew read wrote heard kept lost won spent sent built taught caught sold held sat
    stood understood fell drew grew threw flew drove rode ate drank swam sang wore chose forgot broke spoke
    woke hung led paid put set let cut hit hurt quit shut became meant dreamt learnt slept swept
    also just really still never always usually often sometimes actually totally definitely finally recently
    even only mostly already once ever both all
    """.split()
)
_IRREGULAR = {
    "am": "is",
    "are": "is",
    "have": "has",
    "do": "does",
    "don't": "doesn't",
    "haven't": "hasn't",
    "go": "goes",
}
_CLAUSE_START = (
    r"(?:^|(?<=[,;:]\s)|(?<=\band\s)|(?<=\bbut\s)|(?<=\bso\s)|(?<=\bif\s)|(?<=\bwhen\s)|(?<=\bbecause\s)|(?<=\bthat\s))"
)


@dataclass(frozen=True)
class Person:
    me: str  # the speaker's name
    you: str | None  # the addressee's name, when the conversation has two speakers


def third_person(verb: str) -> str:
    """love → loves, go → goes, try → tries; modals, past forms and adverbs stay."""
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low in _UNCHANGED or low.endswith(("ed", "ly", "n't")) or not low.isalpha():
        return verb
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _subject(pattern: str, name: str) -> tuple[re.Pattern, object]:
    def replace(match: re.Match) -> str:
        return f"{name} {third_person(match.group('verb'))}" if match.group("verb") else name

    return re.compile(pattern + r"(?:\s+(?P<verb>[a-z']+))?"), replace


def english(text: str, person: Person) -> str | None:
    """First and second person replaced by names ("I love my dog" → "Caroline loves Caroline's dog");
    None when the text says "you" and there is no addressee."""
    me, you = person.me, person.you
    rules: list[tuple[re.Pattern, object]] = [
        (re.compile(r"\bI'm\b|\bI am\b"), f"{me} is"),
        (re.compile(r"\bI've\b"), f"{me} has"),
        (re.compile(r"\bI'd\b"), f"{me} would"),
        (re.compile(r"\bI'll\b"), f"{me} will"),
        _subject(r"\bI\b", me),
        (re.compile(r"(?i)\bmy\b|\bmine\b"), f"{me}'s"),
        (re.compile(r"(?i)\bmyself\b"), _SELF_ME),
        (re.compile(r"(?i)\bme\b"), _OBJECT_ME),
        (re.compile(r"(?i)\bwe're\b|\bwe are\b"), f"{me} and others are"),
        (re.compile(r"(?i)\bwe've\b"), f"{me} and others have"),
        (re.compile(r"(?i)\bwe\b|\bourselves\b|\bus\b(?-i:(?<=us))"), f"{me} and others"),
        (re.compile(r"(?i)\bours?\b"), f"{me}'s"),
    ]
    if re.search(r"(?i)\byou(?:r|rs|rself|'re|'ve|'d|'ll)?\b", text):
        if you is None:
            return None
        rules += [
            (re.compile(r"(?i)\byou're\b|\byou are\b"), f"{you} is"),
            (re.compile(r"(?i)\byou've\b|\byou have\b"), f"{you} has"),
            (re.compile(r"(?i)\byou'd\b"), f"{you} would"),
            (re.compile(r"(?i)\byou'll\b"), f"{you} will"),
            (re.compile(r"(?i)\byou were\b"), f"{you} was"),
            (re.compile(r"(?i)\byours\b|\byour\b"), f"{you}'s"),
            (re.compile(r"(?i)\byourself\b"), _SELF_YOU),
            _subject(_CLAUSE_START + r"(?i:\byou\b)", you),
            (re.compile(r"(?i)\byou\b"), _OBJECT_YOU),
        ]
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)  # type: ignore[call-overload]
    text = _objects(text, {_OBJECT_ME: me, _SELF_ME: me, _OBJECT_YOU: you or "", _SELF_YOU: you or ""})
    return their(text, [n for n in (me, you) if n])


# Placeholders for object pronouns, named once all subjects are: the first mention of a person is their
# name, a later one "them" ("Caroline is stoked for Melanie that art helps them express themself").
_OBJECT_ME, _SELF_ME, _OBJECT_YOU, _SELF_YOU = "\x00me\x00", "\x00myself\x00", "\x00you\x00", "\x00yourself\x00"


def _objects(text: str, names: dict[str, str]) -> str:
    for marker, name in names.items():
        while marker in text:
            at = text.index(marker)
            later = "themself" if "self" in marker else "them"
            text = text[:at] + (later if name in text[:at] else name) + text[at + len(marker) :]
    return text


def their(text: str, names: list[str]) -> str:
    """After a name's first mention, its possessive is "their": "Caroline will do their best"."""
    for name in names:
        first = text.find(name)
        if first < 0:
            continue
        head, tail = text[: first + len(name)], text[first + len(name) :]
        text = head + re.sub(rf"\b{re.escape(name)}'s\b", "their", tail)
    return text


def chinese(text: str, person: Person) -> str | None:
    """我 → the speaker, 你/您 → the addressee (我们 → "<speaker>和大家"); None when 你 has no addressee."""
    me, you = person.me, person.you
    text = re.sub(r"我们", f"{me}和大家", text)
    text = text.replace("我", me)
    if re.search(r"[你您]", text):
        if you is None:
            return None
        text = re.sub(r"你们", f"{you}等人", text)
        text = re.sub(r"[你您]", you, text)
    return text
