"""`expengine mcp`: the memory as MCP tools over stdio, for agent frameworks and desktop clients.

It forwards each tool call to `expengine serve` when one runs for the store (the models stay warm
there); otherwise it opens the store itself, once, and keeps the Engine for its lifetime.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Optional

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ..errors import ExpengineError
from .client import find_server

INSTRUCTIONS = (
    "Long-term memory of this agent: knowledge units (rules and facts distilled from past experience) and raw "
    "memories. Call memory_query before acting in a situation the agent may have met before, and put the "
    "returned `prompt` text into your context. Call memory_feedback when a returned unit helped or misled you, "
    "and memory_ingest to record new events (tool calls, results, user messages, outcomes)."
)


def build(store_dir: Path, open_engine: Callable[[], Any]) -> MCPServer:
    """The MCP server for one store; `open_engine` is called at most once, when no server answers."""
    from . import ops

    engine: list[Any] = []
    lock = threading.Lock()

    def call(op: str, args: dict[str, Any]) -> Any:
        try:
            client = find_server(store_dir)
            if client is not None:
                return client.call(op, args)
            with lock:  # one Engine, one operation at a time
                if not engine:
                    engine.append(open_engine())
                return ops.run(engine[0], op, args)
        except ExpengineError as exc:
            raise ToolError(str(exc)) from None

    mcp = MCPServer(name="expengine", instructions=INSTRUCTIONS)

    @mcp.tool()
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
            },
        )

    @mcp.tool()
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
            Field(description="Instead of records: a JSONL or openai-chat JSON file or folder on this machine."),
        ] = None,
        agent: Annotated[Optional[str], Field(description="Agent name for events that name none.")] = None,
    ) -> dict[str, Any]:
        """Record new experience in the memory (validated, secrets redacted, embedded, indexed). Give either
        `records` or `path`. Returns counts: read, stored, duplicates, rejected (with file, line and reason)."""
        if path is not None and records is None:
            body: dict[str, Any] = {"paths": [str(Path(path).resolve())]}
        elif records is not None and path is None:
            body = {"records": records}
        else:
            raise ToolError("give exactly one of records or path")
        return call("ingest", {**body, "agent": agent})

    @mcp.tool()
    def memory_feedback(
        id: Annotated[str, Field(min_length=1, description="A unit or memory id from memory_query's hits.")],
        helpful: Annotated[bool, Field(description="true if it helped, false if it was wrong or misleading.")],
        note: Annotated[Optional[str], Field(description="Why, in a few words (kept in the item's history).")] = None,
    ) -> dict[str, Any]:
        """Report whether a remembered unit or memory helped. Helpful raises its utility (ranked higher later);
        harmful lowers it, and a persistently harmful unit is quarantined (left out of queries)."""
        return call("feedback", {"id": id, "helpful": helpful, "note": note})

    @mcp.tool()
    def memory_show(
        id: Annotated[str, Field(min_length=1, description="A unit or memory id.")],
    ) -> dict[str, Any]:
        """Everything about one unit or memory: its fields, score parts, state, the raw records it stands for
        (provenance) and its history (why it was kept, merged or forgotten)."""
        return call("show", {"id": id})

    @mcp.tool()
    def memory_why(
        text: Annotated[str, Field(min_length=1, description="What you remember, e.g. what the user once said.")],
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many items.")] = 5,
        revive: Annotated[bool, Field(description="Wake what is found, so queries return it again.")] = False,
    ) -> dict[str, Any]:
        """Answer "do you remember that …?": the best-matching memories and units that were set aside (dormant,
        archived, merged, superseded, quarantined), each with when, which step, why, its weight and what it was
        merged into or superseded by."""
        return call("why", {"text": text, "limit": limit, "revive": revive})

    @mcp.tool()
    def memory_stats() -> dict[str, Any]:
        """Size and shape of the memory: raw, active, dormant and archived records, knowledge units, counts by
        kind, agent and category, active tokens and bytes on disk."""
        return call("stats", {})

    return mcp
