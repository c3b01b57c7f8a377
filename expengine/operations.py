"""Every operation a client may ask for, declared once: its arguments (names, types, defaults, bounds and
help, in one dataclass) and what it is (read or write, body limit, which files it may read, how an MCP
client sees it). The CLI's options (`cli/operation_cmds.py`), the server's strict request models
(`service/ops.py`) and the MCP tools (`service/mcp_server.py`) are made from these declarations, and
`tests/test_operations.py` checks that the three agree.

A leaf of plain dataclasses on purpose: the CLI builds its options from it at start, and importing
pydantic there would cost every client call (the server path) ~0.13 s."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Optional, Union

# `since` / `until`: ISO-8601 text (no zone means UTC) from the CLI and the server, or a datetime
# from Python callers; query.filters.as_time reads both.
Moment = Optional[Union[str, dt.datetime]]
# Bounds a client's request is checked against (a query text's own, `query.max_text_chars`, is config)
NAME_CHARS = 65_536  # an id, a name, a time: ingest keeps ids as given (10,000 characters are tested)
MAX_BUDGET = 100_000  # prompt tokens
NOTE_CHARS = 4_000  # a feedback note
ARGS_BODY_BYTES = 2**20  # the body of every operation but ingest, which carries content
# no wait, grace or time limit is longer than a day: an upper bound is also what refuses inf (and nan)
MAX_SECONDS = 86_400
MAX_BODY_MB = 1_024  # `serve --max-body-mb`: a request body is held in memory whole

# How the server schedules an operation:
#   read      - any request thread, on its own DuckDB cursor, also while a compaction runs;
#   write     - the single writer thread, in arrival order (so queued behind a running compaction);
#   exclusive - the writer thread, with no read in flight (it replaces files or tables readers use).
Mode = Literal["read", "write", "exclusive"]


def arg(
    help: str,
    *,
    default: Any = None,
    ge: float | None = None,
    le: float | None = None,
    gt: float | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
    **cli: Any,
) -> Any:
    """A field with its help text and bounds. `cli`: how the command line spells it when not `--name`:
    `flag` ("-k", or "--helpful/--harmful" for a yes/no/unset switch), `off` (the flag and help of an
    option that turns a True default off), `metavar` (an argument's name in the usage line)."""
    bounds = {"ge": ge, "le": le, "gt": gt, "min_length": min_length, "max_length": max_length}
    metadata = {"help": help, **{k: v for k, v in bounds.items() if v is not None}, **cli}
    return field(default=default, metadata=metadata)


def required(help: str, *, min_length: int = 1, max_length: int | None = NAME_CHARS, **cli: Any) -> Any:
    """A required text field: a positional argument on the command line."""
    bounds = {"min_length": min_length, **({"max_length": max_length} if max_length is not None else {})}
    return field(metadata={"help": help, **bounds, **cli})


@dataclass(frozen=True)
class QueryArgs:
    text: str = required("The situation the agent is in, or what it is about to do, in plain words.", max_length=None)
    k: int = arg("At most this many hits.", default=5, ge=1, le=100, flag="-k")
    touch: bool = arg(
        "Reinforce and log what is shown (false leaves the store unchanged).",
        default=True,
        off=("--no-touch", "Do not reinforce or log what is shown (the store is left unchanged)."),
    )
    agent: Optional[str] = arg("Only this agent's memories and units.", max_length=NAME_CHARS)
    user: Optional[str] = arg(
        "Whom the agent serves: that user's memories and the shared ones, never another user's.",
        max_length=NAME_CHARS,
    )
    category: Optional[str] = arg("Only this category.", max_length=NAME_CHARS)
    kind: Optional[str] = arg(
        "A record kind (message, tool_call, tool_result, …: memories only) or rule / fact (units only).",
        max_length=NAME_CHARS,
    )
    outcome: Optional[str] = arg("success or failure (memories only).", max_length=NAME_CHARS)
    since: Moment = arg("Not older than this (ISO-8601, UTC).", max_length=NAME_CHARS)
    until: Moment = arg("Not newer than this (ISO-8601, UTC).", max_length=NAME_CHARS)
    goal: Optional[str] = arg("Only memories of this goal id.", max_length=NAME_CHARS)
    project: Optional[str] = arg(
        "The coding project asked about (django/django, django, or its folder): its test, build and "
        "error rules come first.",
        max_length=NAME_CHARS,
    )
    budget: Optional[int] = arg(
        "Stop adding hits when the prompt text would pass this many tokens.", ge=1, le=MAX_BUDGET
    )
    include_dormant: bool = arg("Search dormant memories too.", default=False)
    expand: Optional[bool] = arg("Show a unit's sources most relevant to the query (default: on).")
    session: Optional[str] = arg(
        "The asking session: when it ends with an outcome, that credits what was shown.", max_length=NAME_CHARS
    )
    goal_id: Optional[str] = arg("The asking goal: its outcome credits what was shown.", max_length=NAME_CHARS)

    def __post_init__(self) -> None:
        """Python callers are held to the bounds a request is (the server checks them before this)."""
        from .errors import InputError

        for f in fields(self):
            value, low, high = getattr(self, f.name), f.metadata.get("ge"), f.metadata.get("le")
            if isinstance(value, int) and low is not None and value < low:
                raise InputError(f"{f.name} must be at least {low}, got {value}")
            if isinstance(value, int) and high is not None and value > high:
                raise InputError(f"{f.name} must be at most {high}, got {value}")


@dataclass(frozen=True)
class NoArgs:
    pass


@dataclass(frozen=True)
class IdArgs:
    id: str = required("A record or unit id.", metavar="ID")


@dataclass(frozen=True)
class WhyArgs:
    text: str = required("What the agent remembers, e.g. what the user once said.")
    limit: int = arg("At most this many items.", default=5, ge=1, le=100)
    revive: bool = arg("Wake what is found (active again, with a history line).", default=False)


@dataclass(frozen=True)
class FeedbackArgs:
    id: str = required("A unit or record id.", metavar="ID")
    helpful: Optional[bool] = arg(
        "It helped the agent (--harmful: it misled or harmed it).", flag="--helpful/--harmful"
    )
    note: Optional[str] = arg("Why (kept in the item's history).", max_length=NOTE_CHARS)
    restore: bool = arg("Bring a quarantined unit back into queries.", default=False)


@dataclass(frozen=True)
class UnitsArgs:
    agent: Optional[str] = arg("Only this agent's units.", max_length=NAME_CHARS)
    user: Optional[str] = arg("Only this user's personal units (notes, facts).", max_length=NAME_CHARS)
    status: Optional[str] = arg("active, dormant, superseded or quarantined (default: all).", max_length=NAME_CHARS)
    kind: Optional[str] = arg("rule, fact or note.", max_length=NAME_CHARS)


@dataclass(frozen=True)
class GoalsArgs:
    agent: Optional[str] = arg("Only this agent's goals.", max_length=NAME_CHARS)
    status: Optional[str] = arg("open, succeeded, failed or cancelled.", max_length=NAME_CHARS)
    limit: int = arg("At most this many goals, the latest first.", default=50, ge=1, le=10_000)


@dataclass(frozen=True)
class RejectsArgs:
    limit: int = arg("At most this many lines.", default=100, ge=1, le=10_000)


@dataclass(frozen=True)
class IngestArgs:
    paths: Optional[list[str]] = arg("Absolute paths of files or folders under the server's --ingest-root folders.")
    records: Optional[list[dict[str, Any]]] = arg("Events, one JSON object each.")
    text: Optional[str] = arg("File content (JSONL or an openai-chat array).")
    format: str = arg("auto, native, openai-chat, otel, swe-agent, claude-code, codex or outcomes.", default="auto")
    strict: bool = arg("Fail (exit 7) when any line is rejected; good lines are still stored.", default=False)
    agent: Optional[str] = arg("Agent name for events that name none.", max_length=NAME_CHARS)
    user_field: Optional[str] = arg("Dotted path of each event's user (e.g. meta.customer).", max_length=NAME_CHARS)
    outcomes: Optional[list[str]] = arg("Evaluation reports (sb-cli JSON, or JSONL of {session, outcome}).")


@dataclass(frozen=True)
class AgentContextArgs:
    situation: Literal["session-start", "prompt", "failure", "export"] = required(
        "What the coding agent is doing: session-start, prompt, failure or export."
    )
    project: Optional[str] = arg("The project (`owner/name` or a folder's name); else the one `cwd` is in.")
    cwd: Optional[str] = arg("The agent's working folder, which names the project.", max_length=NAME_CHARS)
    session: Optional[str] = arg("The agent's session, which a precedent must come from before.", max_length=NAME_CHARS)
    # a failed test run's whole output (its tail names the error) or a prompt with a paste: the body's
    # limit bounds it, and the prompt is cut to query.max_text_chars where it is searched
    text: Optional[str] = arg("The prompt, or the failed command's error.", max_length=ARGS_BODY_BYTES)
    budget: Optional[int] = arg("At most this many tokens of context.", ge=1, le=MAX_BUDGET)


@dataclass(frozen=True)
class CompactArgs:
    dry_run: bool = arg("Run the cycle on a copy and report; the store is not touched.", default=False)
    refine: bool = arg("Refine changed clusters into units.", default=True)
    max_llm_calls: Optional[int] = arg("At most this many model calls.", ge=0)
    full: bool = arg(
        "Re-cluster and re-check the whole store, not only what changed since the last cycle.", default=False
    )


@dataclass(frozen=True)
class RefineArgs:
    dry_run: bool = arg("Say what would be written; write nothing.", default=False)
    max_llm_calls: Optional[int] = arg("At most this many model calls.", ge=0)
    time_limit_s: Optional[float] = arg("Stop starting new clusters after this many seconds.", gt=0, le=MAX_SECONDS)


@dataclass(frozen=True)
class SnapshotArgs:
    snapshot_id: str = required("A snapshot id (see `expengine snapshots`).", max_length=None)


@dataclass(frozen=True)
class ReindexArgs:
    model: Optional[str] = arg("Switch the store to this embedder (minilm, multilingual, mixed).")


@dataclass(frozen=True)
class ForgetArgs:
    """Structured filters, combined with AND (requests never carry SQL)."""

    ids: Optional[list[str]] = arg("Record ids to delete.")
    sessions: Optional[list[str]] = arg("Delete these sessions' records.")
    agents: Optional[list[str]] = arg("Delete these agents' records.")
    users: Optional[list[str]] = arg("Erase these users: their records, notes, units and query-log entries.")
    before: Optional[str] = arg("Only records older than this (ISO-8601, UTC).", max_length=NAME_CHARS)
    rejects: bool = arg("Delete every quarantined input line instead (no other filter).", default=False)
    dry_run: bool = arg("Only say what would be deleted.", default=False)


@dataclass(frozen=True)
class Operation:
    """What an operation is, besides its arguments. `wrap`: a list result is sent as {wrap: [...]}, as
    `--json` always printed it. `max_body`: None is the server's --max-body-mb (ingest carries content).
    `reach`: it reads paths on the server's machine, under --ingest-root only. `mcp`: the MCP tool's
    description (None: no generated tool). `cli`: the command line's options are made from `args`
    (False: a hand-written command, for options of its own such as --plot or --yes)."""

    name: str
    args: type
    mode: Mode
    help: str
    wrap: Optional[str] = None
    max_body: Optional[int] = ARGS_BODY_BYTES
    reach: bool = False
    mcp: Optional[str] = None
    destructive: bool = False
    cli: bool = True

    @property
    def tool(self) -> str:
        return f"memory_{self.name}"

    @property
    def read_only(self) -> bool:
        return self.mode == "read"


def _ops(*declared: Operation) -> dict[str, Operation]:
    return {op.name: op for op in declared}


OPERATIONS: dict[str, Operation] = _ops(
    Operation(
        "query",
        QueryArgs,
        "read",
        'Ranked knowledge units and memories for a situation. Example: expengine query "get_weather returns 429"',
        mcp="Search the memory for what is relevant to a situation. Returns `prompt` (a short, ready-to-use action "
        "guide with cautions: put it in your context) and `hits` (each with id, type unit|memory, text, score and "
        "source record ids; use the ids with memory_show and memory_feedback); `relevant` is false when nothing is. "
        "touch=true (the default) reinforces and logs what is shown; give session and goal_id so the outcome you "
        "log later credits it.",
    ),
    Operation(
        "show",
        IdArgs,
        "read",
        "Everything about one record or unit: scores, state, provenance, history.",
        mcp="Everything about one unit or memory: its fields, score parts, state, the raw records it stands for "
        "(provenance) and its history (why it was kept, merged or forgotten).",
    ),
    Operation(
        "why",
        WhyArgs,
        "write",
        "What the memory set aside that matches TEXT (sleeping, archived, merged, superseded) and why.",
        mcp='Answer "do you remember that …?": the best-matching memories and units that were set aside (dormant, '
        "archived, merged, superseded, quarantined), each with when, which step, why, its weight and what it was "
        "merged into or superseded by. revive=true wakes them.",
    ),
    Operation(
        "feedback",
        FeedbackArgs,
        "write",
        "Report that a unit or memory helped or harmed; persistently harmful units are quarantined.",
        mcp="Report whether a remembered unit or memory helped (helpful=true) or misled (helpful=false). Helpful "
        "raises its utility (ranked higher later); harmful lowers it, and a persistently harmful unit is "
        "quarantined (left out of queries; restore=true brings it back).",
    ),
    Operation(
        "units",
        UnitsArgs,
        "read",
        "List knowledge units with support, confidence and utility.",
        wrap="units",
        mcp="List the knowledge units the memory distilled: rules (when, do, expect, pitfall), facts and notes, "
        "with status, support, confidence and source record ids.",
    ),
    Operation(
        "goals",
        GoalsArgs,
        "read",
        "List goals, the latest first, with their status and how many records each holds.",
        wrap="goals",
        mcp="List the goals the agent worked on, the latest first: status (open, succeeded, failed, cancelled), "
        "description and how many records each holds.",
    ),
    Operation("trace", IdArgs, "read", "Show a unit and every raw record it came from, archived ones included."),
    Operation(
        "stats",
        NoArgs,
        "read",
        "Counts by kind, agent and state; units; rejects; goals; size.",
        mcp="Size and shape of the memory: raw, active, dormant and archived records, knowledge units, counts by "
        "kind, agent and category, active tokens and bytes on disk.",
        cli=False,
    ),
    Operation("weights", NoArgs, "read", "Weight distribution and the categories forgotten most.", cli=False),
    Operation("history", NoArgs, "read", "The growth curve over runs.", wrap="runs", cli=False),
    Operation("snapshots", NoArgs, "read", "Snapshots, newest first.", wrap="snapshots", cli=False),
    Operation("rejects", RejectsArgs, "read", "Quarantined input lines.", wrap="rejects", cli=False),
    Operation(
        "agent_context",
        AgentContextArgs,
        "read",
        "What a coding agent's hook injects: the project's standing knowledge, or the units for a prompt or failure.",
        cli=False,
    ),
    Operation("ingest", IngestArgs, "write", "Ingest logs.", max_body=None, reach=True, cli=False),
    Operation("pin", IdArgs, "write", "Pin a memory: it never decays.", cli=False),
    Operation("unpin", IdArgs, "write", "Unpin a memory.", cli=False),
    Operation("compact", CompactArgs, "write", "Run one compaction cycle.", cli=False),
    Operation("refine", RefineArgs, "write", "Refine changed clusters into units.", cli=False),
    Operation("restore", SnapshotArgs, "exclusive", "Roll the store back to a snapshot.", destructive=True, cli=False),
    Operation("reindex", ReindexArgs, "exclusive", "Rebuild LanceDB from DuckDB.", cli=False),
    Operation(
        "forget",
        ForgetArgs,
        "exclusive",
        "Delete records for real.",
        mcp="Delete memories for real (e.g. a privacy request): the records, their embeddings and history, from "
        "the store and its snapshots; units citing them lose them, or go when nothing else supports them. The "
        "filters combine with AND; at least one is needed. Returns what was (or would be) deleted.",
        destructive=True,
        cli=False,
    ),
)
