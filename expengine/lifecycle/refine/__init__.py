"""Refinement: each changed cluster with enough members becomes grounded knowledge units.

Per cluster: read it (inputs.py) → mine (mine.py, deterministic) → template drafts (templates.py) →
ask the model to word them (model_wording.py; optional, budgeted) → ground the wording (ground.py),
else keep the template → resolve conflicts (conflicts.py) → write units (write.py, through the units
table's owner, store/units.py: one DuckDB transaction, then LanceDB) → put the sources they stand for
to sleep (sources.py), or, when the cluster's only rule would restate its tool's schema, its routine
calls (routine.py). Then per agent the intents and lessons over its runs (intents.py, lessons.py),
and the units those make obsolete give way (retire.py); and per coding project the environment
rules its runs show (environment.py: the test command, what is not installed) and its error → fix
rules (fixes.py: what was run next after each kind of error).

This module is the pass (`refine_clusters`) and its compaction step (`RefineStep`). Incremental: a
cluster is refined only when its signature (hash of its sorted member ids) differs from the one
stored on its active units and from the one it was last looked at with (store/refined.py).
"""

from __future__ import annotations

import datetime as dt
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterator

from ...clock import utcnow
from ...errors import ModelError
from ...store import units
from ...store.db import json_ids, json_meta
from ...store.records import select_records
from ...store.refined import carried_keys, carry, mark_refined, refined_signatures
from ...store.state import set_state
from ...store.vocabulary import TIME_ASSUMED
from ..cycle import Failed, Skipped
from .backlog import tonights
from .ground import check_digest, check_fact, check_rule, source_text
from .inputs import ClusterInput, agent_wording, goal_status, load_clusters
from .mine import mine_cluster
from .model_wording import Budget, load_llm, word_with_model
from .reads import ClusterReads
from .report import RefineReport
from .retire import retire_covered_tool_rules, retire_stale_intents
from .routine import is_routine, sleep_routine
from .runs_read import ReadCount, intent_runs, project_commands
from .sources import archive_sources, sleep_covered_sources
from .templates import DIGEST_ATTRIBUTE, Draft, digest_draft, template_drafts
from .wording import Wording
from .write import unit_row, write_units

if TYPE_CHECKING:
    from ...models.llm import LLM, LLMProvider
    from ...store.store import Store
    from ..cycle import CycleContext, StepReport


def refine_clusters(
    store: "Store",
    llm: LLMProvider,
    *,
    dry_run: bool,
    run_id: str | None = None,
    max_llm_calls: int | None = None,
    time_limit_s: float | None = None,
    now: dt.datetime | None = None,
    full: bool = False,
) -> RefineReport:
    """`now` is the cycle's clock: it stamps the units, their history and the state changes. A cluster
    whose signature refinement already looked at is skipped, unless `full` (`compact --full`); a night
    takes the changed clusters `backlog.tonights` gives, and leaves the rest (`report.clusters_left`)."""
    started = time.monotonic()
    clock = now or utcnow()
    cfg = store.config.refine
    report = RefineReport(run_id=run_id, dry_run=dry_run)
    budget = Budget(
        cfg.max_llm_calls if max_llm_calls is None else max_llm_calls,
        cfg.time_limit_s if time_limit_s is None else time_limit_s,
    )
    clusters, report.auto_clusters = load_clusters(store)
    clusters = [c for c in clusters if len(c.member_ids) >= cfg.min_support]
    report.clusters_total = len(clusters)
    stored = units.stored_signatures(store)
    looked = {} if full else refined_signatures(store)
    changed = [c for c in clusters if c.signature not in stored.get(c.key, set()) and looked.get(c.key) != c.signature]
    report.clusters_unchanged = len(clusters) - len(changed)
    changed, later = tonights(changed, carried_keys(store), 0 if full else cfg.max_members)
    model = load_llm(store, llm, report) if changed else None
    wordings: dict[str, Wording] = {}
    statuses = dict(store.con.execute("SELECT goal_id, status FROM goals").fetchall())  # refinement changes none
    looked_at: list[tuple[str, str]] = []
    for position, (cluster, reads) in enumerate(_with_reads(store, changed)):
        if not budget.time_left() or (model is not None and not budget.calls_left()):
            report.clusters_left = [c.key for c in changed[position:]]
            break
        _refine_one(
            store,
            cluster,
            model,
            budget,
            report,
            run_id=run_id,
            dry_run=dry_run,
            now=clock,
            wordings=wordings,
            statuses=statuses,
            reads=reads,
        )
        looked_at.append((cluster.key, cluster.signature))
    report.clusters_left += [c.key for c in later]
    if not dry_run:
        mark_refined(store, looked_at, [c.key for c in clusters])
        carry(store, report.clusters_left)
    count = ReadCount()
    if store.config.lessons.enabled and budget.time_left():
        _refine_intents(
            store,
            report,
            stored,
            count,
            statuses,
            run_id=run_id,
            dry_run=dry_run,
            now=clock,
            wordings=wordings,
            full=full,
        )
    if budget.time_left():
        _refine_environments(
            store, report, stored, count, statuses, run_id=run_id, dry_run=dry_run, now=clock, full=full
        )
    report.runs_read, report.run_records_read = count.runs, count.records
    report.seconds = round(time.monotonic() - started, 3)
    return report


