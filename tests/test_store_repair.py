"""A damaged, loose or read-only store: detected at open with exit 3 and the fix, repaired from the newest
whole snapshot (never wiped), private to its owner, and readable where it cannot be written."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import damage_snapshot

from expengine.errors import StoreError
from expengine.store.db import DB_FILE, LANCE_DIR, StoreLock

REPO = Path(__file__).resolve().parents[1]
NO_WRITE_CAPS = "-dac_override,-dac_read_search,-fowner"  # root without these obeys file permissions


def event(n: int, text: str) -> dict:
    return {"id": f"e{n}", "ts": f"2026-03-01T09:{n:02d}:00Z", "kind": "message", "role": "user", "content": text}


FIRST = [event(n, f"the weather in city {n} is sunny and warm") for n in range(12)]
LATER = [event(40 + n, f"flight {n} to Oslo was delayed by snow") for n in range(3)]


def cli(store: Path, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`python -m expengine` as a user runs it."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", NO_COLOR="1", PYTHONPATH=str(REPO))
    return subprocess.run(
        [*prefix, sys.executable, "-m", "expengine", "--store", str(store), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def one_error_line(done: subprocess.CompletedProcess, code: int, *words: str) -> str:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and all(w in errors[0] for w in words), done.stderr
    return errors[0]


@pytest.fixture
def snapshotted(make_engine, write_jsonl, tmp_path):
    """A store with a snapshot of FIRST, then LATER ingested after it; closed. Returns (store, later log)."""
    store = tmp_path / "store"
    engine = make_engine(store=store)
    engine.ingest([write_jsonl("first.jsonl", FIRST)])
    engine.snapshot(reason="test")
    later = write_jsonl("later.jsonl", LATER)
    engine.ingest([later])
    engine.close()
    return store, later


def cut(path: Path, share: float) -> None:
    os.truncate(path, int(path.stat().st_size * share))


def tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


# --- damage is detected at open -----------------------------------------------------------------------------
# A small store's file ends in free blocks, so a cut that only removes them loses nothing and is no damage
# (every table still reads back whole); these cuts reach the data.
@pytest.mark.parametrize("share", [0.5, 0.75])
@pytest.mark.parametrize(
    "command", [["stats"], ["query", "weather", "--no-touch"], ["ingest", "-"], ["reindex"], ["snapshots"]]
)
def test_a_cut_short_database_is_exit_3_with_the_fix_and_keeps_the_index(snapshotted, share, command):
    store, _ = snapshotted
    cut(store / DB_FILE, share)
    lance = tree_bytes(store / LANCE_DIR)
    line = one_error_line(cli(store, *command), StoreError.exit_code, "is damaged", "expengine repair")
    assert str(store / DB_FILE) in line
    assert tree_bytes(store / LANCE_DIR) == lance  # nothing was dropped, reindex included


def test_reindex_reads_the_source_of_truth_before_it_drops_the_index(make_engine, write_jsonl, monkeypatch):
    engine = make_engine()
    engine.ingest([write_jsonl("first.jsonl", FIRST)])
    before = engine.stats().indexed_memories
    assert before == len(FIRST)

    def unreadable(*args, **kwargs):
        raise StoreError("a block of the database cannot be read")

    monkeypatch.setattr("expengine.store.reindex.unit_rows", unreadable)  # read after the memories
    with pytest.raises(StoreError):
        engine.reindex()
    monkeypatch.undo()
    assert engine.stats().indexed_memories == before


def test_reindex_in_small_chunks_gives_the_same_index(make_engine, write_jsonl, monkeypatch):
    """Rebuild reads, embeds and writes `reindex.CHUNK` rows at a time: a chunk of 2 changes nothing."""
    from expengine.store.index import MEMORIES

    engine = make_engine()
    engine.ingest([write_jsonl("first.jsonl", FIRST + LATER)])
    ids = [r[0] for r in engine.store.con.execute("SELECT id FROM records").fetchall()]

    def index_state() -> tuple[dict[str, list[float]], int]:
        vectors = engine.store.index.vectors(MEMORIES, ids)
        return {k: [round(float(x), 5) for x in v] for k, v in vectors.items()}, engine.stats().indexed_memories

    engine.reindex()
    whole = index_state()
    monkeypatch.setattr("expengine.store.reindex.CHUNK", 2)
    engine.reindex()
    assert index_state() == whole and len(whole[0]) == whole[1] == len(ids) > 2


# --- repair, not wipe ---------------------------------------------------------------------------------------
def test_repair_puts_the_newest_whole_snapshot_back_and_lists_what_to_ingest_again(snapshotted, make_engine):
    store, later = snapshotted
    cut(store / DB_FILE, 0.75)
    done = cli(store, "repair", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["repaired"] is True and result["reingest"] == [str(Path(later).resolve())]
    assert Path(result["damaged_copy"]).exists()  # the damaged file is kept, never deleted
    engine = make_engine(store=store)
    assert engine.stats().raw == len(FIRST)
    again = engine.ingest(result["reingest"])  # what the repair says to run
    assert again.stored == len(LATER)
    everything = engine.ingest([str(Path(later).parent / "first.jsonl"), later])
    assert everything.stored == 0 and engine.stats().raw == len(FIRST) + len(LATER)  # nothing doubles
    assert engine.stats().indexed_memories == len(FIRST) + len(LATER)


def test_repair_passes_over_a_damaged_snapshot_and_leaves_a_whole_store_alone(snapshotted, make_engine):
    store, _ = snapshotted
    engine = make_engine(store=store)
    newest = engine.snapshot(reason="second").id
    engine.close()
    healthy = cli(store, "repair")
    assert healthy.returncode == 0 and "nothing to repair" in healthy.stdout
    damage_snapshot(store / "snapshots" / newest)
    cut(store / DB_FILE, 0.5)
    result = json.loads(cli(store, "repair", "--json").stdout)
    assert result["repaired"] and result["snapshot_id"] != newest
    assert cli(store, "stats").returncode == 0


def test_repair_without_a_whole_snapshot_is_exit_3_and_changes_nothing(tmp_path, make_engine, write_jsonl):
    store = tmp_path / "store"
    make_engine(store=store).ingest([write_jsonl("first.jsonl", FIRST)])
    make_engine(store=store).close()
    for engine_store in [store]:
        cut(engine_store / DB_FILE, 0.75)
    size = (store / DB_FILE).stat().st_size
    one_error_line(cli(store, "repair"), StoreError.exit_code, "no snapshot")
    assert (store / DB_FILE).stat().st_size == size


# --- permissions --------------------------------------------------------------------------------------------
def modes(path: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(path.stat().st_mode)}
    for entry in path.rglob("*"):
        found[str(entry.relative_to(path))] = stat.S_IMODE(entry.lstat().st_mode)
    return found


def test_a_new_store_is_private_whatever_the_umask(make_engine, write_jsonl, tmp_path):
    old = os.umask(0o022)
    try:
        engine = make_engine(store=tmp_path / "store")
        engine.ingest([write_jsonl("first.jsonl", FIRST)])
        engine.snapshot()
        engine.close()
    finally:
        os.umask(old)
    loose = {name: oct(mode) for name, mode in modes(tmp_path / "store").items() if mode & 0o077}
    assert loose == {}
    assert os.umask(old) == old  # the caller's umask is back


def test_config_init_makes_a_private_store_folder(tmp_path):
    done = cli(tmp_path / "new", "config", "init", prefix=("sh", "-c", 'umask 022; exec "$@"', "sh"))
    assert done.returncode == 0, done.stderr
    assert modes(tmp_path / "new") == {".": 0o700, "config.toml": 0o600}


def test_an_existing_loose_store_is_tightened_on_open_with_one_notice(snapshotted):
    store, _ = snapshotted
    for entry in [store, *store.rglob("*")]:
        entry.chmod(0o755 if entry.is_dir() else 0o644)
    done = cli(store, "stats", "--json")
    assert done.returncode == 0, done.stderr
    notices = [line for line in done.stderr.splitlines() if line.startswith("notice: tightened the store")]
    assert len(notices) == 1 and "was 755" in notices[0], done.stderr
    assert {name: mode for name, mode in modes(store).items() if mode & 0o077} == {}
    assert "notice" not in cli(store, "stats", "--json").stderr  # once


# --- a read-only store can be read --------------------------------------------------------------------------
def without_write_rights() -> tuple[str, ...]:
    """A command prefix under which this user obeys file permissions: none needed for a normal user; root
    drops the capabilities that let it write anywhere (setpriv, util-linux)."""
    if os.geteuid() != 0:
        return ()
    prefix = ("setpriv", f"--inh-caps={NO_WRITE_CAPS}", f"--bounding-set={NO_WRITE_CAPS}")
    if shutil.which("setpriv") is None or subprocess.run([*prefix, "true"]).returncode != 0:
        pytest.skip("running as root without setpriv: a read-only store cannot be simulated here")
    return prefix


def test_a_read_only_store_answers_stats_and_queries_that_do_not_touch(snapshotted):
    store, _ = snapshotted
    prefix = without_write_rights()
    for entry in [store, *store.rglob("*")]:
        entry.chmod(0o500 if entry.is_dir() else 0o400)
    try:
        stats = cli(store, "stats", "--json", prefix=prefix)
        assert stats.returncode == 0 and "Traceback" not in stats.stderr, stats.stderr
        assert json.loads(stats.stdout)["raw"] == len(FIRST) + len(LATER)
        query = cli(store, "query", "weather", "--no-touch", "--json", prefix=prefix)
        assert query.returncode == 0, query.stderr
        assert json.loads(query.stdout)["hits"]
        one_error_line(cli(store, "query", "weather", prefix=prefix), StoreError.exit_code, "read-only")
    finally:
        for entry in [store, *store.rglob("*")]:
            entry.chmod(0o700 if entry.is_dir() else 0o600)


def test_the_lock_falls_back_to_a_shared_read_lock_where_it_cannot_write(tmp_path, monkeypatch):
    """The code path itself, without relying on permissions: the write open fails as on a read-only mount."""
    path = tmp_path / ".lock"
    path.write_text("pid 1")
    real_open = os.open

    def refuse_writes(name, flags, *args):
        if flags & (os.O_RDWR | os.O_WRONLY):
            raise OSError(30, "Read-only file system", str(name))
        return real_open(name, flags, *args)

    monkeypatch.setattr(os, "open", refuse_writes)
    lock = StoreLock(path, timeout=0)
    lock.acquire()
    assert lock.read_only and lock._fd is not None
    lock.release()
    path.unlink()
    lock.acquire()  # no lock file and no right to make one: reads only, unlocked
    assert lock.read_only and lock._fd is None


def test_repair_names_records_sent_to_a_server_not_its_deleted_request_files(make_engine):
    import datetime as dt

    from expengine.service import ops
    from expengine.store.journal import SENT_RECORDS, ingested_since

    engine = make_engine()
    record = {"ts": "2026-03-02T10:00:00Z", "kind": "message", "role": "user", "content": "hello"}
    for _ in range(2):
        ops.run(engine, "ingest", {"records": [record]})
    assert ingested_since(engine.store_dir, dt.datetime(2000, 1, 1)) == [SENT_RECORDS]
