"""`expengine mcp`: the memory as MCP tools over stdio, for agent frameworks and desktop clients.

It forwards each tool call to `expengine serve` when one runs for the store (the models stay warm
there); otherwise it opens the store itself, once, and keeps the Engine for its lifetime.
"""

from __future__ import annotations

import threading
from typing import Annotated, Any, Callable, Literal, Optional

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from pydantic import ConfigDict, Field

from .. import __version__
from ..errors import ExpengineError
from .client import Client
from .ingest_queue import IngestQueue, preload

INSTRUCTIONS = (
    "Long-term memory of this agent: knowledge units (rules and facts distilled from past experience) and raw "
    "memories. Call memory_query before acting in a situation the agent may have met before, and put the "
    "returned `prompt` text into your context. Call memory_feedback when a returned unit helped or misled you, "
    "and memory_ingest to record new events (tool calls, results, user messages, outcomes)."
)


def strict(tool: Tool) -> Tool:
    """The tool with HTTP's argument rules: an unknown argument or a wrong type (`helpful="yes"`) is an
    error, never ignored or coerced (the SDK's argument models are lax)."""
    lax = tool.fn_metadata.arg_model
    model: Any = type(lax.__name__, (lax,), {"model_config": ConfigDict(extra="forbid", strict=True)})
    tool.fn_metadata.arg_model = model
    tool.parameters = model.model_json_schema(by_alias=True)
    return tool