CLUSTERS_PER_READ = 500  # changed clusters whose records `ClusterReads` holds at a time


def _with_reads(store: "Store", clusters: list[ClusterInput]) -> Iterator[tuple[ClusterInput, ClusterReads]]:
    """Each cluster with the reads of its slice of `CLUSTERS_PER_READ` clusters, read when the slice
    starts: a night's changed clusters are one slice, and a first or full cycle of a large store (every
    cluster changed: 1M records held at once took 5 GB) holds one slice's members at a time."""
    for start in range(0, len(clusters), CLUSTERS_PER_READ):
        some = clusters[start : start + CLUSTERS_PER_READ]
        reads = ClusterReads(store, some)
        yield from ((cluster, reads) for cluster in some)


def _refine_one(
    store: "Store",
    cluster: ClusterInput,
    llm: "LLM | None",
    budget: Budget,
    report: RefineReport,
    *,
    run_id: str | None,
    dry_run: bool,
    now: dt.datetime,
    wordings: dict[str, Wording],
    statuses: dict[str, str],
    reads: ClusterReads,
) -> None:
    previous = reads.cluster_sources(cluster.key)
    if previous and set(cluster.member_ids) <= set(previous):
        # only archived sources left the cluster: the evidence is the same, so keep the units
        if not dry_run:
            units.set_signature(store, cluster.signature, cluster_key=cluster.key)
        report.clusters_unchanged += 1
        return
    records = [r for r in reads.fetch(cluster.member_ids + previous) if r["category"] != "chatter"]
    if len(records) < store.config.refine.min_support:
        report.clusters_not_concrete += 1
        return
    context = reads.session_context(records)
    mined = mine_cluster(
        records,
        context=context,
        goal_status=goal_status(records, statuses),
        agent_wording=agent_wording(store, cluster.agent, wordings),
    )
    conversational = store.config.refine.digest and all(
        r["kind"] == "message" and not r.get("tool_name") for r in records
    )
    # "X said: '…' · '…'" quote bags state nothing specific: only patterned facts (home, likes…) and rules
    drafts = [d for d in template_drafts(mined) if not (d.attribute or "").startswith("said on")]
    timeless = {r["id"] for r in records if TIME_ASSUMED in json_meta(r.get("meta"))}
    for draft in drafts:
        draft.dated = not set(draft.source_ids) <= timeless
    vocabulary = source_text(mined, context) if drafts else ""  # only drafts are checked against it
    grounded, rejected = [], []
    for draft in drafts:
        reasons = (
            check_rule(vars(draft), mined, vocabulary, templated_condition=True)
            if draft.kind == "rule"
            else check_fact(vars(draft), draft.subject or "", vocabulary)
        )
        if reasons:
            report.rejection_reasons.append(f"template: {reasons[0][:160]}")
            rejected.append(vars(draft))
            continue
        grounded.append(draft)
    if is_routine(mined, rejected, min_runs=store.config.refine.min_support):
        report.routine_asleep += sleep_routine(store, mined, cluster.key, run_id=run_id, now=now, dry_run=dry_run)
    if llm is not None:
        for draft in grounded:
            if budget.calls_left() and budget.time_left():
                word_with_model(llm, draft, mined, vocabulary, store, budget, report)
    if conversational:
        digest = _digest(store, cluster, records, report)
        if digest is not None:
            grounded.insert(0, digest)
    if not grounded:
        report.clusters_not_concrete += 1
        return
    pairs = list({row["id"]: (draft, row) for draft in grounded for row in [unit_row(draft, cluster, now)]}.values())
    touched: set[str] = set()
    written = write_units(store, cluster, pairs, report, run_id, dry_run, now, touched)
    reads.units_changed(touched)
    report.clusters_refined += 1
    cfg = store.config.refine
    for row in written:
        report.units_by_method[row["method"]] = report.units_by_method.get(row["method"], 0) + 1
        if dry_run or row["status"] != "active":
            continue
        if cfg.archive_sources and row["kind"] == "rule":
            report.archiving += archive_sources(store, row, records, run_id, now)
        if cfg.dormant_sources:
            report.dormant += sleep_covered_sources(store, row, records, run_id, now)


