"""The store folder: one DuckDB file (source of truth), one LanceDB folder (derived index), a lock."""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import duckdb

from ..clock import utcnow  # migrations are stamped with it; store modules and lifecycle/purge.py import it from here
from ..config import default_store_dir  # noqa: F401  (moved to config; re-exported)
from ..errors import READ_ONLY_ERRNOS, StoreError
from .filters import sql_str
from .lock import StoreLock  # noqa: F401  (moved to lock.py; re-exported)
from .migrations import MIGRATIONS
from .wal import FOREIGN_WAL, drop_foreign_wal, wal_of

DB_FILE = "expengine.duckdb"
LANCE_DIR = "lance"
LOCK_FILE = ".lock"
SNAPSHOT_DIR = "snapshots"
# marks a `forget` whose deletion may have committed before its scrub: the next open finishes the scrub,
# since a rerun of the same `forget` finds nothing left to delete and would leave the old bytes in the files
SCRUB_PENDING = ".forget-scrub-pending"
RECENT_DIR = "recent_vectors"  # the vectors ingest embedded since the last cycle (store/recent_vectors.py)
# marks a store whose LanceDB must be rebuilt from DuckDB: a snapshot holds no LanceDB folder, so a restore
# writes it before it puts the snapshot's database in place, and the rebuild (then, or at the next open
# after a kill) removes it
REINDEX_PENDING = ".reindex-pending"
# DuckDB's file: three 4 KiB headers, then `total_blocks` blocks of `block_size` (PRAGMA database_size)
DUCKDB_HEADER_BYTES = 3 * 4096
REPAIR_HINT = "run `expengine repair` to put the newest good snapshot back (see docs/guides/repair.md)"
# blocks of new database files (DuckDB's default is 256 KiB): every table and every column segment starts
# in its own partly filled block, so on the sample logs 256 KiB blocks made a fresh copy 12.3 MB, 16 KiB
# ones 8.5 MB. A file keeps the block size it was made with.
BLOCK_SIZE = 16384
# rows per row group in what an ingest appends: a checkpoint rewrites the table's last, unfilled row group
# whole, and at DuckDB's default of 122,880 rows that is every record of most stores, and every vector of
# the embedding cache (1.5 KB each, compressed again every time): 10k records into a 100k store took 12.2
# CPU s at the default, 7.5 at 2,048, as into an empty one (7.2; `bench/million.py --grown 100000`). A cron's
# `ingest --from-agents` after 20 of 2,000 session files grew: 281-283 MB at the default, 239-249 MB at
# 2,048 (`bench/sources.py`)
INGEST_ROW_GROUP_ROWS = 2048
# what DuckDB may keep of a cron ingest's table blocks before `drop_table_blocks`: it keeps every block a
# checkpoint writes, so a first run's memory grew with the store (2,000 session files: 35 MB of blocks by
# the end, peak 297 MB; 12 MB and 271 MB with this bound, `bench/sources.py`)
CRON_TABLE_BLOCKS_BYTES = 16 * 1024 * 1024
# errors that mean "this user may not write here" (a read-only mount, another user's store)

log = logging.getLogger("expengine.store")


# `in_ids` spells a list up to this long out as parameters; a longer one goes through unnest
IN_LIST_MAX = 1000


def in_ids(column: str, ids: list[str]) -> tuple[str, list[Any]]:
    """`column IN (...)` for a few ids, and its parameters: DuckDB looks a list of parameters up, while
    `IN (SELECT unnest(?))` is a hash join over the whole table (5 ids of 1M records: p50 1.2 ms
    against 21, `bench/million.py --ids-table`). The same rows either way; FALSE for none."""
    if not ids:
        return "FALSE", []
    if len(ids) > IN_LIST_MAX:
        return f"{column} IN (SELECT unnest(?))", [ids]
    return f"{column} IN ({', '.join('?' * len(ids))})", list(ids)


def json_ids(value: str | None) -> list[str]:
    """An id list stored as JSON text (`source_ids`, `merged_ids`); empty when missing or malformed."""
    if not value:
        return []
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return []
    return [str(x) for x in parsed] if isinstance(parsed, list) else []


