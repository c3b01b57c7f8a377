"""The operations a client may ask for, each with a strict argument model and how the server runs it.

One table serves the CLI's direct mode, the server and the MCP server, so a command prints the same
JSON however it is answered. Arguments are structured (never SQL); every result becomes plain JSON.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InputError, NotFoundError
from ..results import to_json

if TYPE_CHECKING:
    from ..engine import Engine

# How the server schedules an operation:
#   read      - any request thread, on its own DuckDB cursor, also while a compaction runs;
#   write     - the single writer thread, in arrival order (so queued behind a running compaction);
#   exclusive - the writer thread, with no read in flight (it replaces files or tables readers use).
Mode = Literal["read", "write", "exclusive"]


class Args(BaseModel):
    """Strict: a wrong type or an unknown field is a 400, never coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)


class QueryArgs(Args):
    text: str = Field(min_length=1, description="The situation the agent is in, or what it is about to do.")
    k: int = Field(5, ge=1, le=100, description="At most this many hits.")
    touch: bool = Field(True, description="Reinforce the hits (false leaves the store unchanged).")
    agent: Optional[str] = None
    category: Optional[str] = None
    kind: Optional[str] = None
    outcome: Optional[str] = None
    since: Optional[str] = Field(None, description="ISO-8601, UTC.")
    until: Optional[str] = Field(None, description="ISO-8601, UTC.")
    goal: Optional[str] = None
    budget: Optional[int] = Field(None, ge=1)
    include_dormant: bool = False
    expand: Optional[bool] = None
    session: Optional[str] = Field(None, description="The asking session: its outcome credits what was shown.")
    goal_id: Optional[str] = Field(None, description="The asking goal: its outcome credits what was shown.")


class WhyArgs(Args):
    text: str = Field(min_length=1, description="What the agent remembers, e.g. what the user once said.")
    limit: int = Field(5, ge=1, le=100)
    revive: bool = Field(False, description="Wake what is found.")


class IdArgs(Args):
    id: str = Field(min_length=1)


class FeedbackArgs(IdArgs):
    helpful: Optional[bool] = None
    note: Optional[str] = None
    restore: bool = False


class IngestArgs(Args):
    paths: Optional[list[str]] = Field(None, description="Files or folders readable by the server.")
    records: Optional[list[dict[str, Any]]] = Field(None, description="Events, one JSON object each.")
    text: Optional[str] = Field(None, description="File content (JSONL or an openai-chat array).")
    format: str = "auto"
    strict: bool = False
    agent: Optional[str] = None


class NoArgs(Args):
    pass


class ReindexArgs(Args):
    model: Optional[str] = Field(None, description="Switch the store to this embedder (minilm, multilingual).")


class RejectsArgs(Args):
    limit: int = Field(100, ge=1)


class CompactArgs(Args):
    dry_run: bool = False
    refine: bool = True
    max_llm_calls: Optional[int] = Field(None, ge=0)


class RefineArgs(Args):
    dry_run: bool = False
    max_llm_calls: Optional[int] = Field(None, ge=0)
    time_limit_s: Optional[float] = Field(None, gt=0)


class UnitsArgs(Args):
    agent: Optional[str] = None
    status: Optional[str] = None
    kind: Optional[str] = None


class SnapshotArgs(Args):
    snapshot_id: str = Field(min_length=1)


class ForgetArgs(Args):
    """Structured filters, combined with AND (requests never carry SQL)."""

    ids: list[str] | None = None
    sessions: list[str] | None = None
    agents: list[str] | None = None
    before: str | None = None
    dry_run: bool = False


def _query(engine: Engine, a: QueryArgs) -> Any:
    return engine.query(**a.model_dump())


def _ingest(engine: Engine, a: IngestArgs, on_progress: Callable[[int], None] | None = None) -> Any:
    given = [x for x in (a.paths, a.records, a.text) if x is not None]
    if len(given) != 1:
        raise InputError("give exactly one of paths, records or text", hint='e.g. {"records": [{...}, ...]}')
    if a.paths is not None:
        return engine.ingest(a.paths, fmt=a.format, strict=a.strict, agent=a.agent, on_progress=on_progress)
    content = a.text if a.text is not None else "".join(json.dumps(r) + "\n" for r in a.records or [])
    with tempfile.TemporaryDirectory(prefix="expengine-request-") as tmp:
        path = Path(tmp) / "request.jsonl"
        path.write_text(content, encoding="utf-8")
        return engine.ingest([str(path)], fmt=a.format, strict=a.strict, agent=a.agent, on_progress=on_progress)