def _refine_intents(
    store: "Store",
    report: RefineReport,
    stored: dict[str, set[str]],
    count: ReadCount,
    status: dict[str, str],
    *,
    run_id: str | None,
    dry_run: bool,
    now: dt.datetime,
    wordings: dict[str, Wording],
    full: bool,
) -> None:
    """Rules keyed by the situation (intents.py) and lessons from outcomes (lessons.py), per agent, over
    every run (goal) in the store whatever its records' state (only the runs that changed are read again:
    runs_read.py); an intent is rewritten only when its runs or their outcomes changed, and intents that
    no longer exist give way to the new ones."""
    from .lessons import intent_drafts

    by_agent: dict[str, list[Any]] = defaultdict(list)
    for run in intent_runs(store, status, count, full=full, dry_run=dry_run):
        by_agent[run.agent].append(run)
    for agent, runs in by_agent.items():
        vectors = store.embeddings.encode([r.request for r in runs], indexed=True)
        found = intent_drafts(
            runs,
            vectors,
            store.config.lessons,
            min_runs=store.config.refine.min_support,
            agent_wording=agent_wording(store, agent, wordings),
        )
        for intent, drafts in found:
            cluster = ClusterInput(
                intent.key,
                agent,
                units.signature_of([f"{r.run_id}:{r.succeeded}" for r in intent.runs]),
                [r.opening_id for r in intent.runs],
            )
            report.intents += 1
            if cluster.signature in stored.get(cluster.key, set()):
                report.clusters_unchanged += 1
                continue
            written = write_units(
                store, cluster, [(d, unit_row(d, cluster, now)) for d in drafts], report, run_id, dry_run, now
            )
            report.lessons += sum(1 for row in written if row["category"] == "lesson")
            for row in written:
                report.units_by_method[row["method"]] = report.units_by_method.get(row["method"], 0) + 1
        if found and not dry_run:
            retire_stale_intents(store, agent, {intent.key for intent, _ in found}, run_id, now)
        if store.config.lessons.retire_tool_rules and not dry_run:
            report.units_superseded += retire_covered_tool_rules(store, agent, run_id, now)


