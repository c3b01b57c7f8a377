"""The changed clusters' records and units' sources, read once a refinement pass instead of once a cluster.

Each read of a cluster's members or of its sessions' tool records scans the whole `records` table, so
reading per cluster costs changed clusters × store a night. Here the members and kept sources of every
changed cluster, and their sessions' tool use, are read in one query each; a cluster gets copies, in
the order a per-cluster read gives (oldest first). Refinement changes only records' state while it
runs (sources put to sleep), and `set_state` checks the state again in SQL, so an earlier state in a
copy changes nothing it does. The changed clusters' live units (their sources) are read once too, and
the units a cluster's write inserts, merges into or supersedes are read again by id (`units_changed`),
so a later cluster sees what a per-cluster read would.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ...store.db import in_ids, json_ids
from ...store.records import fetch_records, select_records
from ...store.units import LIVE_SQL

if TYPE_CHECKING:
    from ...store.store import Store
    from .inputs import ClusterInput

CONTEXT_SQL = "session IN (SELECT unnest(?)) AND kind IN ('tool_call', 'tool_result', 'observation')"


def _order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(r) for r in sorted(rows, key=lambda r: (r["ts"], r["id"]))]


class ClusterReads:
    def __init__(self, store: "Store", clusters: list["ClusterInput"]) -> None:
        self.store = store
        self.keys = {c.key for c in clusters}
        self.units: dict[str, dict[str, list[str]]] = defaultdict(dict)  # cluster key -> live unit id -> sources
        for uid, key, source_ids in store.con.execute(
            f"SELECT id, cluster_key, source_ids FROM units WHERE {LIVE_SQL} AND cluster_key IN (SELECT unnest(?))",
            [sorted(self.keys)],
        ).fetchall():
            self.units[key][uid] = json_ids(source_ids)
        ids = {i for c in clusters for i in c.member_ids}
        ids.update(i for live in self.units.values() for sources in live.values() for i in sources)
        self.records = {r["id"]: r for r in fetch_records(store, sorted(ids))}
        self.sessions: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.read_sessions: set[str] = set()
        self._read_context(_tool_sessions(self.records.values()))

    def _read_context(self, sessions: list[str]) -> None:
        wanted = [s for s in sessions if s not in self.read_sessions]
        if wanted:
            for r in select_records(self.store, CONTEXT_SQL, [wanted]):
                self.sessions[r["session"]].append(r)
            self.read_sessions.update(wanted)

    def cluster_sources(self, key: str) -> list[str]:
        """The sources of the cluster's live units: archived sources leave the cluster but stay evidence."""
        return [i for sources in self.units.get(key, {}).values() for i in sources]

    def units_changed(self, ids: set[str]) -> None:
        """Read again the units a write inserted, merged into or superseded."""
        if not ids:
            return
        where, params = in_ids("id", sorted(ids))
        rows = self.store.con.execute(
            f"SELECT id, cluster_key, source_ids, {LIVE_SQL} FROM units WHERE {where}", params
        ).fetchall()
        for uid, key, source_ids, live in rows:
            for live_units in self.units.values():
                live_units.pop(uid, None)
            if live and key in self.keys:
                self.units[key][uid] = json_ids(source_ids)

    def fetch(self, ids: list[str]) -> list[dict[str, Any]]:
        """As `fetch_records(store, ids)`: the records with these ids, oldest first."""
        wanted = list(dict.fromkeys(ids))
        missing = [i for i in wanted if i not in self.records]
        if missing:
            self.records.update({r["id"]: r for r in fetch_records(self.store, missing)})
        return _order([self.records[i] for i in wanted if i in self.records])

    def session_context(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """As `inputs.session_context(store, records)`."""
        sessions = _tool_sessions(records)
        self._read_context(sessions)
        return _order([r for s in sessions for r in self.sessions.get(s, [])])


def _tool_sessions(records: Any) -> list[str]:
    return sorted({r["session"] for r in records if r.get("session") and r["kind"] in ("tool_call", "tool_result")})
