"""The base of the typed results Engine methods return: `to_dict()` is what `--json` prints."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any


class Result:
    """Mixed into result dataclasses, so each is JSON-ready the same way."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]
