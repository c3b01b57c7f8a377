"""Grounding and vagueness checks: a unit may only name what its sources name, and must say something.

Checked claims: identifiers (snake_case, calls `name(`), numbers and codes, capitalised names and
quoted strings must all occur in the source records; a rule needs a concrete condition and action
(each naming a mined tool, argument, value, error word or correction word), a fact a statement
about its subject with content words from the sources.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from .mine import Mined

_WORD = re.compile(r"[\w][\w.\-/]*[\w]|\w")
_IDENTIFIER = re.compile(r"\b[A-Za-z]\w*_\w+\b|\b[A-Za-z]\w*(?=\()")
_NUMBER_OR_CODE = re.compile(r"\b\w*\d[\w.:\-/]*")
_CAPITALISED = re.compile(r"\b[A-Z][a-zA-Z]+\b")
_QUOTED = re.compile(r"(?<!\w)'([^']{3,}?)'(?!\w)|\"([^\"]{3,}?)\"|“([^”]{3,}?)”")
_EVIDENCE_COUNT = re.compile(r"^\d+(?:/\d+|x)$")  # '6/7 recovered', '3x': counted by mining, not claims
STOPWORDS = frozenset(
    """a an the and or but if then when while to of in on at for from by with without into onto is are was were be been
    it its this that these those as after before first then call calls called use using do does did not no never always
    user users agent tool tools returns return returned error errors retry retries wait seconds expected pitfall
    should must can will may which what who whom how so than too very just also again once each any all some more less
    i you he she we they them their his her our your my me us one standing instruction follow correction corrected
    succeeds succeeded failed recovered noted retried whenever""".split()
)
VAGUE = (
    "when the rule applies",
    "be helpful",
    "be friendly",
    "be polite",
    "as needed",
    "if necessary",
    "if needed",
    "do the task",
    "follow the rules",
    "follow instructions",
    "help the user",
    "when appropriate",
    "the tool",
    "call the tool",
    "use the tool",
    "do something",
)
MIN_WORDS = 3


def source_text(mined: Mined, context: list[dict[str, Any]] | None = None) -> str:
    """Everything the sources say, lower-cased: the only vocabulary a unit may use for claims."""
    parts: list[str] = []
    for r in list(mined.records) + list(context or []):
        for key in ("text", "content", "tool_name", "tool_args", "tool_result", "tool_error"):
            if r.get(key):
                parts.append(" ".join(str(r[key]).split()))
    parts.extend(mined.summary_lines())
    return "\n".join(parts).lower()


def _anchors(mined: Mined) -> set[str]:
    """Concrete words a condition or action can stand on: tools, args, values, error and correction words."""
    words: set[str] = (
        set(mined.tools) | set(mined.arg_names) | {str(v).lower() for v in mined.recurring_values.values()}
    )
    for error in mined.errors:
        words |= {w for w in _WORD.findall(error.example.lower()) if len(w) >= 4 and w not in STOPWORDS}
    for _, text in mined.corrections:
        words |= {w for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in STOPWORDS}
    return {w.lower() for w in words}


@lru_cache(maxsize=4)
def _vocabulary_words(vocabulary: str) -> frozenset[str]:
    """The words of a cluster's vocabulary, split once for all the fields of its drafts (split again for
    each field, it took 70% of refinement's samples in a first cycle of 1M records, py-spy)."""
    return frozenset(_WORD.findall(vocabulary))


def ungrounded_claims(text: str, vocabulary: str) -> list[str]:
    """Identifiers, numbers, codes, names and quotes in `text` that the sources never mention."""
    words = _vocabulary_words(vocabulary)
    missing: list[str] = []
    for pattern in (_IDENTIFIER, _NUMBER_OR_CODE, _CAPITALISED):
        for token in pattern.findall(text):
            token = token.strip(".-/:")
            if (
                token
                and not _EVIDENCE_COUNT.match(token)
                and token.lower() not in words
                and token.lower() not in vocabulary
                and token.lower() not in STOPWORDS
            ):
                missing.append(token)
    for quotes in _QUOTED.findall(text):
        quote = " ".join(next(q for q in quotes if q).split()).lower()
        if quote.rstrip(".…") not in vocabulary:
            missing.append(f"'{quote[:40]}'")
    return list(dict.fromkeys(missing))


def _is_vague(text: str | None) -> bool:
    value = (text or "").strip().lower()
    too_short = len(value.split()) < MIN_WORDS and not _IDENTIFIER.search(value)
    return too_short or any(phrase == value or value.startswith(phrase) for phrase in VAGUE)


def _anchored(text: str, anchors: set[str]) -> bool:
    lowered = text.lower()
    return bool(anchors & {w for w in _WORD.findall(lowered)}) or any(a in lowered for a in anchors if "_" in a)


