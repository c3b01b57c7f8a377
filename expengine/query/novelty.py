"""Say each thing once, inside lines too: a statement the prompt already holds is not shown again.

Notes about one subject restate each other ("Losing their job was tough but it gave them the push",
written on three days, each beside other news), and a turn shown as evidence repeats part of its note.
Whole-line repeats fold (`repeats.py`); what is left are lines that say one new thing beside one
already said. While the prompt is written, a line's statements (its sentences, and a note's clauses
joined by "; ") most of whose words are in the lines above (`OLD_SHARE` of its distinct lowercase
words, `MIN_OLD_WORDS` at least; a "Speaker: " label aside) are left out of it, with "…" where they
stood, and the tokens they took go to the next hit. A line that would keep fewer than
`MIN_KEPT_WORDS` words stays whole: remnants such as "Thanks, Mel! …" or a statement alone would
read like each other and like the line they repeat. The hit keeps its
whole text (`--json`, `show`): only its prompt line is shorter. The hit that a budget has room for
only part of shows its first statements, "…" after them (`leading`), where at least `MIN_KEPT_WORDS`
words fit: on LoCoMo's compacted stores the prompt ended ~25 tokens short of 500 words. Only notes and a conversation's
turns (and the evidence lines under notes) are shortened: rules and tool records keep their wording
(left out there, their remnants read like each other: prompt redundancy on the sample logs rose from
1.3% to 3.4%). `--set query.say_once=false` turns
this off.
"""

from __future__ import annotations

import re
from typing import Callable

ELLIPSIS = "…"
# a statement at least this share of whose distinct words the lines above hold is said (on the LoCoMo
# conversations developed on, at 500 words: 1.0 left out too little to matter, 0.6 lost answer words
# at 1,000)
OLD_SHARE = 0.8
MIN_OLD_WORDS = 2
MIN_KEPT_WORDS = 5
_LABEL = re.compile(r"^\s*([^:\n]{1,40}:\s)")
_STATEMENT_END = re.compile(r"((?<=[.!?])\s+(?=\S)|;\s+)")  # a note's statements are joined by "; "
_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def statements(text: str) -> tuple[str, list[str]]:
    """(the "Speaker: " label or "", the statements of the rest, each with the separator after it)."""
    match = _LABEL.match(text)
    label = match.group(1) if match else ""
    pieces = _STATEMENT_END.split(text[len(label) :].strip())  # statement, separator, statement, …
    parts = [p + (pieces[n + 1] if n + 1 < len(pieces) else "") for n, p in enumerate(pieces) if n % 2 == 0 and p]
    return label, parts


def untold(text: str, told: set[str]) -> str:
    """`text` without the statements whose words are all in `told` (see the module docstring)."""
    flat = " ".join(text.split())
    label, parts = statements(flat)
    if len(parts) < 2:
        return flat
    old = [len(w) >= MIN_OLD_WORDS and len(w & told) >= OLD_SHARE * len(w) for w in map(words, parts)]
    kept = [w for part, is_old in zip(parts, old) if not is_old for w in words(part)]
    if not any(old) or len(kept) < MIN_KEPT_WORDS:
        return flat  # a remnant ("Thanks! …") would be a line like every other remnant
    out: list[str] = []
    for part, is_old in zip(parts, old):
        if not is_old:
            out.append(part if part.endswith(" ") or part is parts[-1] else part + " ")
        elif not out or out[-1] != f"{ELLIPSIS} ":
            out.append(f"{ELLIPSIS} ")
    return (label + "".join(out)).strip()


def leading(text: str, fits: Callable[[str], bool]) -> str | None:
    """The longest run of `text`'s first statements that `fits`, "…" after it, or None when fewer than
    `MIN_KEPT_WORDS` words would show: the last hit a budget has room for only part of."""
    label, parts = statements(" ".join(text.split()))
    best = None
    for n in range(1, len(parts)):
        shown = (label + "".join(parts[:n])).rstrip()
        shown = f"{shown.rstrip(';')} {ELLIPSIS}"
        if not fits(shown):
            break
        best = shown
    return best if best is not None and len(_WORD.findall(best)) - len(_WORD.findall(label)) >= MIN_KEPT_WORDS else None
