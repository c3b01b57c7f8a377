"""The one owner of the `units` table, as `state.py` is the one writer of a record's state.

Every write to `units` goes through here: `insert` and `merge` (refinement's write, or any other
producer of units: the kind is the caller's), `set_status` (supersede, quarantine, restore: DuckDB,
the history entry and LanceDB together), `set_signature`, the use and feedback counters, and
`forget`'s source removal. Reads that writers share (the field list, an agent's live units, cluster
signatures) live here too; listing and tracing are in unit_reads.py, and the query path
keeps its own fast SELECTs.

Records have a `state` (active → dormant → archived: how present a memory is) and units a `status`
(active, dormant, superseded, quarantined: whether a unit may be used at all); they are different
lifecycles, so the two words stay apart. A dormant unit (unused until decay sank its weight under
θ_dormant) is still indexed and still a query candidate at its low weight: when a query shows it, it
wakes (`wake`). Only superseded and quarantined units leave LanceDB.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ..textutil import normalized
from .db import json_ids, utcnow
from .filters import sql_str
from .index import UNITS
from .users import owner_of, quoted_users
from .vocabulary import LIVE_SQL, LIVE_UNIT_STATUSES

if TYPE_CHECKING:
    import duckdb

    from .index import Index
    from .store import Store

STATUSES = ("active", "dormant", "superseded", "quarantined")
LIVE_STATUSES = LIVE_UNIT_STATUSES
_CHANGES_FROM = {
    "superseded": LIVE_STATUSES,
    "quarantined": LIVE_STATUSES,
    "dormant": ("active",),
    "active": ("quarantined", "superseded", "dormant"),
}
UNIT_FIELDS = (
    "id",
    "kind",
    "text",
    "condition",
    "action",
    "expected_outcome",
    "pitfall",
    "statement",
    "subject",
    "attribute",
    "as_of",
    "category",
    "agent",
    "support",
    "success_rate",
    "confidence",
    "source_ids",
    "method",
    "cluster_key",
    "created",
    "updated",
    "last_used",
    "utility",
    "weight",
    "helpful",
    "harmful",
    "status",
    "supersedes",
    "superseded_by",
    "cluster_signature",
    "user",
    "quotes",
)
# What a merge rewrites: the wording and the evidence, never identity, lifecycle or use counters.
MERGE_FIELDS = (
    "text",
    "condition",
    "action",
    "expected_outcome",
    "pitfall",
    "statement",
    "as_of",
    "support",
    "success_rate",
    "confidence",
    "source_ids",
    "method",
    "cluster_signature",
)
# The columns `decide` and the merge planner compare an agent's active units by.
ACTIVE_FIELDS = tuple(
    "id kind text cluster_key cluster_signature created condition action expected_outcome pitfall subject attribute "
    "statement support as_of source_ids user".split()
)


def unit_id(kind: str, agent: str, cluster_key: str, text: str) -> str:
    """A content hash, so refining the same evidence twice writes the same unit (idempotent)."""
    digest = hashlib.sha256(f"{kind}\x1f{agent}\x1f{cluster_key}\x1f{normalized(text)}".encode()).hexdigest()
    return "u-" + digest[:12]


def signature_of(member_ids: list[str]) -> str:
    """A cluster's signature: a unit is refined again only when its cluster's members changed."""
    return hashlib.sha256("\n".join(sorted(member_ids)).encode()).hexdigest()[:16]


# --- reads (listing and tracing: unit_reads.py) --------------------------------------------------
def status_of(store: "Store", uid: str) -> str | None:
    """The unit's status; None when there is no such unit."""
    row = store.con.execute("SELECT status FROM units WHERE id = ?", [uid]).fetchone()
    return None if row is None else row[0]


def existing_ids(store: "Store", ids: list[str]) -> set[str]:
    """Those of `ids` that name a unit, whatever its status."""
    if not ids:
        return set()
    return {r[0] for r in store.con.execute("SELECT id FROM units WHERE id IN (SELECT unnest(?))", [ids]).fetchall()}


