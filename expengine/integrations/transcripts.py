"""A Claude Code transcript ingested as it grows: only the lines not yet stored, subagents included.

Claude Code appends to `<project folder>/<session>.jsonl` and writes each subagent to
`<session>/subagents/agent-*.jsonl`. Each file has an offset record in the store folder
(`hook-cursors.json`: inode, offset of the last complete line read, hash of the file's head): a
file replaced or cut shorter than its offset is read again from the start. Lines are read up to the
last newline, so a line being written is read by the next Stop. The offset moves only once the
lines are stored, so a failed ingest is retried by the next hook.

Lines that carry no memory (hook progress, file-history snapshots, queue operations: most of a
transcript's bytes) are not sent; what privacy.py keeps out never leaves this process.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .privacy import Privacy

CURSORS = "hook-cursors.json"
INGEST_LOCK = "hook-ingest.lock"  # one worker at a time per store: two Stops of one session may overlap
HEAD_BYTES = 1024
SKIPPED_TYPES = ("progress", "file-history-snapshot", "queue-operation")
CHUNK_BYTES = 4 << 20  # characters of one ingest request (a long transcript's first Stop sends several)
INGEST_WAIT_S = 600.0  # a detached worker may wait this long for a store a compaction holds


def transcript_files(transcript: Path) -> list[Path]:
    """The session's file and its subagents' files, in that order."""
    subagents = transcript.with_suffix("") / "subagents"
    found = sorted(subagents.glob("*.jsonl")) if subagents.is_dir() else []
    return [transcript, *found]


def _head(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(HEAD_BYTES)).hexdigest()


def new_lines(path: Path, cursor: dict[str, Any] | None) -> tuple[list[bytes], dict[str, Any]]:
    """The complete lines written since `cursor`, and the cursor after them."""
    st = path.stat()
    head = _head(path)
    start = 0
    if cursor and cursor.get("inode") == st.st_ino and st.st_size >= cursor.get("offset", 0):
        if cursor.get("head") == head or cursor.get("offset", 0) < HEAD_BYTES:
            start = int(cursor.get("offset", 0))
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(max(0, st.st_size - start))
    end = data.rfind(b"\n") + 1
    lines = [line for line in data[:end].split(b"\n") if line.strip()]
    return lines, {"inode": st.st_ino, "offset": start + end, "head": head}


def _kept(lines: list[bytes]) -> list[dict[str, Any]]:
    """The lines as objects, less those that carry no memory; a line that is not JSON is kept as is
    (the reader quarantines it, naming its line)."""
    out = []
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            obj = {"_unparsed": line.decode("utf-8", errors="replace")}
        if not (isinstance(obj, dict) and obj.get("type") in SKIPPED_TYPES):
            out.append(obj)
    return out


@contextmanager
def _locked(store: Path) -> Iterator[dict[str, Any]]:
    """The cursors, under the store's ingest lock; written back when the block ends without error."""
    store.mkdir(parents=True, exist_ok=True)
    with open(store / INGEST_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = store / CURSORS
        cursors = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        yield cursors
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cursors, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)


def ingest_transcript(store: Path, transcript: Path, cwd: str) -> int:
    """Store the new lines of `transcript` and its subagents; the number of lines sent."""
    privacy = Privacy.for_project(cwd)
    sent = 0
    with _locked(store) as cursors:
        for path in transcript_files(transcript):
            if not path.is_file():
                continue
            lines, moved = new_lines(path, cursors.get(str(path)))
            kept = [_dumped(obj) + "\n" for obj in privacy.filter(_kept(lines))]
            for chunk in _chunks(kept):
                _store(store, "".join(chunk))
            sent += len(kept)
            cursors[str(path)] = moved
    return sent


def _chunks(lines: list[str]) -> Iterator[list[str]]:
    """The lines in requests of at most CHUNK_BYTES (a server's ingest body is bounded: 16 MB by default)."""
    chunk: list[str] = []
    size = 0
    for line in lines:
        if chunk and size + len(line) > CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(line)
        size += len(line)
    if chunk:
        yield chunk


def _dumped(obj: Any) -> str:
    return obj["_unparsed"] if isinstance(obj, dict) and "_unparsed" in obj else json.dumps(obj, ensure_ascii=False)


def _store(store: Path, text: str) -> None:
    """Through the store's server when one runs, else in this process."""
    from ..service.client import find_server

    client = find_server(store, wait=INGEST_WAIT_S)
    if client is not None:
        client.call("ingest", {"text": text, "format": "claude-code"})
        return
    from ..engine import Engine

    with tempfile.TemporaryDirectory(prefix="expengine-hook-") as tmp:
        part = Path(tmp) / "transcript.jsonl"
        part.write_text(text, encoding="utf-8")
        with Engine(store=store, lock_timeout=INGEST_WAIT_S) as engine:
            engine.ingest([str(part)], fmt="claude-code")
