#!/usr/bin/env python3
"""Random kill -9 during ingest, compaction, forget, restore and reindex, each followed by a rerun and a
consistency check.

    python scripts/kill_test.py --seed 7 --kills 20 --phase both
    python scripts/kill_test.py --seed 7 --kills 10 --phase forget,restore,reindex
    python scripts/kill_test.py --seed 7 --kills 10 --phase forget,restore --damaged-snapshot

Builds a store from slices of sample_logs. For each kill it starts `python -m expengine ... ingest`
(a new slice) or `compact` as a subprocess, SIGKILLs it after a seeded random delay, reruns the same
command to completion and checks the store with `check_store`. The delay is drawn inside the window
where the command writes: from just before its first write (half a second, or a tenth of a short run)
to its end, both measured on one clean calibration run. Prints a summary; exits 1 on any failure. The test suite runs a few kills through
`run_phase`, so the script and the suite check the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SAMPLE_LOGS = REPO / "sample_logs"
sys.path.insert(0, str(REPO / "bench"))
from common import english_logs  # noqa: E402  the benches' English-only selection, one embedder

QUERY = "the tool failed with an error, what fixed it"
# No model for refinement, and clustering on every cycle, so each compaction does real work fast.
FAST = ["--set", "llm.mode=template", "--set", "cluster.interval_new_memories=0"]
RUN_TIMEOUT = 600.0
POLL = 0.05
AGAIN = 0.3  # chance that a rerun is killed as well before one is let finish
IGNORED = (".lock", ".paused-after-")  # the lock is rewritten by every process, even a read


@dataclass
class Tally:
    phase: str
    kills: int = 0  # processes that were still running when SIGKILL fell
    missed: int = 0  # finished before the signal (another slice / run is tried)
    mid_write: int = 0  # killed after they had changed a file of the store
    reruns_killed: int = 0  # kills that fell on a rerun (counted in `kills` too)
    checks: int = 0  # reruns to completion, each followed by check_store
    healed: int = 0  # checks that found nothing wrong
    calibration_s: tuple[float, float] = (0.0, 0.0)  # first write, end of the clean run
    failures: list[str] = field(default_factory=list)


def make_slices(folder: Path, size: int, count: int) -> list[Path]:
    """`count` JSONL files of `size` lines, interleaving the English sample logs (wrapping around if needed)."""
    english = english_logs(SAMPLE_LOGS)
    sources = [p.read_text(encoding="utf-8").splitlines() for p in english]
    lines = [line for group in zip(*sources) for line in group]
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(count):
        path = folder / f"slice-{i:03d}.jsonl"
        chunk = [lines[(i * size + j) % len(lines)] for j in range(size)]
        path.write_text("\n".join(chunk) + "\n", encoding="utf-8")
        out.append(path)
    return out


def prepare_store(store: Path, slices: list[Path], embedder: Any) -> None:
    """Create the store with the slices' vectors already in its embedding cache: the commands under test
    then never load the model, so a run is short and most of it is spent writing."""
    from expengine import Engine
    from expengine.store.filters import sql_str

    with tempfile.TemporaryDirectory(prefix="expengine-warm-") as tmp:
        with Engine(store=Path(tmp), embedder=embedder) as warm:
            warm.ingest([str(p) for p in slices])
        with Engine(store=store, embedder=embedder) as engine:
            engine.store.con.execute(f"ATTACH {sql_str(str(Path(tmp) / 'expengine.duckdb'))} AS warm (READ_ONLY)")
            engine.store.con.execute("INSERT INTO embeddings SELECT * FROM warm.embeddings ON CONFLICT DO NOTHING")
            engine.store.con.execute("DETACH warm")


def slice_ids(path: Path) -> set[str]:
    return {json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


def fingerprint(store: Path) -> frozenset[tuple[str, int, int]]:
    """Every file of the store with its size and mtime: it changes when a process writes anything."""
    found = set()
    # os.walk skips a folder removed while we look (a restore renames its `.tmp-lance`); rglob raised
    for folder, _, files in os.walk(store):
        for name in files:
            path = Path(folder) / name
            try:
                if not name.startswith(IGNORED):
                    st = path.stat()
                    found.add((str(path.relative_to(store)), st.st_size, st.st_mtime_ns))
            except FileNotFoundError:  # removed while we looked
                continue
    return frozenset(found)


def command(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "expengine", "--store", str(store), "--wait", "120", *FAST, *args]


def env() -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }


def run_to_end(cmd: list[str], ok: tuple[int, ...] = (0,)) -> str | None:
    """Run a command to completion; the problem, or None when it exited with a code in `ok`."""
    done = subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    return None if done.returncode in ok else f"exit {done.returncode}: {done.stderr.strip()[-400:]}"


@dataclass
class Step:
    """One command to kill and rerun, and what the store must hold once it has run to the end."""

    argv: list[str]
    expected: set[str]  # the raw record ids afterwards
    ok: tuple[int, ...] = (0,)  # exit codes of a successful rerun
    gone: list[str] = field(default_factory=list)  # text that no file of the store may hold afterwards


def steps(phase: str, store: Path, slices: list[Path], ingested: set[str], embedder: Any):
    """The endless sequence of commands a phase kills: each `ingest` a new slice; `compact`; `reindex`;
    `forget` a fresh session (ingested here first, each record carrying a marker no file may keep);
    `restore` alternating between two snapshots that differ by a slice."""
    from expengine import Engine

    if phase == "ingest":
        for path in slices[:-5]:  # the last five are the other phases' (base, restore)
            yield Step(command(store, "ingest", str(path), "--json"), ingested | slice_ids(path))
    elif phase in ("compact", "reindex"):
        while True:
            yield Step(command(store, phase, "--json"), set(ingested))
    elif phase == "forget":
        for n in range(10_000):
            session, marker = f"kill-forget-{n}", f"forgetmarker{n:05d}zq"
            events = [
                {
                    "id": f"{session}-{i}",
                    "ts": "2026-03-01T09:00:00Z",
                    "kind": "note",
                    "agent": "bot",
                    "session": session,
                    "content": f"private note {i} {marker}",
                }
                for i in range(5)
            ]
            log = store.parent / f"{session}.jsonl"
            log.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
            with Engine(store=store, embedder=embedder) as engine:
                engine.ingest([str(log)])
                engine.snapshot(reason="kill test")  # so forget has snapshots to clean as well
            # a rerun after a kill that committed finds nothing left to forget: exit 5 is then success
            yield Step(
                command(store, "forget", "--session", session, "--yes", "--json"), set(ingested), (0, 5), [marker]
            )
    elif phase == "restore":
        with Engine(store=store, embedder=embedder) as engine:
            first = engine.snapshot(reason="kill test A").id
            engine.ingest([str(slices[-5])])
            second = engine.snapshot(reason="kill test B").id
        ids = {first: set(ingested), second: ingested | slice_ids(slices[-5])}
        damaged = damaged_snapshots(store)
        for n in range(10_000):
            if damaged and n % 3 == 2:  # refused (exit 3), the store left as the last restore made it
                yield Step(command(store, "restore", damaged[n % len(damaged)], "--json"), set(ingested), (3,))
                continue
            target = (first, second)[n % 2]
            yield Step(command(store, "restore", target, "--json"), ids[target])
    else:
        raise ValueError(f"unknown phase {phase!r}")


def damage_a_snapshot(store: Path, embedder: Any) -> str:
    """A snapshot whose own largest chunk is cut in half (a full disk, a bad copy): restore must refuse it in
    one line, forget must pass over it, and neither may leave a temporary file."""
    from expengine import Engine
    from expengine.lifecycle.snapshot import own_chunks

    with Engine(store=store, embedder=embedder) as engine:
        engine.store.con.execute("UPDATE records SET weight = weight * 0.999")  # a column chunk of its own
        snapshot_id = engine.snapshot(reason="kill test: to be damaged").id
    folder = store / "snapshots" / snapshot_id
    chunk = own_chunks(folder)[0]
    chunk.write_bytes(chunk.read_bytes()[: chunk.stat().st_size // 2])
    (folder / "DAMAGED").touch()
    return snapshot_id


def damaged_snapshots(store: Path) -> list[str]:
    return sorted(p.parent.name for p in (store / "snapshots").glob("*/DAMAGED"))


def files_holding(store: Path, text: str) -> list[str]:
    """Files whose bytes hold `text`, a snapshot's Parquet chunk read as its values (it is compressed);
    the chunks of a snapshot damaged on purpose are read as bytes, as its `.xz` was (forget passes over it)."""
    import pyarrow.parquet as pq

    from expengine.store.chunks import snapshot_files

    passed_over = {f for d in damaged_snapshots(store) for f in snapshot_files(store / "snapshots" / d)}

    def readable(path: Path) -> bytes:
        data = path.read_bytes()
        if path.suffix != ".parquet" or path in passed_over:
            return data
        return data + str(pq.read_table(path).to_pylist()).encode()

    needle = text.encode()
    return sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file() and needle in readable(p))


def calibrate(cmd: list[str], store: Path, ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """Seconds to the first change of a store file, and to the end, of one clean run."""
    before = fingerprint(store)
    started = time.monotonic()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errors:  # a file, not a pipe nobody reads while polling
        proc = subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=subprocess.DEVNULL, stderr=errors, text=True)
        first_write = None
        while proc.poll() is None:
            if first_write is None and fingerprint(store) != before:
                first_write = time.monotonic() - started
            time.sleep(POLL)
        total = time.monotonic() - started
        if proc.returncode not in ok:
            errors.seek(0)
            raise RuntimeError(f"calibration run failed: {errors.read()[-400:]}")
    return (first_write if first_write is not None else 0.0), total


def kill_after(cmd: list[str], store: Path, delay: float) -> tuple[bool, bool, float]:
    """Start `cmd`, SIGKILL it after `delay` s; returns (it was still running, it had written to the store,
    seconds it ran)."""
    before = fingerprint(store)
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=delay)
        return False, True, time.monotonic() - started
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return True, fingerprint(store) != before, delay


def kill_paused_worker(run: Any, marker: Path, timeout: float = 300.0) -> tuple[int, Any]:
    """Run the fleet command `run` on a thread; when a Ray worker writes its pid to `marker` (the pause
    hook, `EXPENGINE_TEST_PAUSE_AFTER`), SIGKILL it. Returns the killed pid and the command's report,
    once Ray's retry of the killed task finished it (the tests and bench/fleet.py's fault runs)."""
    import threading

    reports: list[Any] = []
    driver = threading.Thread(target=lambda: reports.append(run()))
    driver.start()
    deadline = time.monotonic() + timeout
    while not (marker.exists() and marker.read_text().strip()):  # the worker's pid; then it blocks
        if not driver.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"no worker reached the pause point {marker.name}")
        time.sleep(0.05)
    killed = int(marker.read_text())
    os.kill(killed, signal.SIGKILL)
    driver.join(timeout=timeout)
    if driver.is_alive() or not reports:
        raise RuntimeError("the fleet command did not finish after its worker was killed")
    return killed, reports[0]


def check_store(store: Path, expected_ids: set[str], embedder: Any = None) -> list[str]:
    """What is wrong with a store at rest, read straight from its files (nothing healed first), then a query.

    No duplicate ids in DuckDB (records, units) or LanceDB (memories, units); the raw records are exactly
    `expected_ids`; LanceDB holds every active and dormant memory with its state and nothing else (archived
    memories, and a rule's sources waiting out the observation window, leave it), and every active unit; every unit's sources exist; no journalled index write is
    left; no compaction is left 'running'; and a query answers with JSON."""
    import duckdb

    from expengine.store.index import MEMORIES, UNITS, Index
    from expengine.store.vocabulary import INDEXED_RECORDS_SQL

    problems: list[str] = []
    try:
        con = duckdb.connect(str(store / "expengine.duckdb"), read_only=True)
    except duckdb.Error as exc:  # reported beside the rerun's failure, which it usually explains
        return [f"the database does not open: {exc}"]
    try:
        for table in ("records", "units"):
            dupes = con.execute(f"SELECT id FROM {table} GROUP BY id HAVING count(*) > 1 LIMIT 3").fetchall()
            if dupes:
                problems.append(f"duplicate ids in DuckDB {table}: {dupes}")
        raw = {r[0] for r in con.execute("SELECT id FROM records").fetchall()}
        if raw != expected_ids:
            problems.append(
                f"raw count {len(raw)} != {len(expected_ids)} ingested "
                f"(missing {sorted(expected_ids - raw)[:3]}, extra {sorted(raw - expected_ids)[:3]})"
            )
        # what LanceDB must hold: live records, less a rule's sources waiting out the observation window
        states = dict(con.execute(f"SELECT id, state FROM records WHERE {INDEXED_RECORDS_SQL}").fetchall())
        units = {r[0] for r in con.execute("SELECT id FROM units WHERE status = 'active'").fetchall()}
        for uid, sources in con.execute("SELECT id, source_ids FROM units").fetchall():
            lost = [s for s in json.loads(sources or "[]") if s not in raw]
            if lost:
                problems.append(f"unit {uid} cites missing records {lost[:3]}")
        pending = con.execute("SELECT count(*) FROM pending_index").fetchall()[0][0]
        if pending:
            problems.append(f"{pending} index writes still pending")
        running = con.execute("SELECT id FROM runs WHERE status = 'running'").fetchall()
        if running:
            problems.append(f"compaction left running: {running}")
    finally:
        con.close()
    memories, unit_table = (Index(store / "lance").table(name) for name in (MEMORIES, UNITS))
    indexed = memories.to_arrow().select(["id", "state"]).to_pylist() if memories is not None else []
    indexed_units = unit_table.to_arrow().column("id").to_pylist() if unit_table is not None else []
    for name, ids in (("memories", [r["id"] for r in indexed]), ("units", indexed_units)):
        if len(ids) != len(set(ids)):
            problems.append(f"duplicate ids in LanceDB {name}: {len(ids) - len(set(ids))}")
    lance_states = {r["id"]: r["state"] for r in indexed}
    if lance_states != states:
        wrong = [i for i in states if lance_states.get(i) != states[i]] + [i for i in lance_states if i not in states]
        problems.append(f"LanceDB memories disagree with DuckDB for {len(wrong)} ids, e.g. {wrong[:3]}")
    if set(indexed_units) != units:
        problems.append(f"LanceDB units {len(set(indexed_units))} != {len(units)} active units in DuckDB")
    problems += _query_answers(store, embedder)
    return problems


def _query_answers(store: Path, embedder: Any) -> list[str]:
    """A query through the Engine (opened after the raw checks, since opening heals) gives JSON."""
    from expengine import Engine

    try:
        with Engine(store=store, embedder=embedder, lock_timeout=60) as engine:
            answer = json.loads(json.dumps(engine.query(QUERY, touch=False).to_dict(), default=str))
    except Exception as exc:  # noqa: BLE001 - any failure to answer is what we look for
        return [f"query failed: {type(exc).__name__}: {exc}"]
    return [] if isinstance(answer, dict) else ["query did not answer with a JSON object"]


def run_phase(
    store: Path,
    phase: str,
    *,
    kills: int,
    rng: random.Random,
    slices: list[Path],
    ingested: set[str],
    embedder: Any = None,
    log=print,
) -> Tally:
    """`kills` random SIGKILLs of the phase's command (see `steps`), each rerun to the end and checked;
    `ingested` is kept equal to the raw ids the store must hold."""
    tally = Tally(phase=phase)
    sequence = steps(phase, store, slices, ingested, embedder)

    def settle(step: Step) -> None:
        ingested.clear()
        ingested.update(step.expected)

    first = next(sequence)
    first_write, total = calibrate(first.argv, store, first.ok)
    settle(first)
    # from just before the first write (half a second, or a tenth of a short run such as a restore's)
    low, high = max(0.0, first_write - min(0.5, 0.1 * total)), total
    tally.calibration_s = (round(first_write, 2), round(total, 2))
    log(f"{phase}: calibration run wrote after {first_write:.2f} s and ended after {total:.2f} s")
    attempts = 0
    while tally.kills < kills and attempts < 3 * kills:
        attempts += 1
        current = next(sequence)
        delay = rng.uniform(low, high)
        killed, wrote, ran = kill_after(current.argv, store, delay)
        if not killed:
            settle(current)
            tally.missed += 1
            # runs got faster than the calibration (clustering less, a less loaded machine): follow them,
            # keeping the window's start at the same share of the run
            low, high = min(low, ran * low / high), ran
            continue
        tally.kills += 1
        tally.mid_write += wrote
        while tally.kills < kills and rng.random() < AGAIN:  # kill the rerun too, e.g. while it recovers
            killed, wrote_again, _ = kill_after(current.argv, store, rng.uniform(low, high))
            if not killed:
                break
            tally.kills += 1
            tally.mid_write += wrote_again
            tally.reruns_killed += 1
        tally.checks += 1
        problems = []
        rerun_started = time.monotonic()
        rerun = run_to_end(current.argv, current.ok)
        high = max(low + POLL, time.monotonic() - rerun_started)
        settle(current)
        if rerun:
            problems.append(f"rerun failed: {rerun}")
        problems += check_store(store, ingested, embedder)
        left = [str(p.relative_to(store)) for p in store.rglob(".tmp-*")]
        if left:
            problems.append(f"temporary files left: {left[:3]}")
        for text in current.gone:
            holding = files_holding(store, text)
            if holding:
                problems.append(f"forgotten text {text!r} is still in {holding[:3]}")
        where = "mid-write" if wrote else "before any write"
        if problems:
            tally.failures += [f"{phase} kill {tally.kills} at {delay:.2f} s ({where}): {p}" for p in problems]
            log(f"  kill {tally.kills} at {delay:.2f} s ({where}): FAILED {problems}")
        else:
            tally.healed += 1
            log(
                f"  kill {tally.kills} at {delay:.2f} s ({where}): healed"
                + (f" (after {tally.reruns_killed} killed reruns so far)" if tally.reruns_killed else "")
            )
    return tally


PHASES = ("ingest", "compact", "forget", "restore", "reindex")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kills", type=int, default=20, help="kills per phase")
    parser.add_argument(
        "--phase", default="both", help=f"comma-separated, in order: {', '.join(PHASES)}; both = ingest,compact"
    )
    parser.add_argument("--slice", type=int, default=50, help="lines of sample_logs per ingest")
    parser.add_argument("--store", type=Path, help="work folder (default: a temporary one, removed at the end)")
    parser.add_argument(
        "--damaged-snapshot", action="store_true", help="cut a snapshot's .xz in half first (restore, forget)"
    )
    args = parser.parse_args()
    phases = ["ingest", "compact"] if args.phase == "both" else args.phase.split(",")
    if not set(phases) <= set(PHASES):
        parser.error(f"--phase takes {', '.join(PHASES)} or both")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(REPO))
    from expengine.models.embedder import get_embedder

    started = time.monotonic()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="expengine-kill-") as tmp:
        work = args.store or Path(tmp)
        store = work / "store"
        slices = make_slices(work / "slices", args.slice, 3 * args.kills + 6)
        ingested: set[str] = set()
        embedder = get_embedder()
        prepare_store(store, slices, embedder)
        if phases[0] != "ingest":  # a store to work on: a few slices ingested without kills
            base = slices[-4:]
            if run_to_end(command(store, "ingest", *map(str, base), "--json")):
                print("could not ingest the base slices", file=sys.stderr)
                return 1
            ingested |= set().union(*map(slice_ids, base))
        tallies = []
        for phase in phases:
            if args.damaged_snapshot and phase in ("forget", "restore"):
                print(f"{phase}: damaged snapshot {damage_a_snapshot(store, embedder)}")
            tallies.append(
                run_phase(store, phase, kills=args.kills, rng=rng, slices=slices, ingested=ingested, embedder=embedder)
            )
    seconds = time.monotonic() - started
    summary = {
        "seed": args.seed,
        "seconds": round(seconds, 1),
        "phases": [{k: v for k, v in t.__dict__.items()} for t in tallies],
    }
    print(json.dumps(summary, indent=2))
    return 1 if any(t.failures or t.kills < args.kills for t in tallies) else 0


if __name__ == "__main__":
    sys.exit(main())