def active_units(store: "Store", agent: str, kind: str) -> list[dict[str, Any]]:
    """The agent's live (active or dormant) units of one kind, with the fields conflicts and merges
    compare: new evidence for a dormant unit merges into it and wakes it."""
    cursor = store.con.execute(
        f"SELECT {', '.join(ACTIVE_FIELDS)} FROM units WHERE {LIVE_SQL} AND agent = ? AND kind = ?",
        [agent, kind],
    )
    return [dict(zip(ACTIVE_FIELDS, row)) for row in cursor.fetchall()]


def stored_signatures(store: "Store") -> dict[str, set[str]]:
    """Cluster key → the signatures its live units were refined from."""
    stored: dict[str, set[str]] = defaultdict(set)
    for key, signature in store.con.execute(
        f"SELECT cluster_key, cluster_signature FROM units WHERE {LIVE_SQL} AND cluster_key IS NOT NULL"
    ).fetchall():
        stored[key].add(signature)
    return stored


# --- writes ------------------------------------------------------------------------------------------
def insert(
    store: "Store",
    row: dict[str, Any],
    *,
    action: str,
    detail: Any = None,
    run_id: str | None = None,
    now: dt.datetime | None = None,
) -> None:
    """Add one unit (any kind; the columns not given take the table's defaults) and its history entry
    (`action`, `detail`). An active unit is journalled for LanceDB: `index_journalled` adds it."""
    unknown = set(row) - set(UNIT_FIELDS)
    assert not unknown, f"not unit fields: {sorted(unknown)}"
    row = row if "user" in row else {**row, "user": owner_of(store.con, json_ids(row.get("source_ids")))}
    row["quotes"] = None if row["user"] else quoted_users(store.con, row["text"], json_ids(row.get("source_ids")))
    columns = list(row)
    store.con.execute(
        f"INSERT INTO units ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
        [row[k] for k in columns],
    )
    store.history_log(row["id"], action, detail, run_id=run_id, at=now)
    if row.get("status", "active") in LIVE_STATUSES:
        _journal(store, [row["id"]])


def merge(
    store: "Store",
    row: dict[str, Any],
    *,
    detail: Any = None,
    run_id: str | None = None,
    now: dt.datetime | None = None,
) -> None:
    """Rewrite an existing unit's wording and evidence (`MERGE_FIELDS` from `row`), stamp `updated`,
    log `merged` and journal it for LanceDB."""
    now = now or utcnow()
    sources = json_ids(row["source_ids"])
    user = owner_of(store.con, sources)
    quotes = None if user else quoted_users(store.con, row["text"], sources)
    store.con.execute(
        f"UPDATE units SET {', '.join(f'{k} = ?' for k in MERGE_FIELDS)}, user = ?, quotes = ?, updated = ? WHERE id = ?",
        [row[k] for k in MERGE_FIELDS] + [user, quotes, now, row["id"]],
    )
    store.history_log(row["id"], "merged", detail, run_id=run_id, at=now)
    _journal(store, [row["id"]])
    wake(store, [row["id"]], reason="new evidence merged in", run_id=run_id, now=now)


def set_signature(
    store: "Store", signature: str, *, ids: list[str] | None = None, cluster_key: str | None = None
) -> None:
    """Link units to their cluster's current signature (the units with `ids`, or the cluster's active
    ones), so an unchanged cluster is not refined again."""
    if ids is not None:
        store.con.execute("UPDATE units SET cluster_signature = ? WHERE id IN (SELECT unnest(?))", [signature, ids])
    else:
        store.con.execute(
            "UPDATE units SET cluster_signature = ? WHERE status = 'active' AND cluster_key = ?",
            [signature, cluster_key],
        )


