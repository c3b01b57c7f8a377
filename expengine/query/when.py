"""The times a query names ("on 13 October 2023", "in July 2023", "2023-10-13"), so that what happened
then ranks above what happened on other days (`score.rank`'s `named_time` part).

A question about one day ("What painting did Melanie show on October 13, 2023?") shares few words
with the note of that day (its words are the painting's), and a vector says nothing of dates, so the
day's note ranked past the cut of a 500-word prompt. Only English month names and ISO dates are read,
each with its year: a month and day without a year ("on 3 June") names no year to match.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

MONTHS = {
    name: number
    for number, name in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ),
        start=1,
    )
}
_MONTH = "|".join(MONTHS)
_ORDINAL = r"(?:st|nd|rd|th)?"
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH})\s+(\d{{1,2}}){_ORDINAL},?\s+(\d{{4}})\b", re.IGNORECASE)
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?({_MONTH}),?\s+(\d{{4}})\b", re.IGNORECASE)
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH}),?\s+(\d{{4}})\b", re.IGNORECASE)

Period = tuple[dt.date, dt.date]  # first and last day, both included


def named_periods(text: str) -> list[Period]:
    """The days the query names, each as a one-day period; where it names none, the months it names."""
    days = [
        *(_day(int(y), MONTHS[m.lower()], int(d)) for m, d, y in _MONTH_DAY_YEAR.findall(text)),
        *(_day(int(y), MONTHS[m.lower()], int(d)) for d, m, y in _DAY_MONTH_YEAR.findall(text)),
        *(_day(int(y), int(m), int(d)) for y, m, d in _ISO_DAY.findall(text)),
    ]
    periods = [(d, d) for d in days if d is not None]
    if periods:
        return periods
    return [_month(int(y), MONTHS[m.lower()]) for m, y in _MONTH_YEAR.findall(text)]


def within(day: dt.date | None, periods: "Iterable[Period]") -> bool:
    return day is not None and any(first <= day <= last for first, last in periods)


def _day(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:  # "February 30, 2023" names no day
        return None


def _month(year: int, month: int) -> Period:
    after = dt.date(year + month // 12, month % 12 + 1, 1)
    return dt.date(year, month, 1), after - dt.timedelta(days=1)
