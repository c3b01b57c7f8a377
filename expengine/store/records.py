"""Reading raw records as dicts: the one column list refinement, tracing and intents read them by."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .db import in_ids

if TYPE_CHECKING:
    from .store import Store

RECORD_COLUMNS = (
    "id",
    "agent",
    "session",
    "goal_id",
    "ts",
    "kind",
    "role",
    "content",
    "text",
    "tool_name",
    "tool_args",
    "tool_result",
    "tool_error",
    "outcome",
    "feedback_signal",
    "feedback_target",
    "category",
    "pinned",
    "protected",
    "state",
    "importance",
    "meta",
    "user",
)


def select_records(store: "Store", where: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    """Every record matching `where` (SQL with `?` placeholders bound to `params`), oldest first."""
    rows = store.con.execute(
        f"SELECT {', '.join(RECORD_COLUMNS)} FROM records WHERE {where} ORDER BY ts, id", params or []
    ).fetchall()
    return [dict(zip(RECORD_COLUMNS, row)) for row in rows]


def fetch_records(store: "Store", ids: list[str]) -> list[dict[str, Any]]:
    """The records with these ids, whatever their state, oldest first."""
    if not ids:
        return []
    return select_records(store, *in_ids("id", list(dict.fromkeys(ids))))


def list_rejects(store: "Store", *, limit: int) -> list[dict[str, Any]]:
    """Quarantined input lines, newest first, with file, line, reason and raw text."""
    rows = store.con.execute(
        "SELECT file, line, error, raw, rejected_at FROM rejects ORDER BY rejected_at DESC, file, line LIMIT ?",
        [limit],
    ).fetchall()
    return [dict(zip(("file", "line", "error", "raw", "rejected_at"), r)) for r in rows]
