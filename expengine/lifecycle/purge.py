"""Purge (mark → observe → purge) and `forget` (real deletion, for privacy requests).

Purge only moves records out of the fast store: a dormant record below θ_purge that was marked
before the observation window and not accessed within it becomes `archived` (gone from LanceDB,
kept in DuckDB). `forget` is the only code path that deletes what a user ingested.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from ..errors import InputError, NotFoundError
from ..store.db import arrow_view, utcnow
from ..store.index import MEMORIES, UNITS
from ..store.state import set_state
from .common import examples, sql_float
from ..results import Result

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext


@dataclass
class PurgeReport(Result):
    archived: int = 0
    waiting: int = 0  # dormant and light enough, but still inside the observation window
    examples: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class ForgetResult(Result):
    records: int = 0
    embeddings: int = 0
    history: int = 0
    units_updated: int = 0
    units_deleted: int = 0
    ids: list[str] = field(default_factory=list)


def purge(store: "Store", *, dry_run: bool, run_id: str | None = None, now: dt.datetime | None = None) -> PurgeReport:
    started = time.perf_counter()
    cfg = store.config.decay
    cutoff = (now or utcnow()) - dt.timedelta(hours=cfg.observation_window_hours)
    light = f"state = 'dormant' AND NOT pinned AND NOT protected AND weight < {sql_float(cfg.theta_purge)}"
    due = store.con.execute(
        f"""SELECT id, text, weight FROM records WHERE {light}
            AND marked_at IS NOT NULL AND marked_at < ? AND (last_access IS NULL OR last_access < ?) ORDER BY id""",
        [cutoff, cutoff],
    ).fetchall()
    total = store.con.execute(f"SELECT count(*) FROM records WHERE {light}").fetchall()[0][0]
    report = PurgeReport(archived=len(due), waiting=int(total) - len(due),
                         examples=examples(due, lambda r: {"id": r[0], "text": r[1], "weight": round(r[2], 4)}))
    if not dry_run:
        set_state(store, [r[0] for r in due], "archived",
                  reason=f"purge: dormant, weight < {cfg.theta_purge}, untouched for {cfg.observation_window_hours} h",
                  run_id=run_id, now=now)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def resolve_ids(store: "Store", *, ids: list[str] | None, where: str | None) -> list[str]:
    """The record ids named directly, or selected by a SQL filter over `records`; unknown ids are an error."""
    if bool(ids) == bool(where):
        raise InputError("name record ids or give --where, not both and not neither",
                         hint="e.g. expengine forget rec-1 rec-2, or --where \"session = 's1'\"")
    con = store.con
    if where:
        if ";" in where:
            raise InputError("--where takes one SQL condition, without ';'", hint="e.g. --where \"agent = 'bot' AND ts < '2026-01-01'\"")
        try:
            return [r[0] for r in con.execute(f"SELECT id FROM records WHERE {where} ORDER BY id").fetchall()]
        except duckdb.Error as exc:
            raise InputError(f"bad --where filter: {exc}", hint="a SQL condition over the records table, e.g. agent = 'bot'") from exc
    with arrow_view(con, "wanted", pa.table({"id": list(dict.fromkeys(ids))})):
        found = {r[0] for r in con.execute("SELECT r.id FROM records r JOIN wanted w ON r.id = w.id").fetchall()}
    missing = [i for i in ids if i not in found]
    if missing:
        raise NotFoundError(f"no record with id {missing[0]!r}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                            hint="see `expengine show ID` or use --where")
    return list(dict.fromkeys(ids))


def forget(store: "Store", *, ids: list[str] | None = None, where: str | None = None) -> ForgetResult:
    """Delete records for real, with every row derived from them (privacy requests)."""
    from ..store.embeddings import text_hash

    targets = resolve_ids(store, ids=ids, where=where)
    result = ForgetResult(ids=targets)
    if not targets:
        return result
    con = store.con
    gone = set(targets)
    hashes = {text_hash(t) for (t,) in con.execute("SELECT text FROM records WHERE id IN (SELECT unnest(?))", [targets]).fetchall()}
    units = con.execute("SELECT id, source_ids FROM units").fetchall()
    touched = {uid: [s for s in json.loads(src or "[]") if s not in gone] for uid, src in units
               if gone & set(json.loads(src or "[]"))}
    survivors = con.execute("SELECT id, merged_ids FROM records WHERE merged_ids IS NOT NULL").fetchall()
    with store.transaction():
        with arrow_view(con, "forget_ids", pa.table({"id": targets})):
            result.records = con.execute("SELECT count(*) FROM records WHERE id IN (SELECT id FROM forget_ids)").fetchall()[0][0]
            con.execute("DELETE FROM records WHERE id IN (SELECT id FROM forget_ids)")
            result.history = con.execute("SELECT count(*) FROM history WHERE item_id IN (SELECT id FROM forget_ids)").fetchall()[0][0]
            con.execute("DELETE FROM history WHERE item_id IN (SELECT id FROM forget_ids)")
            con.execute("DELETE FROM cluster_members WHERE record_id IN (SELECT id FROM forget_ids)")
            con.execute("DELETE FROM pending_index WHERE id IN (SELECT id FROM forget_ids)")
            con.execute("UPDATE records SET merged_into = NULL WHERE merged_into IN (SELECT id FROM forget_ids)")
        for rid, merged in survivors:
            kept = [m for m in json.loads(merged) if m not in gone]
            if rid not in gone and len(kept) != len(json.loads(merged)):
                con.execute("UPDATE records SET merged_ids = ?, merged_count = ? WHERE id = ?", [json.dumps(kept), 1 + len(kept), rid])
        still_used = {text_hash(t) for (t,) in con.execute("SELECT text FROM records UNION ALL SELECT text FROM units").fetchall()}
        orphans = sorted(hashes - still_used)
        if orphans:
            result.embeddings = con.execute("SELECT count(*) FROM embeddings WHERE text_hash IN (SELECT unnest(?))", [orphans]).fetchall()[0][0]
            con.execute("DELETE FROM embeddings WHERE text_hash IN (SELECT unnest(?))", [orphans])
        emptied = [uid for uid, src in touched.items() if not src]
        for uid, src in touched.items():
            if src:
                con.execute("UPDATE units SET source_ids = ?, support = ? WHERE id = ?", [json.dumps(src), len(src), uid])
        if emptied:
            con.execute("DELETE FROM units WHERE id IN (SELECT unnest(?))", [emptied])
            con.execute("DELETE FROM history WHERE item_id IN (SELECT unnest(?))", [emptied])
    result.units_updated = len(touched) - len(emptied)
    result.units_deleted = len(emptied)
    store.index.delete(MEMORIES, targets)
    store.index.delete(UNITS, emptied)
    store.history_log("forget", "forget", {"records": result.records, "units_deleted": emptied})
    return result


class PurgeStep:
    name = "purge"

    def run(self, store: "Store", ctx: "CycleContext") -> dict[str, Any]:
        return purge(store, dry_run=False, run_id=ctx.run_id, now=ctx.now).to_dict()