def set_status(
    store: "Store",
    ids: list[str],
    status: str,
    *,
    winner: str | None = None,
    reason: str,
    run_id: str | None = None,
    now: dt.datetime | None = None,
) -> int:
    """Move units to `status` and say why: the DuckDB update, the history entry and the LanceDB change.

    - `superseded` (needs `winner`, the unit that replaces them): from active; stamps `updated` and
      `superseded_by` (and the winner's `supersedes`, when unset), logs "by WINNER (REASON)", leaves LanceDB.
    - `quarantined`: from active or dormant; leaves LanceDB (no query returns it) but stays listed.
    - `dormant`: from active (decay); stays in LanceDB, marked dormant, still a query candidate.
    - `active`: from dormant (a wake-up, logged as `woke`, its weight lifted to θ_dormant so the next
      cycle does not put it straight back to sleep), or from quarantined or superseded (a restore,
      logged as `restored`, back in LanceDB).

    Returns how many units changed; a unit already in `status` (or absent) is left alone, so a
    repeated call writes nothing. `now` stamps the history and a superseded unit's `updated` (a cycle
    passes its clock).
    """
    assert status in STATUSES, status
    assert (status == "superseded") == (winner is not None), "a superseded unit names its winner"
    if not ids:
        return 0
    con = store.con
    changed = [
        r[0]
        for r in con.execute(
            "SELECT id FROM units WHERE id IN (SELECT unnest(?)) AND status IN (SELECT unnest(?)) ORDER BY id",
            [list(ids), list(_CHANGES_FROM[status])],
        ).fetchall()
    ]
    if not changed:
        return 0
    now = now or utcnow()
    woke = [] if status != "active" else _with_status(store, changed, "dormant")
    if status == "superseded":
        con.execute(
            "UPDATE units SET status = 'superseded', superseded_by = ?, updated = ? WHERE id IN (SELECT unnest(?))",
            [winner, now, changed],
        )
        # the winner names what it replaced, unless its writer already did (refine lists its losers)
        con.execute("UPDATE units SET supersedes = ? WHERE id = ? AND supersedes IS NULL", [",".join(changed), winner])
    else:
        con.execute(
            "UPDATE units SET status = ?, superseded_by = NULL WHERE id IN (SELECT unnest(?))", [status, changed]
        )
    detail = f"by {winner} ({reason})" if winner is not None else reason
    restored = [i for i in changed if i not in set(woke)]
    for action, ids_ in (("woke", woke), ("restored" if status == "active" else status, restored)):
        if ids_:
            con.execute("INSERT INTO history SELECT unnest(?), ?, ?, ?, ?", [ids_, now, action, detail, run_id])
    if woke:
        con.execute(
            "UPDATE units SET weight = GREATEST(weight, ?) WHERE id IN (SELECT unnest(?))",
            [store.config.decay.theta_dormant, woke],
        )
    if status in LIVE_STATUSES:
        store.index.update(UNITS, woke if status == "active" else changed, {"status": status})
    if restored and status == "active":
        _journal(store, restored)
        index_journalled(store, restored)
        store.index.refresh_text_index(UNITS)
    elif status not in LIVE_STATUSES:
        store.index.delete(UNITS, changed)
    return len(changed)


def wake(
    store: "Store", ids: list[str], *, reason: str, run_id: str | None = None, now: dt.datetime | None = None
) -> int:
    """The dormant units among `ids` become active again (a query showed them, new evidence arrived)."""
    dormant = _with_status(store, ids, "dormant")
    return set_status(store, dormant, "active", reason=reason, run_id=run_id, now=now) if dormant else 0


def _with_status(store: "Store", ids: list[str], status: str) -> list[str]:
    if not ids:
        return []
    return [
        r[0]
        for r in store.con.execute(
            "SELECT id FROM units WHERE id IN (SELECT unnest(?)) AND status = ? ORDER BY id", [list(ids), status]
        ).fetchall()
    ]


def record_use(store: "Store", ids: list[str], *, delta: float, now: dt.datetime) -> None:
    """Units a query showed gain `delta` weight and a fresh `last_used`; dormant ones wake first."""
    if ids:
        wake(store, ids, reason="shown by a query", now=now)
        store.con.execute(
            "UPDATE units SET weight = weight + ?, last_used = ? WHERE id IN (SELECT unnest(?))", [delta, now, ids]
        )


