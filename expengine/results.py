"""The base of the typed results Engine methods return, and the one JSON serialiser `--json` prints with."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any


class Result:
    """Mixed into result dataclasses, so each is JSON-ready the same way."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


def _json_value(value: Any) -> Any:
    """One date format everywhere: ISO-8601 with a `T` (naive values are UTC). Numpy values become numbers."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if hasattr(value, "tolist"):  # numpy scalars and arrays, without importing numpy
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    return str(value)


def to_json(payload: Any) -> str:
    """The JSON text of a result: one line, UTF-8 kept readable."""
    return json.dumps(payload, default=_json_value, ensure_ascii=False)
