"""The store's size and shape (`expengine stats`), and the hot text share compaction reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..results import Result
from ..textutil import approx_tokens, count_scripts, shares
from .index import MEMORIES, UNITS
from .users import per_user

if TYPE_CHECKING:
    from .store import Store


@dataclass
class Stats(Result):
    raw: int
    active: int
    dormant: int
    archived: int
    units: int
    rejects: int
    by_kind: dict[str, int] = field(default_factory=dict)
    by_agent: dict[str, int] = field(default_factory=dict)
    by_user: dict[str, dict[str, int]] = field(default_factory=dict)  # `users.per_user`
    by_category: dict[str, int] = field(default_factory=dict)
    goals: dict[str, int] = field(default_factory=dict)
    units_by_status: dict[str, int] = field(default_factory=dict)
    indexed_memories: int = 0
    indexed_units: int = 0
    active_tokens: int = 0
    hot_tokens: int = 0
    raw_tokens: int = 0
    hot_share: float | None = None
    size_bytes: int = 0
    store: str = ""
    scripts: dict[str, float] = field(default_factory=dict)
    embedder: str = ""


def hot_text(store: "Store", *, keep: bool = False) -> dict[str, Any]:
    """Tokens a default query can return (active memories' and active units' text) against all raw text.
    Each record's count is kept (`record_tokens`) once `keep` stores it (a cycle's last count), so only
    the records counted for the first time have their text read: the night's, not the store's."""
    con = store.con
    fresh = con.execute(
        "SELECT r.id, r.state, r.text FROM records r WHERE NOT EXISTS (SELECT 1 FROM record_tokens t WHERE t.id = r.id)"
    ).fetchall()
    counted = [(record_id, state, approx_tokens(text)) for record_id, state, text in fresh]
    if keep and counted:
        con.execute(
            "INSERT INTO record_tokens SELECT * FROM (SELECT unnest(?), unnest(?))",
            [[c[0] for c in counted], [c[2] for c in counted]],
        )
        counted = []
    memory, raw = (
        int(con.execute(sql).fetchall()[0][0])
        for sql in (
            "SELECT coalesce(sum(t.tokens), 0) FROM records r JOIN record_tokens t USING (id) WHERE r.state = 'active'",
            "SELECT coalesce(sum(t.tokens), 0) FROM records r JOIN record_tokens t USING (id)",
        )
    )
    memory += sum(tokens for _, state, tokens in counted if state == "active")
    raw += sum(tokens for _, _, tokens in counted)
    units = sum(approx_tokens(t) for (t,) in con.execute("SELECT text FROM units WHERE status = 'active'").fetchall())
    hot = memory + units
    return {
        "active_tokens": memory,
        "hot_tokens": hot,
        "raw_tokens": raw,
        "hot_share": round(hot / raw, 4) if raw else None,
    }


def store_stats(store: "Store") -> Stats:
    """What `expengine stats` shows: records by state, kind, agent and category, units, rejects, goals,
    the index, the hot text share, the size on disk, the scripts and the embedder."""
    con = store.con

    def grouped(sql: str) -> dict[str, int]:
        return {str(k): int(v) for k, v in con.execute(sql).fetchall()}

    def scalar(sql: str) -> int:
        return int(con.execute(sql).fetchall()[0][0])

    states = grouped("SELECT state, count(*) FROM records GROUP BY state")
    size = sum(f.stat().st_size for f in store.dir.rglob("*") if f.is_file())
    return Stats(
        raw=sum(states.values()),
        active=states.get("active", 0),
        dormant=states.get("dormant", 0),
        archived=states.get("archived", 0),
        units=scalar("SELECT count(*) FROM units WHERE status = 'active'"),
        rejects=scalar("SELECT count(*) FROM rejects"),
        by_kind=grouped("SELECT kind, count(*) FROM records GROUP BY kind ORDER BY 2 DESC"),
        by_agent=grouped("SELECT agent, count(*) FROM records GROUP BY agent ORDER BY 2 DESC"),
        by_user=per_user(con),
        by_category=grouped("SELECT category, count(*) FROM records GROUP BY category ORDER BY 2 DESC"),
        goals=grouped("SELECT status, count(*) FROM goals GROUP BY status ORDER BY 2 DESC"),
        units_by_status=grouped("SELECT status, count(*) FROM units GROUP BY status"),
        indexed_memories=store.index.count(MEMORIES),
        indexed_units=store.index.count(UNITS),
        **hot_text(store),
        size_bytes=size,
        store=str(store.dir),
        scripts=shares(count_scripts(t for (t,) in con.execute("SELECT text FROM records").fetchall())),
        embedder=store.embeddings.name,
    )
