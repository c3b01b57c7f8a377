"""Facts in one user record: who speaks, and the patterned statements about them (home, name, job,
allergies, likes and dislikes, family), in English and in Chinese, each with its time."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from ...textutil import CJK

SPEAKER_PREFIX = re.compile(r"^([A-Z][\w.'-]*(?: [A-Z][\w.'-]*)?): (.+)$", re.S)
_END = r"(?=[,.;!?]|\s+(?:and|but|so|now|by|since|because|for|with|last|next)\b|$)"
# single-valued attributes: a newer value supersedes the older one
SINGLE_VALUED = (
    (
        "home",
        re.compile(
            rf"(?i)\bI(?:'ve| have)? (?:just |now |recently )?(?:live|am living|'m living|moved|am moving|'m moving|relocated) (?:in|to) (.+?){_END}"
        ),
    ),
    ("name", re.compile(rf"(?i)\bmy name is (.+?){_END}")),
    ("job", re.compile(rf"(?i)\bI (?:work|am working|'m working) (?:as|at|for) (.+?){_END}")),
)
# multi-valued attributes: the value is part of the attribute, so they never supersede each other
MULTI_VALUED = (
    ("is allergic to", re.compile(rf"(?i)\bI(?:'m| am) allergic to (.+?){_END}")),
    (
        "dislikes",
        re.compile(rf"(?i)\bI (?:really |just )?(?:hate|can'?t stand|don'?t like|do not like|dislike) (.+?){_END}"),
    ),
    ("prefers", re.compile(rf"(?i)\bI (?:really |much )?(?:prefer|love|like|enjoy) (.+?){_END}")),
    (
        "has",
        re.compile(
            r"(?i)\bmy ((?:sister|brother|partner|wife|husband|son|daughter|mom|dad|dog|cat|corgi|friend) (?-i:[A-Z])\w+)"
        ),
    ),
)
# Chinese statements, worded in Chinese: (attribute, pattern, statement template, single-valued)
_ZH_END = r"(?=[，。！？；,.!?;]|$)"
ZH_FACTS = (
    ("home", re.compile(rf"我(?:现在|目前)?(?:住在|搬到了|搬到)(.+?){_ZH_END}"), "{s}住在{v}", True),
    ("name", re.compile(rf"我(?:叫|的名字是)(.+?){_ZH_END}"), "{s}叫{v}", True),
    ("job", re.compile(rf"我(?:现在)?在(.+?)(?:工作|上班){_ZH_END}"), "{s}在{v}工作", True),
    ("is allergic to", re.compile(rf"我对(.+?)过敏{_ZH_END}"), "{s}对{v}过敏", False),
    ("dislikes", re.compile(rf"我(?:很|非常|真的)?(?:不喜欢|讨厌|受不了)(.+?){_ZH_END}"), "{s}不喜欢{v}", False),
    ("prefers", re.compile(rf"我(?:很|非常|特别|真的|最)?(?:喜欢|爱|偏爱)(.+?){_ZH_END}"), "{s}喜欢{v}", False),
)
_NOT_A_VALUE = re.compile(r"(?i)^(it|that|this|them|those|these|him|her|so|when|how|what|you|to|the)$")
# A liked or disliked thing is a short noun phrase: "live music", "writing". Clauses ("how it shows the
# togetherness", "seeing them soak", "every day") and phrases about the speaker ("talking about my
# sneakers") made LoCoMo facts that read as nonsense, so they are no value.
_CLAUSE_START = re.compile(
    r"(?i)^(how|that|what|when|where|why|which|who|the way|every|each|all|seeing|being|having|if)\b"
)
_PERSON = re.compile(r"(?i)\b(i|me|my|mine|you|your|yours|we|us|our|ours|them|they|their|he|him|his|she|her|it|its)\b")
MAX_THING_WORDS = 5
_FILLER = re.compile(r"(?i)(\s+(lol|haha|though|too|so much|anymore|really|at all))+$")


@dataclass
class FactStatement:
    subject: str
    attribute: str
    value: str
    statement: str
    ts: dt.datetime
    source_id: str
    single_valued: bool


def speaker_and_text(record: dict[str, Any]) -> tuple[str, str]:
    """Who said it and what: 'Speaker: text' content names the speaker; a native user is 'the user'."""
    content = (record.get("content") or "").strip()
    match = SPEAKER_PREFIX.match(content)
    if match:
        return match.group(1), match.group(2).strip()
    return ("the user" if record.get("role") in (None, "user") else record.get("role") or "the agent"), content


def clean_value(value: str) -> str | None:
    """'cilantro lol' → 'cilantro'; pronouns ('I hate it') are no value."""
    value = _FILLER.sub("", value.strip(" '\"")).strip()
    return None if not value or _NOT_A_VALUE.match(value) else value


def is_thing(value: str) -> bool:
    return len(value.split()) <= MAX_THING_WORDS and not _CLAUSE_START.match(value) and not _PERSON.search(value)


def extract_facts(record: dict[str, Any]) -> list[FactStatement]:
    """Facts a user message states: patterned ones (home, allergy, likes…), else the statement itself
    (kept verbatim and later quoted: rewriting someone's words deterministically goes wrong too often)."""
    if record.get("kind") not in ("message", "note") or record.get("role") not in (None, "user", "system"):
        return []
    subject, text = speaker_and_text(record)
    if CJK.search(text):
        return _chinese_facts(record, "用户" if subject == "the user" else subject, text)
    if not text or len(text.split()) < 3 or record.get("category") == "chatter":
        return []
    ts, rid = record["ts"], record["id"]
    found: list[FactStatement] = []
    for attribute, pattern in SINGLE_VALUED:
        for m in pattern.finditer(text):
            value = clean_value(m.group(1))
            if value is None:
                continue
            verb = {"home": "lives in", "name": "is named", "job": "works as/at"}[attribute]
            found.append(FactStatement(subject, attribute, value, f"{subject} {verb} {value}", ts, rid, True))
    for attribute, pattern in MULTI_VALUED:
        for m in pattern.finditer(text):
            value = clean_value(m.group(1))
            if value is None or not is_thing(value):
                continue
            found.append(
                FactStatement(
                    subject, f"{attribute} {value.lower()}", value, f"{subject} {attribute} {value}", ts, rid, False
                )
            )
    if found:
        return found
    if record.get("kind") == "note" or record.get("goal_id") or text.rstrip().endswith("?") or len(text.split()) < 4:
        return []  # notes, task requests and questions are not statements about someone
    return [FactStatement(subject, f"said on {ts:%Y-%m-%d}", text, text, ts, rid, False)]


def _chinese_facts(record: dict[str, Any], subject: str, text: str) -> list[FactStatement]:
    """Chinese has no spaces: length is counted in characters, and statements stay in Chinese."""
    if len(CJK.findall(text)) < 4 or record.get("category") == "chatter":
        return []
    ts, rid = record["ts"], record["id"]
    found = []
    for attribute, pattern, template, single in ZH_FACTS:
        for m in pattern.finditer(text):
            value = m.group(1).strip()
            if not value or len(value) > 30:
                continue
            key = attribute if single else f"{attribute} {value}"
            found.append(FactStatement(subject, key, value, template.format(s=subject, v=value), ts, rid, single))
    if found or record.get("kind") == "note" or record.get("goal_id") or text.rstrip().endswith(("?", "？")):
        return found
    return [FactStatement(subject, f"said on {ts:%Y-%m-%d}", text, text, ts, rid, False)]
