"""What the cycle's whole-store passes distilled from each run, kept between cycles (`m019_derived_runs`).

A pass groups the records by a key (refinement's intents pass: one goal's run; its environment pass: one
session's commands; the chatter step: one session's sentence shapes, lifecycle/chatter.py). A group's fingerprint is its record count, newest ingest and a hash of its ids and categories
(plus what the pass adds, e.g. the goal's outcome), read from those columns only, never the text. A cycle
re-reads the records of the groups whose fingerprint changed and takes the others' distillation from
here, so its reading follows the night's data; `compact --full` re-reads every group. Derived data:
`forget` drops it all (store/scrub leaves no copy of a forgotten run's words), and the next cycle
rebuilds it. This module owns that table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import Store


def fingerprints(store: "Store", key_sql: str, where: str, params: list[Any] | None = None) -> dict[str, str]:
    """Group key (`key_sql`, over the records matching `where` with `params`) → its fingerprint."""
    rows = store.con.execute(
        f"SELECT {key_sql} AS run_key, count(*), max(ingested_at), "
        "sum(hash(id || chr(31) || coalesce(category, ''))) "
        f"FROM records WHERE {where} GROUP BY run_key",
        params or [],
    ).fetchall()
    return {key: f"{count}:{newest.isoformat()}:{digest}" for key, count, newest, digest in rows}


def cached(store: "Store", pass_: str) -> dict[str, tuple[str, str]]:
    """Group key → (fingerprint, payload) as the pass last stored them."""
    rows = store.con.execute(
        "SELECT run_key, fingerprint, payload FROM derived_runs WHERE pass = ?", [pass_]
    ).fetchall()
    return {key: (fingerprint, payload) for key, fingerprint, payload in rows}


def stored_fingerprints(store: "Store", pass_: str) -> dict[str, str]:
    """Group key → fingerprint as the pass last stored them, without reading the payloads."""
    rows = store.con.execute("SELECT run_key, fingerprint FROM derived_runs WHERE pass = ?", [pass_]).fetchall()
    return dict(rows)


def store_runs(store: "Store", pass_: str, fresh: dict[str, tuple[str, str]], current: set[str] | None) -> None:
    """Keep the pass's groups in `current` only (all of them when None: a later chunk of a pass that
    pruned already), and (re)write the `fresh` ones: key → (fingerprint, payload)."""
    con = store.con
    if current is not None:
        con.execute(
            "DELETE FROM derived_runs WHERE pass = ? AND run_key NOT IN (SELECT unnest(?))", [pass_, sorted(current)]
        )
    if fresh:
        keys = sorted(fresh)
        con.execute(
            "INSERT OR REPLACE INTO derived_runs SELECT ?, * FROM (SELECT unnest(?), unnest(?), unnest(?))",
            [pass_, keys, [fresh[k][0] for k in keys], [fresh[k][1] for k in keys]],
        )


def forget_derived(con: Any) -> None:
    """Drop every pass's distillations (a forgotten run's words must not stay in them) and the token counts
    of the records in the `forget_ids` view; a snapshot taken before m019 has neither table."""
    tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if "derived_runs" in tables:
        con.execute("DELETE FROM derived_runs")
    if "record_tokens" in tables:
        con.execute("DELETE FROM record_tokens WHERE id IN (SELECT id FROM forget_ids)")
