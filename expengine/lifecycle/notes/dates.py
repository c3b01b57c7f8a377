"""Relative times resolved against the record's time, so a note says the date it is about.

"yesterday" in a turn of 8 May 2023 → "on 7 May 2023"; "last week" → "the week before 8 May 2023";
"next month" → "in June 2023"; 昨天 → 2023年5月7日; 上周 → 2023年5月8日的前一周. The wording of the
week-relative phrases is LoCoMo's own ("the Sunday before 25 May 2023"), which a reader can use
without knowing when the turn was said.

A small table of patterns, not dateparser: dateparser turns "last week" into one day and has no
phrase for "the week before", and a note must never claim a day that the speaker did not say.
`resolve` returns the rewritten text and the day the fact is about when the phrase names one day
(yesterday, last Friday), else None (the caller keeps the record's day).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Callable

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a couple of": 2}
SEASONS = ("spring", "summer", "fall", "autumn", "winter")


def day_text(day: dt.date) -> str:
    """8 May 2023 (no leading zero: the way LoCoMo's answers and most people write it)."""
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def month_text(year: int, month: int) -> str:
    return f"{MONTHS[month - 1]} {year}"


def add_months(day: dt.date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


@dataclass(frozen=True)
class Resolved:
    text: str
    day: dt.date | None  # the one day the phrase names, if it names one


def _days(n: int) -> Callable[[re.Match, dt.date], Resolved]:
    def resolve(_: re.Match, base: dt.date) -> Resolved:
        day = base + dt.timedelta(days=n)
        return Resolved(f"on {day_text(day)}", day)

    return resolve


def _last_weekday(match: re.Match, base: dt.date) -> Resolved:
    name = match.group("weekday").lower()
    back = (base.weekday() - WEEKDAYS.index(name)) % 7 or 7
    return Resolved(f"the {name.capitalize()} before {day_text(base)}", base - dt.timedelta(days=back))


def _next_weekday(match: re.Match, base: dt.date) -> Resolved:
    name = match.group("weekday").lower()
    ahead = (WEEKDAYS.index(name) - base.weekday()) % 7 or 7
    return Resolved(f"the {name.capitalize()} after {day_text(base)}", base + dt.timedelta(days=ahead))


def _span(word: str, direction: str) -> Callable[[re.Match, dt.date], Resolved]:
    return lambda _, base: Resolved(f"the {word} {direction} {day_text(base)}", None)


def _this(word: str) -> Callable[[re.Match, dt.date], Resolved]:
    return lambda _, base: Resolved(f"the {word} of {day_text(base)}", None)


def _month(offset: int) -> Callable[[re.Match, dt.date], Resolved]:
    def resolve(_: re.Match, base: dt.date) -> Resolved:
        return Resolved(f"in {month_text(*add_months(base, offset))}", None)

    return resolve


def _year(offset: int) -> Callable[[re.Match, dt.date], Resolved]:
    return lambda _, base: Resolved(f"in {base.year + offset}", None)


def _season(offset: int) -> Callable[[re.Match, dt.date], Resolved]:
    return lambda m, base: Resolved(f"in {m.group('season').lower()} {base.year + offset}", None)


def _ago(match: re.Match, base: dt.date) -> Resolved:
    count, unit = match.group("count").lower(), match.group("unit").lower().rstrip("s")
    n = int(count) if count.isdigit() else NUMBER_WORDS.get(count)
    if n is None:  # "a few days ago": no exact day
        return Resolved(f"{count} {unit}s before {day_text(base)}", None)
    if unit == "day":
        day = base - dt.timedelta(days=n)
        return Resolved(f"on {day_text(day)}", day)
    if unit in ("week", "weekend"):
        return Resolved(f"{_count_words(n, unit)} before {day_text(base)}", None)
    if unit == "month":
        return Resolved(f"in {month_text(*add_months(base, -n))}", None)
    return Resolved(f"in {base.year - n}", None)


def _count_words(n: int, unit: str) -> str:
    return f"the {unit}" if n == 1 else f"{n} {unit}s"


_WEEKDAY = r"(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_COUNT = r"(?P<count>\d+|a couple of|a few|several|an?|one|two|three|four|five|six)"
_SEASON = r"(?P<season>spring|summer|fall|autumn|winter)"
# (pattern, resolver), longest phrases first; every pattern is matched case-insensitively on word bounds
ENGLISH: tuple[tuple[str, Callable[[re.Match, dt.date], Resolved]], ...] = (
    (r"the day before yesterday", _days(-2)),
    (r"the day after tomorrow", _days(2)),
    (r"yesterday|last night", _days(-1)),
    (r"today|tonight|this morning|this afternoon|this evening", _days(0)),
    (r"tomorrow", _days(1)),
    (rf"last {_WEEKDAY}", _last_weekday),
    (rf"(?:next|this coming) {_WEEKDAY}", _next_weekday),
    (r"last weekend", _span("weekend", "before")),
    (r"(?:next|this coming) weekend", _span("weekend", "after")),
    (r"this weekend", _this("weekend")),
    (r"last week", _span("week", "before")),
    (r"next week", _span("week", "after")),
    (r"this week", _this("week")),
    (r"last month", _month(-1)),
    (r"next month", _month(1)),
    (r"this month", _month(0)),
    (r"last year", _year(-1)),
    (r"next year", _year(1)),
    (r"this year", _year(0)),
    (rf"last {_SEASON}", _season(-1)),
    (rf"next {_SEASON}", _season(1)),
    (rf"{_COUNT} (?P<unit>days?|weeks?|weekends?|months?|years?) ago", _ago),
)
_ENGLISH = [(re.compile(rf"(?i)\b(?:{p})\b"), fn) for p, fn in ENGLISH]


def _zh_day(n: int) -> Callable[[re.Match, dt.date], Resolved]:
    def resolve(_: re.Match, base: dt.date) -> Resolved:
        day = base + dt.timedelta(days=n)
        return Resolved(zh_day_text(day), day)

    return resolve


def zh_day_text(day: dt.date) -> str:
    return f"{day.year}年{day.month}月{day.day}日"


def _zh_span(word: str) -> Callable[[re.Match, dt.date], Resolved]:
    return lambda _, base: Resolved(f"{zh_day_text(base)}的{word}", None)


def _zh_month(offset: int) -> Callable[[re.Match, dt.date], Resolved]:
    def resolve(_: re.Match, base: dt.date) -> Resolved:
        year, month = add_months(base, offset)
        return Resolved(f"{year}年{month}月", None)

    return resolve


def _zh_year(offset: int) -> Callable[[re.Match, dt.date], Resolved]:
    return lambda _, base: Resolved(f"{base.year + offset}年", None)


CHINESE: tuple[tuple[str, Callable[[re.Match, dt.date], Resolved]], ...] = (
    (r"大前天", _zh_day(-3)),
    (r"前天", _zh_day(-2)),
    (r"昨天|昨晚|昨日", _zh_day(-1)),
    (r"今天|今晚|今日|今早", _zh_day(0)),
    (r"明天|明晚|明日", _zh_day(1)),
    (r"后天", _zh_day(2)),
    (r"上周末|上个周末", _zh_span("前一个周末")),
    (r"上周|上个星期|上星期|上个礼拜", _zh_span("前一周")),
    (r"下周|下个星期|下星期|下个礼拜", _zh_span("后一周")),
    (r"上个月|上月", _zh_month(-1)),
    (r"下个月|下月", _zh_month(1)),
    (r"这个月|本月", _zh_month(0)),
    (r"前年", _zh_year(-2)),
    (r"去年", _zh_year(-1)),
    (r"明年", _zh_year(1)),
    (r"今年", _zh_year(0)),
)
_CHINESE = [(re.compile(p), fn) for p, fn in CHINESE]


def resolve(text: str, base: dt.date) -> Resolved:
    """`text` with every relative time phrase replaced by its resolution against `base`; the day of the
    first phrase that names one day."""
    found: list[dt.date | None] = []

    def substitute(fn: Callable[[re.Match, dt.date], Resolved]) -> Callable[[re.Match], str]:
        def replace(match: re.Match) -> str:
            resolved = fn(match, base)
            found.append(resolved.day)
            if match.string.startswith("'s", match.end()) and resolved.text.startswith("on "):
                return resolved.text[3:]  # "tomorrow's opening" → "20 June 2023's opening"
            return resolved.text

        return replace

    for pattern, fn in (*_ENGLISH, *_CHINESE):
        text = pattern.sub(substitute(fn), text)
    return Resolved(text, next((d for d in found if d is not None), None))
