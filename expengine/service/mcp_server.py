"""`expengine mcp`: the memory as MCP tools over stdio, for agent frameworks and desktop clients.

It forwards each tool call to `expengine serve` when one runs for the store (the models stay warm
there); otherwise it opens the store itself, once, and keeps the Engine for its lifetime.
"""

from __future__ import annotations

import inspect
import threading
from typing import Annotated, Any, Callable, Optional

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import ConfigDict, Field

from .. import __version__
from ..arguments import model_of
from ..errors import ExpengineError
from ..operations import OPERATIONS, Operation
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


def declared(op: Operation, call: Callable[[str, dict[str, Any]], Any]) -> Tool:
    """The MCP tool of a declared operation: its parameters are the fields of the same strict model the
    server validates with (types, defaults, bounds, descriptions), so the two cannot drift."""
    model = model_of(op.args)
    params = []
    for name, info in model.model_fields.items():
        described = Field(description=info.description) if info.description else Field()
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if info.is_required() else info.default,
                annotation=Annotated[(info.annotation, *info.metadata, described)],
            )
        )

    def tool(**arguments: Any) -> dict[str, Any]:
        return call(op.name, arguments)

    tool.__signature__ = inspect.Signature(params, return_annotation=dict[str, Any])  # type: ignore[attr-defined]
    hints = ToolAnnotations(read_only_hint=op.read_only, destructive_hint=op.destructive)
    return strict(Tool.from_function(tool, name=op.tool, description=op.mcp, annotations=hints))


ADDS = ToolAnnotations(read_only_hint=False, destructive_hint=False)  # new records only, never a change to old ones
READS = ToolAnnotations(read_only_hint=True, destructive_hint=False)


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

    return MCPServer(
        name="expengine",
        version=__version__,
        instructions=INSTRUCTIONS,
        tools=[
            *(declared(op, call) for op in OPERATIONS.values() if op.mcp),
            strict(Tool.from_function(memory_ingest, annotations=ADDS)),
            strict(Tool.from_function(memory_status, annotations=READS)),
        ],
    )
