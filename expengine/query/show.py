"""`show ID`: everything about one record or unit, so a user can see why it was kept or forgotten."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clock import utcnow
from ..errors import NotFoundError
from ..store.db import in_ids, json_ids
from .score import memory_source_ids, newest_source_ts, recency, score_parts

if TYPE_CHECKING:
    from ..store.store import Store


@dataclass
class ShowResult:
    id: str
    type: str  # "memory" | "unit"
    item: dict[str, Any]
    scores: dict[str, float]
    source_ids: list[str]
    merged_into: str | None = None
    cited_by: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            if isinstance(value, dt.datetime):
                return value.isoformat()
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, list):
                return [plain(v) for v in value]
            return value

        return plain(self.__dict__)


def _row(store: "Store", table: str, item_id: str) -> dict[str, Any] | None:
    cursor = store.con.execute(f"SELECT * FROM {table} WHERE id = ?", [item_id])
    names = [d[0] for d in cursor.description]
    rows = cursor.fetchall()
    return dict(zip(names, rows[0])) if rows else None


def _scores(store: "Store", row: dict[str, Any], *moments: dt.datetime | None) -> dict[str, float]:
    """The query score parts this item would get now, without the query-dependent similarity."""
    rec = recency(store.config.query.recency_base, utcnow(), *moments)
    _, parts = score_parts(store, similarity=0.0, weight=row["weight"], utility=row["utility"], recency_value=rec)
    return {
        "weight": row["weight"],
        "utility": row["utility"],
        "weight_part": round(parts.weight, 6),
        "recency": round(parts.recency, 6),
        "utility_part": round(parts.utility, 6),
    }


def _citing_units(store: "Store", record_id: str) -> list[dict[str, Any]]:
    pattern = "%" + record_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = store.con.execute(
        "SELECT id, kind, status, source_ids, text FROM units WHERE source_ids LIKE ? ESCAPE '\\' ORDER BY id",
        [pattern],
    ).fetchall()
    return [{"id": i, "kind": k, "status": s, "text": t} for i, k, s, src, t in rows if record_id in json_ids(src)]


def show(store: "Store", item_id: str) -> ShowResult:
    history = [
        dict(zip(("happened_at", "action", "detail", "run_id"), r))
        for r in store.con.execute(
            "SELECT happened_at, action, detail, run_id FROM history WHERE item_id = ? ORDER BY happened_at, action",
            [item_id],
        ).fetchall()
    ]
    record = _row(store, "records", item_id)
    if record is not None:
        return ShowResult(
            id=item_id,
            type="memory",
            item=record,
            scores=_scores(store, record, record["ts"], record["last_access"]),
            source_ids=memory_source_ids(item_id, record["merged_ids"]),
            merged_into=record["merged_into"],
            cited_by=_citing_units(store, item_id),
            history=history,
        )
    unit = _row(store, "units", item_id)
    if unit is None:
        raise NotFoundError(f"no record or unit with id {item_id!r}", hint="ids are shown by `expengine query --json`")
    source_ids = json_ids(unit["source_ids"])
    sources = []
    if source_ids:
        where, params = in_ids("id", source_ids)
        found = {
            i: {"id": i, "state": s, "kind": k, "text": t}
            for i, s, k, t in store.con.execute(
                f"SELECT id, state, kind, text FROM records WHERE {where}", params
            ).fetchall()
        }
        sources = [found.get(i, {"id": i, "state": "missing", "kind": None, "text": None}) for i in source_ids]
    return ShowResult(
        id=item_id,
        type="unit",
        item=unit,
        scores=_scores(
            store, unit, newest_source_ts(store, {item_id: source_ids}).get(item_id), unit["as_of"], unit["last_used"]
        ),
        source_ids=source_ids,
        sources=sources,
        history=history,
    )
