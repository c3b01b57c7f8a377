"""Rules that give the same fix for different situations share one prompt line: "When X, or Y: fix".

Refinement keeps such rules apart, as their conditions are what a query finds each by: another error
of the tool (same_fix.py merges errors only where they differ in ids or days), another intent's
requests (slots.py merges intents only over a value taken from the user). In one prompt they said one
fix two or three times: "When book_flight fails with 'payment declined: insufficient funds': rerun
book_flight" beside "…'payment declined: do not honor (code 05)': rerun book_flight", three "commit
and push" intents with one procedure. A rule whose action is the action of a rule kept above it but
for its values (`textutil.fix_without_values`) goes under that rule (`Hit.repeats`, kind "rule":
`--json` lists its id, `show` reaches it, the query log records it as shown), and the kept rule's
line names both conditions, with the counts of both:

    When book_flight fails with 'payment declined: insufficient funds', or 'payment declined: do not
    honor (code 05)': rerun book_flight. Pitfall: … (seen 7 times, 3/3 succeeded)

Its slot goes to the next hit. Only rules whose runs mostly succeeded, or mostly did not, fold
together: "When book_flight fails with 'card expired': call book_flight(…)" (0 of 3 succeeded) is not
said by "To book flight: call book_flight(…)" (16 of 17), nor are their counts added. What the folded rule's line said beyond its condition and its fix (its
expected outcome, its pitfall) is left to `show`. Lessons (rules with a subject) stay apart: each
contrasts its own intent's runs. A fold is made only among the top `k` and only while the line fits
MAX_LINE_CHARS (a longer one is clipped, and would lose its fix).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..textutil import CJK, fix_without_values
from .hits import Hit, Repeat
from .render import MAX_LINE_CHARS
from .score import unit_rows

if TYPE_CHECKING:
    from ..store.row_memo import Rows
    from ..store.store import Store

# the counts a rule's text ends with, in either language: "(seen 4 times, 2/2 succeeded)", "（出现 4 次，成功 2/2）"
_COUNTS = re.compile(
    r"(?P<open>[(（][^()（）\d]*)(?P<seen>\d+)(?P<between>[^()（）\d]*)"
    r"(?:(?P<successes>\d+)/(?P<trials>\d+)(?P<close>[^()（）\d]*))?(?P<end>[)）])$"
)
# a quote or a parenthesis: where two conditions share words up to one, the other's own words start
# at the word it is in ("'payment declined: a'" and "'payment declined: b'" are each said whole)
_OWN_WORDS = re.compile(r"['\"“`(（]")


@dataclass
class _Line:
    """A kept rule and what its line says: its conditions (its own first), its fix, its counts."""

    hit: Hit
    fix: str
    conditions: list[str]
    rest: str  # the line after its condition, the counts aside
    counts: re.Match[str]
    seen: int
    trials: tuple[int, int] | None

    def text(self) -> str:
        counts, seen = self.counts, str(self.seen)
        tail = counts["open"] + seen + counts["between"]
        if self.trials is not None and counts["trials"] is not None:
            tail += f"{self.trials[0]}/{self.trials[1]}" + counts["close"]
        return joined(self.conditions) + self.rest + tail + counts["end"]


def joined(conditions: list[str]) -> str:
    """One condition naming each of `conditions`: the first whole, each other from the word where it
    parts from the first (before a quote): "When T fails with 'a'" and "When T fails with 'b'" give
    "When T fails with 'a', or 'b'"; "To search (search)" and "Whenever it rains" give "To search
    (search), or whenever it rains"."""
    first, *others = conditions
    parts = [first]
    for other in others:
        shared = len(os.path.commonprefix([first, other]))
        if shared == len(first) == len(other):
            continue
        quote = _OWN_WORDS.search(other, 0, shared)
        start = other.rfind(" ", 0, (quote.start() if quote else shared) + 1) + 1
        own = other[start:]
        parts.append(own[:1].lower() + own[1:] if start == 0 and own[1:2].islower() else own)
    return ("，或" if CJK.search(first) else ", or ").join(parts)


def _mostly_succeeded(trials: tuple[int, int] | None) -> bool | None:
    return None if trials is None else 2 * trials[0] > trials[1]


class SameFix:
    """The rules kept for one prompt by their fix; `folds` puts a rule with a kept one's fix under it."""

    def __init__(self, store: "Store", ranked: list[Hit], units: "Rows | None"):
        ids = [h.id for h in ranked if h.type == "unit" and h.kind == "rule"]
        self.rows = {u.id: u for u in unit_rows(store, units, ids)}
        self.lines: dict[str, _Line] = {}  # by fix

    def folds(self, rule: Hit) -> bool:
        """Is `rule` said by the line of a rule kept above it? If not, it is kept (its fix noted)."""
        line = self._line(rule)
        if line is None:
            return False
        kept = self.lines.get(line.fix)
        if kept is None:
            self.lines[line.fix] = line
            return False
        if _mostly_succeeded(kept.trials) != _mostly_succeeded(line.trials):
            return False
        before = (kept.conditions, kept.seen, kept.trials)
        kept.conditions = [*kept.conditions, *line.conditions]
        kept.seen += line.seen
        if kept.trials is not None and line.trials is not None:
            kept.trials = (kept.trials[0] + line.trials[0], kept.trials[1] + line.trials[1])
        text = kept.text()
        if len(text) > MAX_LINE_CHARS:
            kept.conditions, kept.seen, kept.trials = before
            return False
        kept.hit.text = text
        kept.hit.repeats.append(Repeat.of(rule))
        return True

    def _line(self, rule: Hit) -> _Line | None:
        row = self.rows.get(rule.id)
        if row is None or row.subject or not row.condition or not row.action:
            return None
        if not rule.text.startswith(row.condition):
            return None
        counts = _COUNTS.search(rule.text)
        if counts is None:
            return None
        trials = None if counts["trials"] is None else (int(counts["successes"]), int(counts["trials"]))
        rest = rule.text[len(row.condition) : counts.start()]
        return _Line(rule, fix_without_values(row.action), [row.condition], rest, counts, int(counts["seen"]), trials)