def json_meta(value: str | None) -> dict:
    """A record's `meta` stored as JSON text; empty when missing or malformed."""
    try:
        parsed = json.loads(value) if value else {}
    except json.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def link_tree(source: Path, target: Path) -> None:
    """`target` as a copy of the LanceDB folder `source` whose data, index and deletion files are hard
    links to the same bytes (a plain copy where the filesystem cannot link). Sound because Lance never
    changes such a file once written: a commit, a compaction or an index writes new files and a cleanup
    unlinks old ones, so a file shared by the store and its snapshots keeps its bytes for each of them.
    The small files in `_versions` are copied: Lance rewrites its latest-version hint there."""

    def link(src: str, dst: str) -> None:
        if Path(src).parent.name == "_versions":
            shutil.copy2(src, dst)
            return
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link)


# the name the store's database is attached under (what `duckdb.connect(path)` would have called it)
DB_ALIAS = "expengine"


def database_host() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB to attach store files to (`open_database`), kept by an `Engine` across calls:
    attaching a file takes ~1 ms of CPU, where a new connection takes ~12 (it builds a database
    instance), and detaching lets the file go as closing does, so another process can open it."""
    return duckdb.connect()


def open_database(
    path: Path,
    *,
    read_only: bool = False,
    host: duckdb.DuckDBPyConnection | None = None,
    row_group_rows: int | None = None,
) -> duckdb.DuckDBPyConnection:
    """Attach the file to `host` (a new one when None), check it is whole, and apply any migrations not yet
    applied, in order, each in its own transaction; a connection of its own whose default database it
    is, closed by `close_database`. `read_only`: for a store this user cannot write; it must need no
    migration. `row_group_rows`: the row group size of what this attachment appends (`INGEST_ROW_GROUP_ROWS`);
    DuckDB keeps it for the attachment only, not in the file."""
    short = short_of_its_header(path)
    con = (host or database_host()).cursor()
    options = ["READ_ONLY"] if read_only else [] if path.exists() else [f"BLOCK_SIZE {BLOCK_SIZE}"]
    if row_group_rows and not read_only:
        options.append(f"ROW_GROUP_SIZE {row_group_rows}")
    attach = f"ATTACH {sql_str(str(path))} AS {DB_ALIAS}" + (f" ({', '.join(options)})" if options else "")
    try:
        try:
            con.execute(attach)
        except duckdb.IOException as exc:
            if read_only or FOREIGN_WAL not in str(exc):
                raise
            drop_foreign_wal(path)
            con.execute(attach)
        con.execute(f"USE {DB_ALIAS}")
    except duckdb.Error as exc:
        con.close()
        if is_damage(exc):
            raise damaged(path, str(exc)) from exc
        raise StoreError(
            f"cannot open the store database {path}: {exc}", hint="is it a DuckDB file from expengine?"
        ) from exc
    try:
        as_left = _WHOLE.get(os.path.abspath(path)) == _file_state(path)
        problem = unreadable(con) if short and not as_left else None
        if problem:
            raise damaged(path, f"{short}, and {problem}")
        if not as_left:  # a file as this process left it was migrated when it opened it
            _migrate(con, read_only=read_only)
    except BaseException:
        close_database(con, whole=False)
        raise
    return con


# store files this process last left whole -> (inode, size, mtime) then: DuckDB drops free blocks from the end
# of a file and its header still counts them, so a whole file is often "short" (`short_of_its_header`), and
# reading every table to be sure took 65 ms at each open of the sample store; a file as this process left
# it (we hold the store lock, so only we wrote it since) is not read again
_WHOLE: dict[str, tuple[int, int, int]] = {}


def _file_state(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def table_blocks_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """The memory DuckDB holds as blocks of tables on disk: it keeps every block it reads or a checkpoint
    writes, and drops them only to stay under its memory limit."""
    held = con.execute("SELECT memory_usage_bytes FROM duckdb_memory() WHERE tag = 'BASE_TABLE'").fetchone()
    return int(held[0]) if held else 0


def drop_table_blocks(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the blocks of tables on disk that DuckDB keeps (`table_blocks_bytes`; read again when needed):
    its memory limit is lowered for an instant to what the rest takes (rows not yet checkpointed, indexes),
    then reset (a store never sets one: DuckDB's default). Only while no other cursor on the database runs
    a query: under so low a limit a checkpoint fails ("failed to pin block") and invalidates the database."""
    rest = con.execute(
        "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag <> 'BASE_TABLE'"
    ).fetchone()[0]  # type: ignore[index]
    try:
        con.execute(f"SET memory_limit = '{int(rest) + (1 << 20)}B'")
    except duckdb.OutOfMemoryException:
        pass  # what it could drop it dropped; the rest (a pinned block) stays
    finally:
        con.execute("RESET memory_limit")


