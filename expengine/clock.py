"""The one clock: naive UTC datetimes, as DuckDB stores them. A leaf, so every floor reads the same time."""

from __future__ import annotations

import datetime as dt


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