def _echoes(mined: Mined) -> set[str]:
    """What a field may not consist of alone: the rule's tool (whole and by its parts: get_weather, get,
    weather) and its argument names, which the tool's schema already says."""
    tool = (mined.primary_tool or "").lower()
    return {tool, *re.split(r"[_\W]+", tool), *(a.lower() for a in mined.arg_names)} - {""}


_FILLER = frozenset({"fail", "fails", "success", "successful", "successfully", "works", "ok", "result", "run", "runs"})


def _content(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and w not in _FILLER}


def restating_fields(fields: dict[str, Any], mined: Mined, *, names: tuple[str, ...]) -> list[str]:
    """The fields of `names` that only repeat the tool, its argument names or another field ("Pitfall:
    get_weather."; "call Read(file_path=…, limit=…)"): a rule made of them says nothing."""
    echoes = _echoes(mined)
    texts = {
        k: v for k in ("condition", "action", "expected_outcome", "pitfall") if isinstance(v := fields.get(k), str)
    }
    out = []
    for name in names:
        value = texts.get(name)
        if not value:
            continue
        others = {w for k, v in texts.items() if k != name and v.strip() != value.strip() for w in _content(v)}
        repeated = any(k != name and v.strip().lower() == value.strip().lower() for k, v in texts.items())
        if repeated or _content(value) <= echoes | (others if name == "pitfall" else set()):
            out.append(name)
    return out


def check_rule(
    fields: dict[str, Any], mined: Mined, vocabulary: str, *, templated_condition: bool = False
) -> list[str]:
    """Reasons to reject a rule's fields; empty when it is grounded and concrete (the action must stand on
    a mined tool, argument, value, error or correction word; the condition must not be vague; no field
    may only repeat the tool or another field). `templated_condition`: the templates' conditions are
    fixed forms naming the tool by construction ("To get weather (get_weather)"): the action and the
    pitfall must then say what the tool's schema does not."""
    reasons: list[str] = []
    anchors = _anchors(mined)
    for name in ("condition", "action"):
        value = fields.get(name)
        if not isinstance(value, str) or _is_vague(value):
            reasons.append(f"vague {name}: {value!r}")
    if not reasons:
        checked = ("action", "pitfall") if templated_condition else ("condition", "action", "pitfall")
        for name in restating_fields(fields, mined, names=checked):
            reasons.append(f"vague {name}: only repeats the tool or another field: {fields[name]!r}")
    action = fields.get("action")
    if not reasons and not _anchored(str(action), anchors):
        reasons.append(f"action names no mined tool, argument, value, error or correction: {action!r}")
    for name in ("condition", "action", "expected_outcome", "pitfall"):
        value = fields.get(name)
        if value is not None and not isinstance(value, str):
            reasons.append(f"{name} is not text")
        elif value:
            missing = ungrounded_claims(value, vocabulary)
            if missing:
                reasons.append(f"{name} names what the sources do not: {', '.join(missing[:5])}")
    return reasons


def check_fact(fields: dict[str, Any], subject: str, vocabulary: str) -> list[str]:
    """Reasons to reject a fact statement; empty when it is grounded and concrete."""
    statement = fields.get("statement")
    if not isinstance(statement, str) or _is_vague(statement):
        return [f"vague statement: {statement!r}"]
    reasons: list[str] = []
    lowered = statement.lower()
    if subject.lower() not in lowered and not (subject == "the user" and re.search(r"\buser\b", lowered)):
        reasons.append(f"statement does not name its subject {subject!r}")
    content = {w for w in _WORD.findall(lowered) if len(w) >= 4 and w not in STOPWORDS}
    if len({w for w in content if w in vocabulary}) < 1 or len(content) < 1:
        reasons.append("statement shares no content word with its sources")
    missing = ungrounded_claims(statement, vocabulary)
    if missing:
        reasons.append(f"statement names what the sources do not: {', '.join(missing[:5])}")
    return reasons


_DIGEST_SEPARATOR = re.compile(r"\s*(?:\[\d{4}-\d{2}-\d{2}\]|\|)\s*")


def check_digest(statement: str, records: list[dict[str, Any]]) -> list[str]:
    """Reasons to reject a digest: each quoted piece must be a verbatim prefix of a source's content and
    each date one of the sources' dates."""
    contents = [" ".join((r.get("content") or "").split()) for r in records]
    days = {f"[{r['ts']:%Y-%m-%d}]" for r in records}
    reasons = [
        f"digest date {d} is no source's date" for d in re.findall(r"\[\d{4}-\d{2}-\d{2}\]", statement) if d not in days
    ]
    for piece in filter(None, _DIGEST_SEPARATOR.split(statement)):
        quote = piece.removesuffix("…")
        if not any(c.startswith(quote) for c in contents):
            reasons.append(f"digest quotes what no source says: {piece[:60]!r}")
    return reasons
