"""What refinement reads: the clusters, their records with the tool use of their sessions, the
goals' outcomes and the language an agent writes in.

Clusters come from the `clusters` / `cluster_members` tables that compaction's pruning writes. When
no clustering has run yet (the table is empty), they are built here by a simple, deterministic
grouping (`auto_clusters`): per agent and tool name (tool calls and results), per agent for user
corrections and negative feedback, per agent and speaker for patterned personal facts (home,
allergies, likes…), and per agent, speaker and day for other user statements.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...store.records import select_records
from ...store.units import signature_of
from ...store.vocabulary import INDEXED_RECORDS_SQL
from .facts import extract_facts
from .wording import Wording, wording_for

if TYPE_CHECKING:
    from ...store.store import Store


@dataclass
class ClusterInput:
    key: str
    agent: str
    signature: str
    member_ids: list[str]


def load_clusters(store: "Store") -> tuple[list[ClusterInput], bool]:
    """Clusters from pruning if any were written, else the deterministic grouping (second value True)."""
    con = store.con
    rows = con.execute("SELECT cluster_key, agent, signature FROM clusters ORDER BY size DESC, cluster_key").fetchall()
    if not rows:
        return auto_clusters(store), True
    members: dict[str, list[str]] = defaultdict(list)
    for key, record_id in con.execute("SELECT cluster_key, record_id FROM cluster_members").fetchall():
        members[key].append(record_id)
    return [ClusterInput(key, agent, signature, sorted(members.get(key, []))) for key, agent, signature in rows], False


def auto_clusters(store: "Store") -> list[ClusterInput]:
    """The fallback grouping documented in the module docstring, over active and dormant records."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in select_records(store, INDEXED_RECORDS_SQL):
        agent = r["agent"]
        if r["kind"] in ("tool_call", "tool_result") and r["tool_name"]:
            groups[(agent, f"tool:{r['tool_name']}")].append(r["id"])
        elif r["category"] == "correction" or (r["kind"] == "feedback" and r["feedback_signal"] == "negative"):
            groups[(agent, "corrections")].append(r["id"])
        elif r["kind"] == "message" and r["role"] == "user":
            facts = extract_facts(r)
            if not facts:
                continue
            fact = facts[0]
            slot = (
                f"said:{fact.subject}:{r['ts']:%Y-%m-%d}"
                if fact.attribute.startswith("said on")
                else f"facts:{fact.subject}"
            )
            groups[(agent, slot)].append(r["id"])
    return [
        ClusterInput(f"auto:{agent}:{slot}", agent, signature_of(ids), ids) for (agent, slot), ids in groups.items()
    ]


def session_context(store: "Store", records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool use and observations of the sources' sessions, so mining sees what followed an error."""
    sessions = sorted({r["session"] for r in records if r.get("session") and r["kind"] in ("tool_call", "tool_result")})
    if not sessions:
        return []
    return select_records(
        store, "session IN (SELECT unnest(?)) AND kind IN ('tool_call', 'tool_result', 'observation')", [sessions]
    )


AGENT_LANGUAGE_SAMPLE = 500


def agent_wording(store: "Store", agent: str, known: dict[str, Wording]) -> Wording:
    """The language an agent's latest messages, notes and goals are written in: how the units of
    its clusters with too few words of their own (tool calls and results) are worded. Read once per
    refinement pass (`known`)."""
    if agent in known:
        return known[agent]
    rows = store.con.execute(
        "SELECT content FROM records WHERE agent = ? AND content IS NOT NULL "
        "AND kind IN ('message', 'note', 'observation', 'goal') ORDER BY ts DESC LIMIT ?",
        [agent, AGENT_LANGUAGE_SAMPLE],
    ).fetchall()
    known[agent] = wording_for(content for (content,) in rows)
    return known[agent]


def goal_status(records: list[dict[str, Any]], statuses: dict[str, str]) -> dict[str, str]:
    """The records' goals' statuses, from every goal's (read once a pass: refinement changes none)."""
    return {g: statuses[g] for g in sorted({r["goal_id"] for r in records if r.get("goal_id")}) if g in statuses}
