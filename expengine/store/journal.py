"""The ingest journal: one JSON line per file an ingest started reading, beside the database, not in it,
so that `repair` can still say what to ingest again when the database is the thing that is damaged."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

INGEST_JOURNAL = "ingested.jsonl"
# the folder a server writes a request's records into for the while of its ingest (deleted after)
REQUEST_PREFIX = "expengine-request-"
SENT_RECORDS = "records sent to the server (send them again)"


def journal_ingest(store_dir: Path, path: str, started: dt.datetime) -> None:
    with open(store_dir / INGEST_JOURNAL, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"path": path, "started": started.isoformat()}) + "\n")


def ingested_since(store_dir: Path, since: dt.datetime) -> list[str]:
    """Files an ingest started reading at or after `since`, in order, each once (a torn last line is
    skipped). A server's request files are gone once answered: they are named once as `SENT_RECORDS`."""
    found: dict[str, None] = {}
    try:
        lines = (store_dir / INGEST_JOURNAL).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            entry = json.loads(line)
            if dt.datetime.fromisoformat(entry["started"]) >= since:
                path = str(entry["path"])
                found.setdefault(SENT_RECORDS if Path(path).parent.name.startswith(REQUEST_PREFIX) else path)
        except (ValueError, KeyError, TypeError):
            continue
    return list(found)