def _refine_environments(
    store: "Store",
    report: RefineReport,
    stored: dict[str, set[str]],
    count: ReadCount,
    status: dict[str, str],
    *,
    run_id: str | None,
    dry_run: bool,
    now: dt.datetime,
    full: bool,
) -> None:
    """Per (agent, repository) of coding-agent runs, the environment rules over every run's commands
    whatever their records' state (only the sessions that changed are read again: runs_read.py);
    rewritten only when the project's commands or results changed."""
    from .environment import PROJECT_MIN_RUNS, SESSION_SILENT, calls_cluster, environment_drafts, settled_ids
    from .fixes import fix_drafts, shared_fix_drafts

    # a run ends with an outcome, or by falling silent: a coding assistant's session rarely reports one
    silent = store.con.execute(
        "SELECT session FROM records WHERE session IS NOT NULL GROUP BY session HAVING max(ts) < ?",
        [now - SESSION_SILENT],
    ).fetchall()
    ended = {g for g, s in status.items() if s != "open"} | {s for (s,) in silent}
    resolved = {g for g, s in status.items() if s == "succeeded"}
    min_runs = min(store.config.refine.min_support, PROJECT_MIN_RUNS)
    by_project = project_commands(store, count, full=full, dry_run=dry_run)
    for (agent, repo), calls in sorted(by_project.items()):
        cluster = calls_cluster(f"environment:{repo}", agent, calls, resolved)
        if cluster.signature in stored.get(cluster.key, set()):
            report.clusters_unchanged += 1
            continue
        drafts = environment_drafts(calls, repo, min_runs=min_runs)
        drafts += fix_drafts(calls, repo, resolved=resolved, min_runs=min_runs)
        _write_drafts(store, cluster, drafts, report, run_id=run_id, dry_run=dry_run, now=now)
        runs = sorted({c.run for c in calls} & ended)
        if runs and not dry_run:
            read = select_records(store, "session IN (SELECT unnest(?)) AND state = 'active'", [runs])
            report.dormant += set_state(
                store,
                settled_ids(read, ended),
                "dormant",
                reason=f"settled: the run ended and {cluster.key} was mined",
                run_id=run_id,
                now=now,
            )
    agents = sorted({agent for agent, _ in by_project})
    for agent in agents:
        mine = {repo: calls for (a, repo), calls in by_project.items() if a == agent}
        every = [c for calls in mine.values() for c in calls]
        cluster = calls_cluster("recovery:any project", agent, every, resolved)
        if cluster.signature in stored.get(cluster.key, set()):
            report.clusters_unchanged += 1
            continue
        drafts = shared_fix_drafts(mine, resolved=resolved, min_runs=min_runs)
        _write_drafts(store, cluster, drafts, report, run_id=run_id, dry_run=dry_run, now=now)


def _write_drafts(
    store: "Store",
    cluster: ClusterInput,
    drafts: list[Draft],
    report: RefineReport,
    *,
    run_id: str | None,
    dry_run: bool,
    now: dt.datetime,
) -> None:
    """Write one pass's drafts as the cluster's units and count them by method."""
    written = write_units(
        store, cluster, [(d, unit_row(d, cluster, now)) for d in drafts], report, run_id, dry_run, now
    )
    for row in written:
        report.units_by_method[row["method"]] = report.units_by_method.get(row["method"], 0) + 1


def _digest(store: "Store", cluster: ClusterInput, records: list[dict[str, Any]], report: RefineReport) -> Draft | None:
    """The cluster's digest over the members no other cluster's active digest quotes yet (records that
    stay active, like preferences, are re-clustered every cycle and would be quoted again and again)."""
    quoted: set[str] = set()
    for (source_ids,) in store.con.execute(
        f"SELECT source_ids FROM units WHERE {units.LIVE_SQL} AND agent = ? AND attribute = ? AND cluster_key <> ?",
        [cluster.agent, DIGEST_ATTRIBUTE, cluster.key],
    ).fetchall():
        quoted.update(json_ids(source_ids))
    members = [r for r in records if r["id"] not in quoted]
    if len(members) < store.config.refine.min_support:
        return None
    draft = digest_draft(members, quote_chars=store.config.refine.digest_quote_chars)
    reasons = check_digest(draft.statement or "", members) if draft else ["no member says anything"]
    if reasons:
        report.rejection_reasons.append(f"digest: {reasons[0][:160]}")
        return None
    return draft


class RefineStep:
    """Refinement inside a cycle: a model problem is reported and must not undo decay and pruning."""

    def run(self, store: "Store", ctx: "CycleContext") -> "StepReport":
        if not ctx.refine:
            return Skipped("refinement off (--no-refine)")
        started = time.perf_counter()
        try:
            return refine_clusters(
                store,
                ctx.llm,
                dry_run=False,
                run_id=ctx.run_id,
                max_llm_calls=ctx.max_llm_calls,
                now=ctx.now,
                full=ctx.full,
            )
        except ModelError as exc:
            return Failed(str(exc), seconds=round(time.perf_counter() - started, 3))