def _forget(engine: Engine, a: ForgetArgs) -> Any:
    if not (a.ids or a.sessions or a.agents or a.before):
        raise InputError("forget needs at least one filter", hint="ids, sessions, agents or before")
    return engine.forget(**a.model_dump())


@dataclass(frozen=True)
class Op:
    args: type[Args]
    run: Callable[..., Any]
    mode: Mode
    wrap: str | None = None  # lists are returned as {wrap: [...]}, as `--json` always printed them


OPS: dict[str, Op] = {
    "query": Op(QueryArgs, _query, "read"),
    "show": Op(IdArgs, lambda e, a: e.show(a.id), "read"),
    "why": Op(WhyArgs, lambda e, a: e.why(a.text, limit=a.limit, revive=a.revive), "write"),
    "stats": Op(NoArgs, lambda e, a: e.stats(), "read"),
    "rejects": Op(RejectsArgs, lambda e, a: e.rejects(limit=a.limit), "read", "rejects"),
    "units": Op(UnitsArgs, lambda e, a: e.units(agent=a.agent, status=a.status, kind=a.kind), "read", "units"),
    "trace": Op(IdArgs, lambda e, a: e.trace(a.id), "read"),
    "history": Op(NoArgs, lambda e, a: e.history(), "read", "runs"),
    "snapshots": Op(NoArgs, lambda e, a: e.snapshots(), "read", "snapshots"),
    "feedback": Op(
        FeedbackArgs, lambda e, a: e.feedback(a.id, helpful=a.helpful, note=a.note, restore=a.restore), "write"
    ),
    "ingest": Op(IngestArgs, _ingest, "write"),
    "pin": Op(IdArgs, lambda e, a: e.pin(a.id), "write"),
    "unpin": Op(IdArgs, lambda e, a: e.unpin(a.id), "write"),
    "compact": Op(
        CompactArgs, lambda e, a: e.compact(dry_run=a.dry_run, refine=a.refine, max_llm_calls=a.max_llm_calls), "write"
    ),
    "refine": Op(
        RefineArgs,
        lambda e, a: e.refine(dry_run=a.dry_run, max_llm_calls=a.max_llm_calls, time_limit_s=a.time_limit_s),
        "write",
    ),
    "restore": Op(SnapshotArgs, lambda e, a: e.restore(a.snapshot_id), "exclusive"),
    "reindex": Op(ReindexArgs, lambda e, a: e.reindex(model=a.model), "exclusive"),
    "forget": Op(ForgetArgs, _forget, "exclusive"),
}


def lookup(name: str) -> Op:
    op = OPS.get(name)
    if op is None:
        raise NotFoundError(f"no operation {name!r}", hint="one of: " + ", ".join(sorted(OPS)))
    return op


def parse(op: Op, payload: Any) -> Args:
    """Validate a request body; a bad one is an InputError (exit code 2, HTTP 400) naming the field."""
    try:
        return op.args.model_validate({} if payload is None else payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InputError(
            f"bad argument {where}: {first['msg']}",
            hint=f"{len(exc.errors())} problem(s); fields: {', '.join(op.args.model_fields)}",
        ) from None


def dumps(op: Op, result: Any) -> str:
    """The JSON text `--json` prints, through the one serialiser (ISO-8601 `T` dates)."""
    if op.wrap:
        result = {op.wrap: [r.to_dict() if hasattr(r, "to_dict") else r for r in result]}
    elif hasattr(result, "to_dict"):
        result = result.to_dict()
    return to_json(result)


def run(engine: Engine, name: str, payload: Any, **hooks: Any) -> Any:
    """Validate and run one operation in this process (direct mode, or an MCP server owning the store);
    the answer is plain JSON, the same a server would send."""
    op = lookup(name)
    return json.loads(dumps(op, op.run(engine, parse(op, payload), **hooks)))
