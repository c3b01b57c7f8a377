"""The runs refinement's whole-store passes mine, read incrementally.

The intents pass needs every run (goal) of every agent, the environment pass every command of every
coding project, whatever their records' state. Each run's distillation depends on its own records (and,
for an intent, on its goal's outcome) only, so it is kept between cycles (store/derived_runs.py) and a
cycle re-reads the text of the runs whose fingerprint changed: the night's new and changed runs. The
result is the one a whole read gives (tests/test_nights_refine.py); `full` re-reads everything.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ...store.derived_runs import cached, fingerprints, store_runs
from ...store.records import select_records
from .environment import Call as Command
from .environment import project_calls
from .intents import Call, Run, build_runs

if TYPE_CHECKING:
    from ...store.store import Store

INTENTS = "intents"
COMMANDS = "commands"
TOOL_RECORDS = "kind IN ('tool_call', 'tool_result') AND tool_name IS NOT NULL"


class ReadCount:
    """How much a pass read: runs whose records were read again, and those records."""

    def __init__(self) -> None:
        self.runs = self.records = 0


def intent_runs(store: "Store", status: dict[str, str], count: ReadCount, *, full: bool, dry_run: bool) -> list[Run]:
    """Every goal's Run, in run id order, as `build_runs` over all goal records gives them."""
    prints = {k: f"{fp}:{status.get(k)}" for k, fp in fingerprints(store, "goal_id", "goal_id IS NOT NULL").items()}
    old = {} if full else cached(store, INTENTS)
    stale = sorted(k for k, fp in prints.items() if old.get(k, ("", ""))[0] != fp)
    records = select_records(store, "goal_id IN (SELECT unnest(?))", [stale]) if stale else []
    count.runs += len(stale)
    count.records += len(records)
    built = {run.run_id: run for run in build_runs(records, status)}
    if not dry_run:
        fresh = {k: (prints[k], json.dumps(_run_json(built.get(k)))) for k in stale}
        store_runs(store, INTENTS, fresh, set(prints))
    runs = []
    for key in sorted(prints):
        run = built.get(key) if key in built or key in stale else _run_of(json.loads(old[key][1]))
        if run is not None:
            runs.append(run)
    return runs


def project_commands(
    store: "Store", count: ReadCount, *, full: bool, dry_run: bool
) -> dict[tuple[str, str], list[Command]]:
    """Each (agent, project)'s commands in record order, as `project_calls` over all tool records gives
    them: a session's commands, their results and its starting folder are its own records'."""
    prints = fingerprints(store, "coalesce(session, '')", TOOL_RECORDS)
    old = {} if full else cached(store, COMMANDS)
    stale = sorted(k for k, fp in prints.items() if old.get(k, ("", ""))[0] != fp)
    read = select_records(store, f"{TOOL_RECORDS} AND coalesce(session, '') IN (SELECT unnest(?))", [stale])
    count.runs += len(stale)
    count.records += len(read)
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in read:
        by_session[r["session"] or ""].append(r)
    fresh: dict[str, tuple[str, str]] = {}
    merged: dict[tuple[str, str], list[tuple[dt.datetime, Command]]] = defaultdict(list)
    for key in sorted(prints):
        if key in by_session or key in stale:
            records = by_session.get(key, [])
            when = {r["id"]: r["ts"].isoformat() for r in records}
            payload: list[Any] = [
                [agent, repo, [[when[c.call_id], *asdict(c).values()] for c in calls]]
                for (agent, repo), calls in project_calls(records).items()
            ]
            fresh[key] = (prints[key], json.dumps(payload))
        else:
            payload = json.loads(old[key][1])
        for agent, repo, calls in payload:
            merged[(agent, repo)].extend((dt.datetime.fromisoformat(ts), Command(*fields)) for ts, *fields in calls)
    if not dry_run:
        store_runs(store, COMMANDS, fresh, set(prints))
    return {
        project: [c for _, c in sorted(calls, key=lambda tc: (tc[0], tc[1].call_id))]
        for project, calls in sorted(merged.items())
    }


def _run_json(run: Run | None) -> dict[str, Any] | None:
    if run is None:
        return None
    out = asdict(run)
    out["ended"] = run.ended.isoformat() if run.ended else None
    return out


def _run_of(data: dict[str, Any] | None) -> Run | None:
    if data is None:
        return None
    calls = [Call(**c) for c in data.pop("calls")]
    ended = dt.datetime.fromisoformat(data.pop("ended")) if data.get("ended") else data.pop("ended")
    return Run(**data, calls=calls, ended=ended)
