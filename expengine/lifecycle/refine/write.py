"""Writing refined drafts as units: plan each row (insert with a conflict decision, merge into the
active unit that says the same, or keep), then write the plan through the units table's owner
(store/units.py) in one transaction and index what changed."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ...store import units
from ...store.db import json_ids
from ...store.users import owner_of
from ...textutil import normalized
from .conflicts import decide
from .inputs import ClusterInput
from .report import RefineReport
from .slots import generalised
from .templates import Draft, confidence_of, render_text
from .wording import rendered_counts

if TYPE_CHECKING:
    from ...store.store import Store


def unit_row(draft: Draft, cluster: ClusterInput, now: Any) -> dict[str, Any]:
    text = render_text(draft)
    return {
        "id": units.unit_id(draft.kind, cluster.agent, cluster.key, text),
        "kind": draft.kind,
        "text": text,
        "condition": draft.condition,
        "action": draft.action,
        "expected_outcome": draft.expected_outcome,
        "pitfall": draft.pitfall,
        "statement": draft.statement,
        "subject": draft.subject,
        "attribute": draft.attribute,
        "as_of": draft.as_of,
        "category": draft.category,
        "agent": cluster.agent,
        "support": draft.support,
        "success_rate": draft.success_rate,
        "confidence": confidence_of(draft),
        "source_ids": json.dumps(draft.source_ids),
        "method": draft.method,
        "cluster_key": cluster.key,
        "created": now,
        "updated": now,
        "last_used": None,
        "utility": 0.0,
        "weight": 1.0,
        "helpful": 0,
        "harmful": 0,
        "status": "active",
        "supersedes": None,
        "superseded_by": None,
        "cluster_signature": cluster.signature,
    }


def _content_key(unit: dict[str, Any]) -> tuple:
    """What a unit says, without its evidence counts: rules by condition and action, facts by
    subject, attribute and statement."""
    if unit["kind"] == "rule":
        return ("rule", normalized(unit.get("condition")), normalized(unit.get("action")))
    return (
        "fact",
        normalized(unit.get("subject")),
        normalized(unit.get("attribute")),
        normalized(unit.get("statement")),
    )


def _twin(row: dict[str, Any], active: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The active unit that says the same as `row` (same id, same text or same content), if any."""
    key, text = _content_key(row), normalized(row["text"])
    return next(
        (u for u in active if u["id"] == row["id"] or normalized(u["text"]) == text or _content_key(u) == key), None
    )


def _merged_draft(draft: Draft, twin: dict[str, Any], *, same_cluster: bool) -> Draft:
    """The draft with the twin's sources added: union of sources, support and evidence summed."""
    existing = json_ids(twin["source_ids"])
    fresh = [i for i in draft.source_ids if i not in set(existing)]
    merged = replace(draft, source_ids=existing + fresh)
    if twin.get("as_of") is not None and (merged.as_of is None or twin["as_of"] > merged.as_of):
        merged.as_of = twin["as_of"]
    if draft.kind == "fact":
        merged.agreeing = min(merged.support, draft.agreeing + merged.support - draft.support)
    elif not same_cluster and not set(existing) & set(draft.source_ids):
        counts = rendered_counts(twin["text"] or "")
        if counts:  # disjoint evidence from another cluster: the counts add up
            merged.successes += counts[0]
            merged.trials += counts[1]
            merged.success_rate = round(merged.successes / merged.trials, 4) if merged.trials else None
    merged.confidence = confidence_of(merged)
    return merged


@dataclass
class Planned:
    """What `write_units` does with one refined row: insert (with a conflict decision), merge into an
    existing unit that says the same (`twin`), or nothing but the cluster link (`keep`)."""

    row: dict[str, Any]
    action: str
    decision: Any = None
    twin: dict[str, Any] | None = None


