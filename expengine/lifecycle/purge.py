"""Purge (mark → observe → purge) and `forget` (real deletion, for privacy requests).

Purge only moves records out of the fast store: a dormant record below θ_purge that was marked
before the observation window and not accessed within it becomes `archived` (gone from LanceDB,
kept in DuckDB). `forget` is the only code path that deletes what a user ingested.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import duckdb
import pyarrow as pa

from ..errors import InputError, NotFoundError
from ..results import Result
from ..store import query_log, units
from ..store.db import DB_FILE, SCRUB_PENDING, arrow_view, in_ids, json_ids, utcnow
from ..store.derived_runs import forget_derived
from ..store.index import MEMORIES, UNITS
from ..store.scrub import rewrite_database, scrub_index
from ..store.state import set_state
from ..store.vocabulary import OBSERVED_SQL
from .common import examples, sql_float
from .snapshot import forget_in_snapshots, list_snapshots

if TYPE_CHECKING:
    from ..store.store import Store
    from .cycle import CycleContext

PREVIEW = 10
WORD = re.compile(r"\w{4,}")  # a word long enough to identify what a text says
UNIT_TEXT = "concat_ws(' ', text, condition, action, expected_outcome, pitfall, statement, subject, attribute)"


@dataclass
class PurgeReport(Result):
    archived: int = 0
    waiting: int = 0  # dormant and light enough (or refined), but still inside the observation window
    log_entries_pruned: int = 0  # query-log entries older than query.log_days
    examples: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        return f"{self.archived} archived, {self.waiting} waiting out the observation window"


@dataclass
class ForgetResult(Result):
    records: int = 0
    embeddings: int = 0
    history: int = 0
    units_updated: int = 0
    units_deleted: int = 0
    query_log: int = 0  # query-log entries deleted (their session is gone) or rewritten without the ids
    snapshots: int = 0  # snapshots rewritten without the records (a dry run: snapshots that would be)
    snapshots_damaged: list[str] = field(default_factory=list)  # unreadable snapshots left as they are, and why
    rejects: int = 0  # quarantined lines deleted (`forget --rejects`)
    dry_run: bool = False
    ids: list[str] = field(default_factory=list)
    preview: list[dict[str, Any]] = field(default_factory=list)  # the first records, for the confirmation


def purge(store: "Store", *, dry_run: bool, run_id: str | None = None, now: dt.datetime | None = None) -> PurgeReport:
    started = time.perf_counter()
    cfg = store.config.decay
    now = now or utcnow()
    cutoff = now - dt.timedelta(hours=cfg.observation_window_hours)
    refined = OBSERVED_SQL
    light = (
        f"state = 'dormant' AND NOT pinned AND NOT protected AND (weight < {sql_float(cfg.theta_purge)} OR {refined})"
    )
    due = store.con.execute(
        f"""SELECT id, text, weight, {refined} FROM records WHERE {light}
            AND marked_at IS NOT NULL AND marked_at < ? AND (last_access IS NULL OR last_access < ?) ORDER BY id""",
        [cutoff, cutoff],
    ).fetchall()
    total = store.con.execute(f"SELECT count(*) FROM records WHERE {light}").fetchall()[0][0]
    report = PurgeReport(
        archived=len(due),
        waiting=int(total) - len(due),
        examples=examples(due, lambda r: {"id": r[0], "text": r[1], "weight": round(r[2], 4)}),
    )
    if not dry_run:
        untouched = f"untouched for {cfg.observation_window_hours} h"
        for was_refined, why in ((False, f"dormant, weight < {cfg.theta_purge}"), (True, "refined into a unit")):
            ids = [r[0] for r in due if bool(r[3]) == was_refined]
            set_state(store, ids, "archived", reason=f"purge: {why}, {untouched}", run_id=run_id, now=now)
        report.log_entries_pruned = query_log.prune(store, before=now - dt.timedelta(days=store.config.query.log_days))
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def parse_before(value: dt.datetime | str | None) -> dt.datetime | None:
    """`--before` as a naive UTC datetime (how record times are stored); a date means its midnight."""
    if value is None or isinstance(value, dt.datetime):
        moment = value
    else:
        try:
            moment = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InputError(
                f"--before expects an ISO date or time, got {value!r}",
                hint="e.g. --before 2026-01-31 or --before 2026-01-31T12:00:00Z",
            ) from None
    if moment is not None and moment.tzinfo is not None:
        moment = moment.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return moment


def select_records(
    store: "Store",
    *,
    ids: list[str] | None = None,
    sessions: list[str] | None = None,
    agents: list[str] | None = None,
    before: dt.datetime | str | None = None,
    users: list[str] | None = None,
) -> list[str]:
    """Ids of the records every given filter matches (they combine with AND); naming a missing id is an error."""
    moment = parse_before(before)
    if not (ids or sessions or agents or moment or users):
        raise InputError(
            "say what to forget: record ids, --ids-from, --session, --agent, --user or --before",
            hint="e.g. expengine forget --session s1, or expengine forget rec-1 rec-2",
        )
    con = store.con
    clauses: list[str] = []
    params: list[Any] = []
    if ids:
        wanted = list(dict.fromkeys(ids))
        named, named_ids = in_ids("id", wanted)
        found = {r[0] for r in con.execute(f"SELECT id FROM records WHERE {named}", named_ids).fetchall()}
        missing = [i for i in wanted if i not in found]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise NotFoundError(f"no record with id {missing[0]!r}{more}", hint="see `expengine show ID`")
        clauses.append("id IN (SELECT unnest(?))")
        params.append(wanted)
    for column, values in (("session", sessions), ("agent", agents), ("user", users)):
        if values:
            clauses.append(f"{column} IN (SELECT unnest(?))")
            params.append(list(values))
    if moment:
        clauses.append("ts < ?")
        params.append(moment)
    where = " AND ".join(clauses)
    return [r[0] for r in con.execute(f"SELECT id FROM records WHERE {where} ORDER BY id", params).fetchall()]


def _words(texts: Iterable[str | None]) -> set[str]:
    return {w for t in texts if t for w in WORD.findall(t.lower())}


def _drop_mentions(value: Any, gone: set[str], quotes: Callable[[str], bool]) -> Any:
    """A run report without the examples that name a forgotten record or unit, or quote their text (a
    string in it with a word only they had: it becomes None)."""
    if isinstance(value, dict):
        return {k: _drop_mentions(v, gone, quotes) for k, v in value.items()}
    if isinstance(value, list):
        return [
            _drop_mentions(v, gone, quotes)
            for v in value
            if not (isinstance(v, (dict, list)) and _mentions(v, gone, quotes))
        ]
    return None if isinstance(value, str) and quotes(value) else value


def _mentions(value: Any, gone: set[str], quotes: Callable[[str], bool]) -> bool:
    if isinstance(value, dict):
        return any(_mentions(v, gone, quotes) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, gone, quotes) for v in value)
    return isinstance(value, str) and (value in gone or quotes(value))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def _quoting(con: duckdb.DuckDBPyConnection, secret_words: set[str], texts: list[str]) -> Callable[[str], bool]:
    """Whether a text quotes what only the forgotten records said: it has a word of theirs that no record
    or unit left in the store has (checked only for the words `texts` share with them)."""
    candidates = sorted(_words(texts) & secret_words)
    rare: set[str] = set()
    if candidates:
        rare = {
            w
            for (w,) in con.execute(
                "SELECT w FROM unnest(?) AS t(w) WHERE NOT EXISTS "
                "(SELECT 1 FROM records WHERE contains(lower(text), w)) AND NOT EXISTS "
                "(SELECT 1 FROM units WHERE contains(lower(text), w))",
                [candidates],
            ).fetchall()
        }
    return lambda text: bool(rare) and bool(_words([text]) & rare)


def forget_rows(con: duckdb.DuckDBPyConnection, targets: list[str]) -> tuple[ForgetResult, list[str]]:
    """Delete the records and every row derived from them on one connection (the live store or a snapshot).

    Runs inside the caller's transaction. A unit that cites a forgotten record loses it from its sources,
    and is deleted when no source is left or when its wording has words only the forgotten records had
    (it would still quote them). Returns the counts and the ids of the deleted units."""
    from ..store.embeddings import text_hash

    gone = set(targets)
    result = ForgetResult(ids=targets)
    with arrow_view(con, "forget_ids", pa.table({"id": targets})):
        forgotten = con.execute(
            "SELECT text, content, tool_args, tool_result, tool_error, goal_description, goal_id FROM records "
            "WHERE id IN (SELECT id FROM forget_ids)"
        ).fetchall()
        sessions = [
            s
            for (s,) in con.execute(
                "SELECT DISTINCT session FROM records WHERE id IN (SELECT id FROM forget_ids)"
            ).fetchall()
            if s
        ]
        result.records = len(forgotten)
        result.history = con.execute(
            "SELECT count(*) FROM history WHERE item_id IN (SELECT id FROM forget_ids)"
        ).fetchall()[0][0]
        con.execute("DELETE FROM records WHERE id IN (SELECT id FROM forget_ids)")
        con.execute("DELETE FROM history WHERE item_id IN (SELECT id FROM forget_ids)")
        con.execute("DELETE FROM cluster_members WHERE record_id IN (SELECT id FROM forget_ids)")
        con.execute("DELETE FROM pending_index WHERE id IN (SELECT id FROM forget_ids)")
        forget_derived(con)  # what was distilled from the forgotten records: rebuilt by the next cycle
        con.execute("UPDATE records SET merged_into = NULL WHERE merged_into IN (SELECT id FROM forget_ids)")
    secret_words = _words(w for row in forgotten for w in row[:6])
    hashes = {text_hash(row[0]) for row in forgotten}
    for rid, merged in con.execute("SELECT id, merged_ids FROM records WHERE merged_ids IS NOT NULL").fetchall():
        kept = [m for m in json_ids(merged) if m not in gone]
        if len(kept) != len(json_ids(merged)):
            con.execute(
                "UPDATE records SET merged_ids = ?, merged_count = ? WHERE id = ?",
                [json.dumps(kept), 1 + len(kept), rid],
            )
    emptied: list[str] = []
    for uid, sources, text in con.execute(f"SELECT id, source_ids, {UNIT_TEXT} FROM units").fetchall():
        cited = json_ids(sources)
        if not gone & set(cited):
            continue
        left = [s for s in cited if s not in gone]
        where, params = in_ids("id", left)
        kept_words = _words(t for (t,) in con.execute(f"SELECT text FROM records WHERE {where}", params).fetchall())
        if not left or (_words([text]) & secret_words) - kept_words:
            emptied.append(uid)
            hashes.add(text_hash(con.execute("SELECT text FROM units WHERE id = ?", [uid]).fetchall()[0][0]))
        else:
            units.drop_sources(con, uid, left)
            result.units_updated += 1
    result.history += units.delete(con, emptied)
    result.units_deleted = len(emptied)
    still, still_params = in_ids("session", sorted(sessions))
    sessions_left = {
        s for (s,) in con.execute(f"SELECT DISTINCT session FROM records WHERE {still}", still_params).fetchall()
    }
    reports = [
        (run_id, json.loads(r))
        for run_id, r in con.execute("SELECT id, report FROM runs WHERE report IS NOT NULL").fetchall()
    ]
    quotes = _quoting(con, secret_words, query_log.texts(con) + [t for _, data in reports for t in _strings(data)])
    result.query_log = query_log.forget_rows(
        con, gone, set(emptied), [s for s in sessions if s not in sessions_left], quotes=quotes
    )
    for goal_id in {row[6] for row in forgotten if row[6]}:
        left_in_goal, description = con.execute(
            "SELECT count(*), any_value(goal_description) FROM records WHERE goal_id = ?", [goal_id]
        ).fetchall()[0]
        if not left_in_goal:
            con.execute("DELETE FROM goals WHERE goal_id = ?", [goal_id])
        else:
            con.execute("UPDATE goals SET description = ? WHERE goal_id = ?", [description, goal_id])
    texts = con.execute("SELECT text FROM records UNION ALL SELECT text FROM units").fetchall()
    orphans = sorted(hashes - {text_hash(t) for (t,) in texts})
    if orphans:
        result.embeddings = con.execute(
            "SELECT count(*) FROM embeddings WHERE text_hash IN (SELECT unnest(?))", [orphans]
        ).fetchall()[0][0]
        con.execute("DELETE FROM embeddings WHERE text_hash IN (SELECT unnest(?))", [orphans])
    for run_id, data in reports:
        cleaned = _drop_mentions(data, gone | set(emptied), quotes)
        if cleaned != data:
            con.execute("UPDATE runs SET report = ? WHERE id = ?", [json.dumps(cleaned, default=str), run_id])
    return result, emptied


def forget(
    store: "Store",
    *,
    ids: list[str] | None = None,
    sessions: list[str] | None = None,
    agents: list[str] | None = None,
    before: dt.datetime | str | None = None,
    users: list[str] | None = None,
    dry_run: bool = False,
) -> ForgetResult:
    """Delete records for real, with every row derived from them, from the store and from every snapshot.

    Snapshots are cleaned first: if the process is killed, the records are still in the live store and
    running `forget` again finishes the job. The live deletion journals the ids in `pending_index`, so a
    kill before LanceDB is updated is healed when the store is next opened. `users`: their records, and
    what only a user filter finds (lifecycle/erase_user.py)."""
    from .erase_user import user_forget_rows

    targets = select_records(store, ids=ids, sessions=sessions, agents=agents, before=before, users=users)
    rows = user_forget_rows(users, forget_rows, _words) if users else forget_rows
    if not targets:
        return ForgetResult(dry_run=dry_run)
    con = store.con
    shown, shown_ids = in_ids("id", targets)
    preview = examples(
        con.execute(
            f"SELECT id, agent, session, ts, text FROM records WHERE {shown} ORDER BY id", shown_ids
        ).fetchall(),
        lambda r: {"id": r[0], "agent": r[1], "session": r[2], "ts": r[3].isoformat() if r[3] else None, "text": r[4]},
        limit=PREVIEW,
    )
    snapshots, damaged = 0, list[str]()
    con.execute("BEGIN")
    try:
        result, emptied = rows(con, targets)
        if not dry_run:
            con.execute("INSERT INTO pending_index SELECT unnest(?), 'memory' ON CONFLICT DO NOTHING", [targets])
            con.execute("INSERT INTO pending_index SELECT unnest(?), 'unit' ON CONFLICT DO NOTHING", [emptied])
            snapshots, damaged = forget_in_snapshots(store, targets, rows)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if not dry_run:
        (store.dir / SCRUB_PENDING).touch()  # before the commit: a kill after it leaves the old bytes behind
    con.execute("ROLLBACK" if dry_run else "COMMIT")
    result.preview, result.dry_run = preview, dry_run
    result.snapshots = len(list_snapshots(store)) if dry_run else snapshots
    result.snapshots_damaged = damaged
    if dry_run:
        return result
    store.index.delete(MEMORIES, targets)
    units.unindex(store.index, emptied)
    con.execute("DELETE FROM pending_index WHERE id IN (SELECT unnest(?))", [targets + emptied])
    store.history_log("forget", "forget", {"records": result.records, "units_deleted": emptied})
    finish_forget(store)
    return result


def finish_forget(store: "Store") -> None:
    """Leave no copy of forgotten rows in the store's files (see store/scrub.py), then drop the mark."""
    scrub_index(store.index, [MEMORIES, UNITS])
    live = store.con.execute(
        "SELECT substr(sha256(text), 1, 32) FROM records UNION SELECT substr(sha256(text), 1, 32) FROM units"
    ).fetchall()
    store.recent_vectors.keep_only({h for (h,) in live})
    store.close()
    rewrite_database(store.dir / DB_FILE)
    store.reopen()
    (store.dir / SCRUB_PENDING).unlink(missing_ok=True)


def forget_rejects(store: "Store", *, dry_run: bool = False) -> ForgetResult:
    """Delete every quarantined input line from the store and every snapshot, leaving no copy in the
    files (a reject keeps a line's raw text, a leaked secret's too). Killed midway, running it again
    finishes the job."""
    count = int(store.con.execute("SELECT count(*) FROM rejects").fetchall()[0][0])
    if dry_run or not count:
        return ForgetResult(rejects=count, dry_run=dry_run, snapshots=len(list_snapshots(store)) if dry_run else 0)

    def delete_rejects(con: duckdb.DuckDBPyConnection, _: list[str]) -> tuple[None, list[str]]:
        con.execute("DELETE FROM rejects")
        return None, []

    snapshots, damaged = forget_in_snapshots(store, [], delete_rejects)
    store.con.execute("DELETE FROM rejects")
    store.history_log("forget", "forget", {"rejects": count})
    store.close()
    rewrite_database(store.dir / DB_FILE)
    store.reopen()
    return ForgetResult(rejects=count, snapshots=snapshots, snapshots_damaged=damaged)


class PurgeStep:
    def run(self, store: "Store", ctx: "CycleContext") -> PurgeReport:
        return purge(store, dry_run=False, run_id=ctx.run_id, now=ctx.now)
