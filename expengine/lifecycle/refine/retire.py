"""Units that give way once intents are refined: rules of intents that regrouping dissolved, and
tool rules an intent's procedure covers. Both are superseded through `units.set_status`."""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING

from ...store import units
from ...store.db import json_ids
from .wording import WORDINGS

if TYPE_CHECKING:
    from ...store.store import Store


INTENT_PREFIX = "intent:"
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\(")


def retire_covered_tool_rules(store: "Store", agent: str, run_id: str | None, now: dt.datetime) -> int:
    """A rule keyed by a tool alone ("To cancel reservation (cancel_reservation): call
    cancel_reservation(…)") restates the tool's signature; once an intent's procedure calls that tool,
    the procedure says when and after what, so the tool rule is superseded by it. Rules about a tool's
    errors or the user's corrections stay. How many were superseded."""
    procedures = store.con.execute(
        f"SELECT id, action, support FROM units WHERE {units.LIVE_SQL} AND agent = ? AND kind = 'rule' "
        "AND category = 'procedure' AND cluster_key LIKE ?",
        [agent, INTENT_PREFIX + "%"],
    ).fetchall()
    covering: dict[str, tuple[int, str]] = {}  # tool → (support, id) of the best-supported procedure calling it
    for uid, action, support in procedures:
        for tool in set(_CALLED.findall(action or "")):
            covering[tool] = max(covering.get(tool, (-1, "")), (support or 0, uid))
    if not covering:
        return 0
    conditions = {
        words.to_use.format(human=tool.replace("_", " "), tool=tool): tool
        for tool in covering
        for words in WORDINGS.values()
    }
    rows = store.con.execute(
        f"SELECT id, condition FROM units WHERE {units.LIVE_SQL} AND agent = ? AND kind = 'rule' "
        "AND cluster_key NOT LIKE ? AND condition IN (SELECT unnest(?)) AND pitfall IS NULL",
        [agent, INTENT_PREFIX + "%", list(conditions)],
    ).fetchall()
    why = "an intent's procedure calls its tool"
    for uid, condition in rows:
        winner = covering[conditions[condition]][1]
        units.set_status(store, [uid], "superseded", winner=winner, reason=why, run_id=run_id, now=now)
    return len(rows)


def retire_stale_intents(store: "Store", agent: str, keys: set[str], run_id: str | None, now: dt.datetime) -> None:
    """Active units of intents that regrouping dissolved are superseded by the current intent unit
    sharing most of their runs."""
    rows = store.con.execute(
        f"SELECT id, cluster_key, source_ids FROM units WHERE {units.LIVE_SQL} AND agent = ? AND cluster_key LIKE ?",
        [agent, INTENT_PREFIX + "%"],
    ).fetchall()
    current = [(uid, set(json_ids(src))) for uid, key, src in rows if key in keys]
    stale = [(uid, set(json_ids(src))) for uid, key, src in rows if key not in keys]
    if not stale or not current:
        return
    for uid, sources in stale:
        winner = max(current, key=lambda c: len(c[1] & sources))[0]
        units.set_status(
            store, [uid], "superseded", winner=winner, reason="its intent was regrouped", run_id=run_id, now=now
        )
