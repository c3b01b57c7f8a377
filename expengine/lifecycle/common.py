"""Small helpers shared by the compaction steps."""

from __future__ import annotations

from typing import Any, Callable, Iterable

EXAMPLES = 5
EXAMPLE_CHARS = 120


def sql_float(value: float) -> str:
    """A config number as a SQL literal (floats only, so nothing can be injected)."""
    return repr(float(value))


def short(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= EXAMPLE_CHARS else text[: EXAMPLE_CHARS - 1] + "…"


def examples(
    rows: Iterable[Any], to_dict: Callable[[Any], dict[str, Any]], *, limit: int = EXAMPLES
) -> list[dict[str, Any]]:
    """The first few rows of a plan, as dicts with their text shortened, so a dry run can show them."""
    out: list[dict[str, Any]] = []
    for row in rows:
        if len(out) >= limit:
            break
        item = to_dict(row)
        if "text" in item:
            item["text"] = short(item["text"])
        out.append(item)
    return out