def decay(store: "Store", lambdas: dict[str, float], *, default: float, unused_since: dt.datetime) -> None:
    """W ← W·λ for live units neither created nor shown since `unused_since`, λ by kind; units standing
    for a pinned or protected record keep theirs."""
    by_kind = " ".join(f"WHEN {sql_str(k)} THEN {float(v)!r}" for k, v in sorted(lambdas.items()))
    lam = f"(CASE kind {by_kind} ELSE {float(default)!r} END)" if by_kind else repr(float(default))
    store.con.execute(
        f"UPDATE units SET weight = weight * {lam} WHERE {LIVE_SQL} AND COALESCE(last_used, created) < ? "
        f"AND id NOT IN (SELECT id FROM ({SPARED_SQL}))",
        [unused_since],
    )


# Units that never decay: those standing for a pinned or protected record.
SPARED_SQL = (
    "SELECT u.id FROM units u, unnest(CAST(from_json(u.source_ids, '[\"VARCHAR\"]') AS VARCHAR[])) s(source_id) "
    "JOIN records r ON r.id = s.source_id WHERE r.pinned OR r.protected"
)


def credit_outcome(
    store: "Store", uid: str, *, delta: float, detail: dict[str, Any], run_id: str | None, now: dt.datetime | None
) -> None:
    """Outcome credit found clearly better outcomes when the unit was shown: utility += `delta`, logged
    with the counts."""
    store.con.execute("UPDATE units SET utility = utility + ? WHERE id = ?", [delta, uid])
    store.history_log(uid, "credit", {**detail, "utility_delta": delta}, run_id=run_id, at=now)


def count_feedback(store: "Store", uid: str, *, helpful: bool, delta: float) -> tuple[int, int, str]:
    """One helpful or harmful report: utility ± `delta` and the counter. Returns (harmful, helpful,
    status) after it."""
    column = "helpful" if helpful else "harmful"
    store.con.execute(f"UPDATE units SET utility = utility + ?, {column} = {column} + 1 WHERE id = ?", [delta, uid])
    harmful, helpful_count, status = store.con.execute(
        "SELECT harmful, helpful, status FROM units WHERE id = ?", [uid]
    ).fetchall()[0]
    return harmful, helpful_count, status


def index_journalled(store: "Store", ids: list[str]) -> None:
    """Put the journalled active units among `ids` into LanceDB and clear their journal entries
    (what a kill leaves journalled, `index_pending` replays when the store is next opened)."""
    if not ids:
        return
    from .reindex import unit_rows

    store.index.add(UNITS, unit_rows(store, f"id IN (SELECT unnest(?)) AND {LIVE_SQL}", [ids]), replace=True)
    store.con.execute("DELETE FROM pending_index WHERE target = 'unit' AND id IN (SELECT unnest(?))", [ids])


def _journal(store: "Store", ids: list[str]) -> None:
    store.con.execute("INSERT INTO pending_index SELECT unnest(?), 'unit' ON CONFLICT DO NOTHING", [ids])


# --- forget (on any connection: the live store or a snapshot's file) ---------------------------------
def drop_sources(con: "duckdb.DuckDBPyConnection", uid: str, sources_left: list[str]) -> None:
    """The unit keeps only `sources_left` (a forgotten record left its evidence)."""
    con.execute(
        "UPDATE units SET source_ids = ?, support = ? WHERE id = ?", [json.dumps(sources_left), len(sources_left), uid]
    )


def delete(con: "duckdb.DuckDBPyConnection", ids: list[str]) -> int:
    """Delete units and their history for real (only `forget` does); returns the history rows deleted.
    The caller removes them from LanceDB after its transaction (`unindex`), on the index it holds."""
    if not ids:
        return 0
    history = con.execute("SELECT count(*) FROM history WHERE item_id IN (SELECT unnest(?))", [ids]).fetchall()[0][0]
    con.execute("DELETE FROM units WHERE id IN (SELECT unnest(?))", [ids])
    con.execute("DELETE FROM history WHERE item_id IN (SELECT unnest(?))", [ids])
    return int(history)


def unindex(index: "Index", ids: list[str]) -> None:
    """Deleted units leave a LanceDB folder: the live store's, or a snapshot's."""
    index.delete(UNITS, ids)