def build(
    find: Callable[[], Client | None], open_engine: Callable[[], Any], *, ingest_roots: list[str] | None = None
) -> MCPServer:
    """The MCP server for one store; `find` names the server that owns it, if one runs, and `open_engine` is
    called at most once, when none answers. Owning
    the store, it reads paths only under `ingest_roots`, with the server's bounds (ops.Reach)."""
    from . import ops

    engine: list[Any] = []
    reach: list[ops.Reach] = []
    lock = threading.Lock()

    def call(op: str, args: dict[str, Any]) -> Any:
        try:
            client = find()
            if client is not None:
                return client.call(op, args)
            with lock:  # one Engine, one operation at a time
                if not engine:
                    engine.append(open_engine())
                    reach.append(ops.Reach.of(ingest_roots or [], engine[0].config.serve))
                return ops.run(engine[0], op, args, reach=reach[0])
        except ExpengineError as exc:
            raise ToolError(str(exc)) from None

    background = IngestQueue(lambda body: call("ingest", body))
    if find() is None:
        preload()  # this process will ingest itself: load the libraries now, not under an agent's call

    def memory_query(
        text: Annotated[
            str,
            Field(
                min_length=1,
                description="The situation the agent is in or what it is about to do, "
                "in plain words, e.g. 'refund a cancelled flight'.",
            ),
        ],
        k: Annotated[int, Field(ge=1, le=50, description="At most this many hits.")] = 5,
        agent: Annotated[Optional[str], Field(description="Only this agent's memories and units.")] = None,
        kind: Annotated[
            Optional[str],
            Field(
                description="'rule' or 'fact' for units; a record kind such as 'tool_call' or 'message' for memories."
            ),
        ] = None,
        outcome: Annotated[
            Optional[Literal["success", "failure"]], Field(description="Only memories of tasks that ended so.")
        ] = None,
        since: Annotated[Optional[str], Field(description="Not older than this ISO-8601 UTC time.")] = None,
        budget: Annotated[
            Optional[int], Field(ge=1, description="Stop adding hits past this many prompt tokens.")
        ] = None,
        touch: Annotated[bool, Field(description="Reinforce the hits returned (they stay in memory longer).")] = True,
        session: Annotated[
            Optional[str], Field(description="Your session id: when it ends with an outcome, that credits the hits.")
        ] = None,
        goal_id: Annotated[Optional[str], Field(description="Your goal id, credited the same way.")] = None,
        project: Annotated[
            Optional[str], Field(description="The coding project you work in (owner/name, name or its folder).")
        ] = None,
    ) -> dict[str, Any]:
        """Search the memory for what is relevant to a situation. Returns `prompt` (a short, ready-to-use action
        guide with cautions: put it in your context) and `hits` (each with id, type unit|memory, text, score and
        source record ids; use the ids with memory_show and memory_feedback); `relevant` is false when nothing is."""
        return call(
            "query",
            {
                "text": text,
                "k": k,
                "agent": agent,
                "kind": kind,
                "outcome": outcome,
                "since": since,
                "budget": budget,
                "touch": touch,
                "session": session,
                "goal_id": goal_id,
                "project": project,
            },
        )

    def memory_ingest(
        records: Annotated[
            Optional[list[dict[str, Any]]],
            Field(
                description=(
                    "Events to store, one object each. Required: ts (ISO-8601 time) and kind (message, tool_call, "
                    "tool_result, observation, goal, outcome, feedback or note). Usual fields: content (the text), role, "
                    "agent, session, goal_id, outcome (success|failure), tool {name, args, result, error}, "
                    "goal {id, status, description}, importance (0-1), category, tags."
                )
            ),
        ] = None,
        path: Annotated[
            Optional[str],
            Field(
                description="Instead of records: the absolute path of a JSONL or openai-chat JSON file or folder "
                "under a folder this server may read (its --ingest-root)."
            ),
        ] = None,
        agent: Annotated[Optional[str], Field(description="Agent name for events that name none.")] = None,
        wait: Annotated[
            bool,
            Field(
                description="false: queue the records and answer at once with a receipt (for memory_status), "
                "so the agent never waits on embedding or on a running compaction."
            ),
        ] = True,
    ) -> dict[str, Any]:
        """Record new experience in the memory (validated, secrets redacted, embedded, indexed). Give either
        `records` or `path`. Returns counts: read, stored, duplicates, rejected (with file, line and reason);
        with wait=false, a receipt {receipt, status: queued} instead."""
        if path is not None and records is None:
            body: dict[str, Any] = {"paths": [path]}
        elif records is not None and path is None:
            body = {"records": records}
        else:
            raise ToolError("give exactly one of records or path")
        if not wait:
            return background.submit({**body, "agent": agent})
        return call("ingest", {**body, "agent": agent})

    def memory_status(
        receipt: Annotated[str, Field(min_length=1, description="The receipt memory_ingest(wait=false) returned.")],
        wait: Annotated[
            float, Field(ge=0, le=60, description="Wait up to this many seconds for the records to be in.")
        ] = 0,
    ) -> dict[str, Any]:
        """Whether queued records are in: status queued, running, done (with the ingest counts in `result`) or
        failed (with `error`)."""
        try:
            return background.status(receipt, wait=wait)
        except ExpengineError as exc:
            raise ToolError(str(exc)) from None

    def memory_forget(
        ids: Annotated[Optional[list[str]], Field(description="Record ids to delete.")] = None,
        session: Annotated[Optional[str], Field(description="Delete this session's records.")] = None,
        agent: Annotated[Optional[str], Field(description="Delete this agent's records.")] = None,
        dry_run: Annotated[bool, Field(description="Only say what would be deleted.")] = False,
    ) -> dict[str, Any]:
        """Delete memories for real (e.g. a privacy request): the records, their embeddings and history, from
        the store and its snapshots; units citing them lose them, or go when nothing else supports them. The
        filters combine with AND; at least one is needed. Returns what was (or would be) deleted."""
        return call(
            "forget",
            {
                "ids": ids,
                "sessions": [session] if session is not None else None,
                "agents": [agent] if agent is not None else None,
                "dry_run": dry_run,
            },
        )

    def memory_units(
        kind: Annotated[Optional[Literal["rule", "fact"]], Field(description="Only rules or only facts.")] = None,
        status: Annotated[
            Optional[str], Field(description="active (default: all), superseded, quarantined, ...")
        ] = None,
        agent: Annotated[Optional[str], Field(description="Only this agent's units.")] = None,
    ) -> dict[str, Any]:
        """List the knowledge units the memory distilled: each rule (when, do, expect, pitfall) or fact, with
        its status, support, confidence and source record ids."""
        return call("units", {"kind": kind, "status": status, "agent": agent})

    def memory_feedback(
        id: Annotated[str, Field(min_length=1, description="A unit or memory id from memory_query's hits.")],
        helpful: Annotated[bool, Field(description="true if it helped, false if it was wrong or misleading.")],
        note: Annotated[Optional[str], Field(description="Why, in a few words (kept in the item's history).")] = None,
    ) -> dict[str, Any]:
        """Report whether a remembered unit or memory helped. Helpful raises its utility (ranked higher later);
        harmful lowers it, and a persistently harmful unit is quarantined (left out of queries)."""
        return call("feedback", {"id": id, "helpful": helpful, "note": note})

    def memory_show(
        id: Annotated[str, Field(min_length=1, description="A unit or memory id.")],
    ) -> dict[str, Any]:
        """Everything about one unit or memory: its fields, score parts, state, the raw records it stands for
        (provenance) and its history (why it was kept, merged or forgotten)."""
        return call("show", {"id": id})

    def memory_why(
        text: Annotated[str, Field(min_length=1, description="What you remember, e.g. what the user once said.")],
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many items.")] = 5,
        revive: Annotated[bool, Field(description="Wake what is found, so queries return it again.")] = False,
    ) -> dict[str, Any]:
        """Answer "do you remember that …?": the best-matching memories and units that were set aside (dormant,
        archived, merged, superseded, quarantined), each with when, which step, why, its weight and what it was
        merged into or superseded by."""
        return call("why", {"text": text, "limit": limit, "revive": revive})

    def memory_stats() -> dict[str, Any]:
        """Size and shape of the memory: raw, active, dormant and archived records, knowledge units, counts by
        kind, agent and category, active tokens and bytes on disk."""
        return call("stats", {})

    tools: list[Callable[..., Any]] = [
        memory_query,
        memory_ingest,
        memory_status,
        memory_feedback,
        memory_show,
        memory_why,
        memory_stats,
        memory_units,
        memory_forget,
    ]
    return MCPServer(
        name="expengine",
        version=__version__,
        instructions=INSTRUCTIONS,
        tools=[strict(Tool.from_function(fn)) for fn in tools],
    )