def close_database(con: duckdb.DuckDBPyConnection, *, whole: bool = True) -> None:
    """Checkpoint the store's file, detach it (which lets it go) and close the connection; `whole`: it was
    opened whole, so the file as DuckDB leaves it needs no full read at the next open. The checkpoint is
    explicit because DETACH's own one was seen to leave the WAL behind (DuckDB 2.0.1, after a replay at
    open): a file rewritten after that (`rewrite_database`) then stood beside a WAL it could not read."""
    path = None
    try:
        if whole:
            row = con.execute(
                "SELECT path, readonly FROM duckdb_databases() WHERE database_name = ?", [DB_ALIAS]
            ).fetchone()
            path = row[0] if row else None
            if row and not row[1] and wal_of(Path(row[0])).exists():  # a read left none: nothing to fold
                try:
                    con.execute("CHECKPOINT")
                except duckdb.Error as exc:  # another cursor's transaction still open: DETACH tries again
                    log.debug(f"checkpoint before detach failed: {exc}")
        con.execute("USE memory")
        con.execute(f"DETACH {DB_ALIAS}")
    finally:
        con.close()
    state = _file_state(Path(path)) if path else None
    if path and state:
        _WHOLE[os.path.abspath(path)] = state


def short_of_its_header(path: Path) -> str | None:
    """Why the DuckDB file may have been cut short (a full disk, a bad copy): shorter than the blocks its
    committed header (the one with the higher iteration) counts. DuckDB opens such a file and fails later,
    on whichever query reads a missing block, or says nothing when none does. The counted blocks may include
    free ones at the end, so a short file is damaged only if a table then fails to read (`unreadable`). A
    file shorter than the header itself is damaged; a header layout this check does not know is DuckDB's."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(DUCKDB_HEADER_BYTES)
            size = os.fstat(fh.fileno()).st_size
    except FileNotFoundError:
        return None
    if len(head) < DUCKDB_HEADER_BYTES:
        raise damaged(path, f"it is {size} bytes, less than DuckDB's header")
    if head[8:12] != b"DUCK":
        return None
    headers = [struct.unpack_from("<QQqqQQ", head, offset) for offset in (4096, 8192)]
    *_, blocks, block_size = max(headers, key=lambda h: h[1])  # checksum, iteration, meta, free list, count, size
    if not block_size or block_size & (block_size - 1) or blocks > 1 << 40:
        return None
    expected = DUCKDB_HEADER_BYTES + blocks * block_size
    return f"it is {size} bytes, its header counts {expected}" if size < expected else None


def unreadable(con: duckdb.DuckDBPyConnection) -> str | None:
    """The first error met reading every table in full (each block read, so DuckDB checks its checksum), or
    None. Each row is hashed inside DuckDB: nothing comes out to Python (an Arrow reader imported pyarrow
    and took a cron's `ingest --from-agents` with nothing new from 103 to 230 MB on a 57 MB store)."""
    try:
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
            con.execute(f'SELECT sum(hash(t)) FROM "{table}" AS t').fetchall()
    except (duckdb.Error, OSError) as exc:  # OSError: the Arrow stream's form of DuckDB's IO error
        return str(exc).splitlines()[0]
    return None


def damaged(path: Path, why: str) -> StoreError:
    """One line with the fix: scripts and cron mail show the first line only."""
    return StoreError(f"the store database {path} is damaged ({why}): {REPAIR_HINT}")


def is_damage(exc: BaseException) -> bool:
    """A DuckDB error that means the file is damaged (a missing block, a failed checksum), not a bad query."""
    text = str(exc)
    return isinstance(exc, (duckdb.IOException, duckdb.InternalException, duckdb.FatalException)) and (
        "Could not read" in text or "checksum" in text.lower() or "Corrupt" in text
    )


def _migrate(con: duckdb.DuckDBPyConnection, *, read_only: bool) -> None:
    if not read_only:
        con.execute("CREATE TABLE IF NOT EXISTS migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)")
    applied = {row[0] for row in con.execute("SELECT name FROM migrations").fetchall()}
    known = {name for name, _ in MIGRATIONS}
    unknown = applied - known
    if unknown:
        raise StoreError(
            f"the store was written by a newer expengine (migrations {', '.join(sorted(unknown))})",
            hint="upgrade expengine",
        )
    pending = [(name, fn) for name, fn in MIGRATIONS if name not in applied]
    if pending and read_only:
        raise StoreError(
            f"the store is read-only for this user and needs an upgrade ({', '.join(n for n, _ in pending)})",
            hint="run any expengine command on it once as a user who can write it",
        )
    for name, fn in pending:
        con.execute("BEGIN")
        try:
            fn(con)
            con.execute("INSERT INTO migrations VALUES (?, ?)", [name, utcnow()])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise


def insert_columns(con: duckdb.DuckDBPyConnection, table: str, columns: dict[str, list[Any]], tail: str = "") -> None:
    """`INSERT INTO table` the rows `columns` (name -> its values, all of one length) hold side by side, unnested
    together: no Arrow table is built (building one made pyarrow import pandas, 35 MB, and its compute
    module, 9 MB, in a cron's ingest). `tail`: what follows the SELECT (`ON CONFLICT DO NOTHING`)."""
    names = ", ".join(f'"{name}"' for name in columns)
    unnested = ", ".join(f'unnest(?) AS "{name}"' for name in columns)
    con.execute(f"INSERT INTO {table} ({names}) SELECT * FROM (SELECT {unnested}) {tail}", list(columns.values()))


class arrow_view:
    """`with arrow_view(con, "name", table):` exposes an Arrow table to SQL for the block.

    DuckDB refuses to register while an earlier result is half-fetched (e.g. after `fetchone()`),
    so the pending result is completed first.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, name: str, table):
        self.con, self.name, self.table = con, name, table

    def __enter__(self) -> duckdb.DuckDBPyConnection:
        self.con.complete()
        self.con.register(self.name, self.table)
        return self.con

    def __exit__(self, kind: object, *_: object) -> None:
        try:
            self.con.complete()
            self.con.unregister(self.name)
        except duckdb.Error:
            if kind is None:
                raise  # else a failed statement aborted the transaction: its own error says why, not this one


@contextmanager
def store_errors(store_dir: Path) -> Iterator[None]:
    """DuckDB errors that are not bugs become one line with the fix: a damaged file (a block that cannot be
    read) and a write refused because this user can only read the store."""
    try:
        yield
    except duckdb.Error as exc:
        if is_damage(exc):
            raise damaged(store_dir / DB_FILE, str(exc).splitlines()[0]) from exc
        if "read-only" in str(exc):
            raise read_only_store(store_dir) from exc
        raise
    except Exception as exc:  # Lance raises its own error types (OSError, RuntimeError) for a refused write
        if refused_write(exc):
            raise read_only_store(store_dir) from exc
        raise


def refused_write(exc: BaseException) -> bool:
    """Whether `exc` is the file system refusing this user a write (or a read), from Python or from Lance."""
    if isinstance(exc, OSError) and exc.errno in READ_ONLY_ERRNOS:
        return True
    text = str(exc)
    return "Permission denied" in text or "Read-only file system" in text


def read_only_store(store_dir: Path) -> StoreError:
    return StoreError(
        f"the store {store_dir} is read-only for this user, and this command writes to it",
        hint="run it as the store's owner; stats and query --no-touch only read",
    )
