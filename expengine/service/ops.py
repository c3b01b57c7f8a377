"""The operations a client may ask for, each with a strict argument model and how the server runs it.

One table serves the CLI's direct mode, the server and the MCP server, so a command prints the same
JSON however it is answered. Arguments are structured (never SQL); every result becomes plain JSON.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional

from pydantic import Field

from ..arguments import Args, model_of, validate
from ..errors import InputError, NotFoundError, TooLargeError
from ..query import args as query_args
from ..query.args import NAME_CHARS
from ..results import to_json

if TYPE_CHECKING:
    from ..config import ServeConfig
    from ..engine import Engine

# Bounds on what one request may carry (query text has its own, `query.max_text_chars`, in Engine.query)
NOTE = 4_000
MAX_JSON_DEPTH = 64  # a JSON body or record nested deeper is a 400 (the parser would recurse on)
ARGS_BODY_BYTES = 2**20  # the body of every operation but ingest

# How the server schedules an operation:
#   read      - any request thread, on its own DuckDB cursor, also while a compaction runs;
#   write     - the single writer thread, in arrival order (so queued behind a running compaction);
#   exclusive - the writer thread, with no read in flight (it replaces files or tables readers use).
Mode = Literal["read", "write", "exclusive"]


QueryArgs = model_of(query_args.QueryArgs)


class IdArgs(Args):
    id: str = Field(min_length=1, max_length=NAME_CHARS)


class WhyArgs(Args):
    text: str = Field(min_length=1, max_length=NAME_CHARS, description="What the agent remembers.")
    limit: int = Field(5, ge=1, le=100)
    revive: bool = Field(False, description="Wake what is found.")


class FeedbackArgs(IdArgs):
    helpful: Optional[bool] = None
    note: Optional[str] = Field(None, max_length=NOTE)
    restore: bool = False


class IngestArgs(Args):
    paths: Optional[list[str]] = Field(
        None, description="Absolute paths of files or folders under the server's --ingest-root folders."
    )
    records: Optional[list[dict[str, Any]]] = Field(None, description="Events, one JSON object each.")
    text: Optional[str] = Field(None, description="File content (JSONL or an openai-chat array).")
    format: str = Field("auto", max_length=NAME_CHARS)
    strict: bool = False
    agent: Optional[str] = Field(None, max_length=NAME_CHARS)
    outcomes: Optional[list[str]] = Field(
        None, description="Evaluation reports (sb-cli JSON, or JSONL of {session, outcome}) under --ingest-root."
    )


class AgentContextArgs(Args):
    situation: Literal["session-start", "prompt", "failure", "export"]
    project: str = Field(max_length=NAME_CHARS, description="The project, as `expengine hook` names it from a cwd.")
    text: Optional[str] = Field(None, max_length=NAME_CHARS, description="The prompt, or the failed command's error.")
    budget: Optional[int] = Field(None, ge=1, le=query_args.MAX_BUDGET)


class NoArgs(Args):
    pass


class ReindexArgs(Args):
    model: Optional[str] = Field(None, description="Switch the store to this embedder (minilm, multilingual).")


class RejectsArgs(Args):
    limit: int = Field(100, ge=1, le=10_000)


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
    before: str | None = Field(None, max_length=NAME_CHARS)
    rejects: bool = Field(False, description="Delete every quarantined input line instead (no other filter).")
    dry_run: bool = False


def _query(engine: Engine, a: Args) -> Any:
    return engine.query(**a.model_dump())


@dataclass(frozen=True)
class Reach:
    """What a remote client's ingest may read on the server's machine: regular files under `roots` only
    (none by default, so clients send records), within a bound on bytes and lines per request, and
    within `timeout_s` of writer time. Direct mode has no Reach: the CLI user reads their own files."""

    roots: tuple[Path, ...]
    max_bytes: int
    max_lines: int
    timeout_s: float

    @classmethod
    def of(cls, roots: list[str] | tuple[str, ...], cfg: ServeConfig) -> Reach:
        resolved = []
        for root in roots:
            path = Path(root).expanduser().resolve()
            if not path.is_dir():
                raise InputError(f"--ingest-root {root}: not a folder", hint="give a folder clients may ingest from")
            resolved.append(path)
        return cls(tuple(resolved), cfg.max_ingest_bytes, cfg.max_ingest_lines, cfg.write_timeout_s)

    def files(self, paths: list[str], deadline: float) -> list[str]:
        """The regular files `paths` name (folders walked for log files), symlinks resolved, each under a
        root, their content (decompressed) within the bounds: checked before anything is ingested."""
        if not self.roots:
            raise InputError(
                "this server reads no paths: send records or text",
                hint="or start it with `serve --ingest-root DIR` for the folders clients may ingest from "
                "(`expengine ingest - < FILE` sends a file as text)",
            )
        from ..ingest.readers import SUFFIXES
        from ..ingest.readers import _open_binary as open_binary  # the readers' own opener: gzip sniffed alike

        budget = [self.max_bytes, self.max_lines]
        files: list[Path] = []
        for given in paths:
            if not given or not os.path.isabs(given):
                raise InputError(f"paths must be absolute, got {given!r}", hint="e.g. /var/log/agent/run.jsonl")
            path = self._allowed(Path(given))
            if path.is_dir():
                for found in sorted(path.rglob("*")):  # symlinked folders are not followed
                    self.check(budget, deadline)
                    if found.name.endswith(SUFFIXES) and stat.S_ISREG((real := self._allowed(found)).stat().st_mode):
                        files.append(real)
            elif stat.S_ISREG(path.stat().st_mode):
                files.append(path)
            else:
                raise InputError(
                    f"{given} is not a regular file or folder", hint="devices, FIFOs and sockets are refused"
                )
        for f in files:
            with open_binary(str(f)) as stream:
                while chunk := stream.read(2**20):
                    budget[0] -= len(chunk)
                    budget[1] -= chunk.count(b"\n")
                    self.check(budget, deadline)
        return [str(f) for f in files]

    def _allowed(self, path: Path) -> Path:
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise InputError(f"no such file or folder: {path}", hint="check the path on the server") from None
        if not any(real == root or root in real.parents for root in self.roots):
            raise InputError(
                f"{path} is outside the folders this server may read",
                hint="allowed: " + ", ".join(str(r) for r in self.roots),
            )
        return real

    def check(self, budget: list[int], deadline: float) -> None:
        """Raise once a request is over its bytes, lines or time."""
        if budget[0] < 0 or budget[1] < 0:
            raise TooLargeError(
                f"the ingest is over {self.max_bytes} bytes or {self.max_lines} lines",
                hint="split it into smaller requests (serve.max_ingest_bytes, serve.max_ingest_lines)",
            )
        if time.monotonic() > deadline:
            raise TooLargeError(
                f"the ingest ran past {self.timeout_s:g} s of writer time",
                hint="split it into smaller requests (serve.write_timeout_s); lines stored so far stay",
            )


def _ingest(
    engine: Engine,
    a: IngestArgs,
    on_progress: Callable[[int], None] | None = None,
    reach: Reach | None = None,
) -> Any:
    given = [x for x in (a.paths, a.records, a.text) if x is not None]
    if len(given) != 1 and not (a.outcomes and not given):
        raise InputError("give exactly one of paths, records or text", hint='e.g. {"records": [{...}, ...]}')
    if reach is not None:
        deadline = time.monotonic() + reach.timeout_s
        budget = [reach.max_bytes, reach.max_lines]
        report = on_progress

        def bounded(stored: int) -> None:  # between batches: the writer-side timeout
            reach.check(budget, deadline)
            if report:
                report(stored)

        on_progress = bounded
    # an evaluation report is a path the server reads, under the same roots and bounds as `paths`
    outcomes = a.outcomes if reach is None or not a.outcomes else reach.files(a.outcomes, deadline)
    args: dict[str, Any] = {
        "fmt": a.format,
        "strict": a.strict,
        "agent": a.agent,
        "outcomes": outcomes,
        "on_progress": on_progress,
    }
    if a.records is None and a.text is None:
        paths = a.paths or []
        return engine.ingest(paths if reach is None or not paths else reach.files(paths, deadline), **args)
    content = a.text if a.text is not None else "".join(json.dumps(r) + "\n" for r in a.records or [])
    if reach is not None:
        budget[0] -= len(content.encode("utf-8"))
        budget[1] -= content.count("\n")
        reach.check(budget, deadline)
    with tempfile.TemporaryDirectory(prefix="expengine-request-") as tmp:
        path = Path(tmp) / "request.jsonl"
        path.write_text(content, encoding="utf-8")
        return engine.ingest([str(path)], **args)


def _forget(engine: Engine, a: ForgetArgs) -> Any:
    filters = a.ids or a.sessions or a.agents or a.before
    if a.rejects and filters:
        raise InputError("forget rejects takes no other filter", hint="clear rejects and records in two calls")
    if not (filters or a.rejects):
        raise InputError("forget needs at least one filter", hint="ids, sessions, agents, before or rejects")
    return engine.forget(**a.model_dump())


@dataclass(frozen=True)
class Op:
    args: type[Args]
    run: Callable[..., Any]
    mode: Mode
    wrap: str | None = None  # lists are returned as {wrap: [...]}, as `--json` always printed them
    max_body: int | None = ARGS_BODY_BYTES  # None: the server's --max-body-mb (ingest carries content)
    reach: bool = False  # run with the remote client's `Reach` (what it may read on this machine)


OPS: dict[str, Op] = {
    "query": Op(QueryArgs, _query, "read"),
    "show": Op(IdArgs, lambda e, a: e.show(a.id), "read"),
    "why": Op(WhyArgs, lambda e, a: e.why(a.text, limit=a.limit, revive=a.revive), "write"),
    "stats": Op(NoArgs, lambda e, a: e.stats(), "read"),
    "rejects": Op(RejectsArgs, lambda e, a: e.rejects(limit=a.limit), "read", "rejects"),
    "units": Op(UnitsArgs, lambda e, a: e.units(agent=a.agent, status=a.status, kind=a.kind), "read", "units"),
    "trace": Op(IdArgs, lambda e, a: e.trace(a.id), "read"),
    "history": Op(NoArgs, lambda e, a: e.history(), "read", "runs"),
    "weights": Op(NoArgs, lambda e, a: e.weights(), "read"),
    "snapshots": Op(NoArgs, lambda e, a: e.snapshots(), "read", "snapshots"),
    "feedback": Op(
        FeedbackArgs, lambda e, a: e.feedback(a.id, helpful=a.helpful, note=a.note, restore=a.restore), "write"
    ),
    "agent_context": Op(AgentContextArgs, lambda e, a: e.agent_context(**a.model_dump()), "read"),
    "ingest": Op(IngestArgs, _ingest, "write", max_body=None, reach=True),
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
    check_depth(payload)
    return validate(op.args, payload)


def check_depth(payload: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse JSON nested deeper than `limit` (walked without recursion, so any depth is safe to check)."""
    stack: list[tuple[Any, int]] = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limit:
                raise InputError(f"the JSON is nested deeper than {limit} levels", hint="send flatter arguments")
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))


def dumps(op: Op, result: Any) -> str:
    """The JSON text `--json` prints, through the one serialiser (ISO-8601 `T` dates)."""
    if op.wrap:
        result = {op.wrap: [r.to_dict() if hasattr(r, "to_dict") else r for r in result]}
    elif hasattr(result, "to_dict"):
        result = result.to_dict()
    return to_json(result)


def run(engine: Engine, name: str, payload: Any, *, reach: Reach | None = None, **hooks: Any) -> Any:
    """Validate and run one operation in this process (direct mode, or an MCP server owning the store,
    which passes its client's `reach`); the answer is plain JSON, the same a server would send."""
    op = lookup(name)
    if op.reach:
        hooks["reach"] = reach
    return json.loads(dumps(op, op.run(engine, parse(op, payload), **hooks)))