def _plan(
    store: "Store", cluster: ClusterInput, pairs: list[tuple[Draft, dict[str, Any]]], report: RefineReport
) -> list[Planned]:
    ids = [row["id"] for _, row in pairs]
    existing_ids = units.existing_ids(store, ids)
    steps: list[Planned] = []
    for draft, row in pairs:
        active = units.active_units(store, cluster.agent, row["kind"])
        # one person's units conflict and merge only with that person's; a rule may merge across people
        # (the same wording seen in several users' runs), and then belongs to none of them
        owner = owner_of(store.con, draft.source_ids)
        own = [u for u in active if u["user"] == owner]
        twin = _twin(row, active if row["kind"] == "rule" else own)
        if twin is None and row["id"] in existing_ids:
            steps.append(Planned(row, "keep"))  # refined before and since superseded: leave it
            continue
        if twin is None:  # another intent's procedure, the same but for the slot's value (slots.py)
            twin, draft = generalised(draft, row, active)
        if twin is not None:
            same_cluster = twin["cluster_key"] == cluster.key
            if set(draft.source_ids) <= set(json_ids(twin["source_ids"])):
                steps.append(Planned(twin, "keep"))
                continue
            merged = _merged_draft(draft, twin, same_cluster=same_cluster)
            merged_row = unit_row(merged, cluster, None)
            merged_row.update(id=twin["id"], cluster_key=twin["cluster_key"], created=twin["created"])
            if same_cluster:
                merged_row["cluster_signature"] = cluster.signature
            else:
                merged_row["cluster_signature"] = twin["cluster_signature"]
            steps.append(Planned(merged_row, "merge", twin=twin))
            continue
        decision = decide(draft, cluster_key=cluster.key, new_id=row["id"], existing=own)
        if not decision.new_active:
            row.update(status="superseded", superseded_by=decision.winner)
            report.units_lost_conflict += 1
        elif decision.losers:
            row["supersedes"] = ",".join(decision.losers)
        steps.append(Planned(row, "insert", decision=decision))
    return steps


def write_units(
    store: "Store",
    cluster: ClusterInput,
    pairs: list[tuple[Draft, dict[str, Any]]],
    report: RefineReport,
    run_id: str | None,
    dry_run: bool,
    now: dt.datetime,
    touched: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Insert new units, merge into units that say the same, supersede losers: one transaction with
    pending_index, then LanceDB. A unit that does not change keeps its `updated`. Returns the rows
    written or merged (the units whose sources changed); `touched` gets the ids of every unit inserted,
    merged into or superseded."""
    steps = _plan(store, cluster, pairs, report)
    report.units_unchanged += sum(1 for s in steps if s.action == "keep")
    written = [s.row for s in steps if s.action != "keep"]
    report.units.extend(
        {k: row[k] for k in ("id", "kind", "method", "support", "confidence", "status", "text")} for row in written
    )
    if dry_run:
        report.units_written += sum(1 for s in steps if s.action == "insert")
        report.units_merged += sum(1 for s in steps if s.action == "merge")
        return written
    added, removed = [], []
    with store.transaction():
        for step in steps:
            row = step.row
            if step.action == "keep":
                if row["cluster_key"] == cluster.key:
                    units.set_signature(store, cluster.signature, ids=[row["id"]])
                continue
            if step.action == "merge":
                row["updated"] = now
                detail = {
                    "cluster": cluster.key,
                    "support": row["support"],
                    "from_support": (step.twin or {}).get("support"),
                }
                units.merge(store, row, detail=detail, run_id=run_id, now=now)
                added.append(row["id"])
                continue
            row["created"] = row["updated"] = now
            detail = {
                "cluster": cluster.key,
                "method": row["method"],
                "support": row["support"],
                "status": row["status"],
            }
            units.insert(store, row, action="refined", detail=detail, run_id=run_id, now=now)
            if row["status"] == "active":
                added.append(row["id"])
            losers = step.decision.losers
            removed += losers
            units.set_status(
                store, losers, "superseded", winner=row["id"], reason=f"cluster {cluster.key}", run_id=run_id, now=now
            )
    report.units_written += sum(1 for s in steps if s.action == "insert")
    report.units_merged += sum(1 for s in steps if s.action == "merge")
    report.units_superseded += len(removed)
    if touched is not None:
        touched.update([row["id"] for row in written], removed)
    units.index_journalled(store, added)
    return written
