"""A query's arguments, declared once. `Engine.query` builds a `QueryArgs`; the CLI's `query`
options, and the strict request model the server and the MCP server validate with
(`service.ops.QueryArgs`), are made from its fields, their defaults and their metadata.

A plain dataclass on purpose: the CLI builds its options from it at start, and importing pydantic
there would cost every client call (the server path) ~0.13 s."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, fields
from typing import Any, Optional, Union

# `since` / `until`: ISO-8601 text (no zone means UTC) from the CLI and the server, or a datetime
# from Python callers; filters.as_time reads both.
Moment = Optional[Union[str, dt.datetime]]
# Bounds a client's request is checked against (the text's own, `query.max_text_chars`, is config)
NAME_CHARS = 65_536  # an id, a name, a time: ingest keeps ids as given (10,000 characters are tested)
MAX_BUDGET = 100_000  # prompt tokens


def _arg(
    help: str,
    *,
    default: Any = None,
    ge: int | None = None,
    le: int | None = None,
    max_length: int | None = None,
    **cli: Any,
) -> Any:
    """A field with its help text and bounds. `cli`: how the command line spells it when not
    `--name` (`flag`, e.g. "-k"; `off`, the flag and help of an option that turns a True default off)."""
    metadata = {"help": help, "ge": ge, "le": le, "max_length": max_length, **cli}
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class QueryArgs:
    text: str = field(metadata={"help": "The situation the agent is in, or what it is about to do.", "min_length": 1})
    k: int = _arg("At most this many hits.", default=5, ge=1, le=100, flag="-k")
    touch: bool = _arg(
        "Reinforce and log what is shown (false leaves the store unchanged).",
        default=True,
        off=("--no-touch", "Do not reinforce or log what is shown (the store is left unchanged)."),
    )
    agent: Optional[str] = _arg("Only this agent's memories and units.", max_length=NAME_CHARS)
    category: Optional[str] = _arg("Only this category.", max_length=NAME_CHARS)
    kind: Optional[str] = _arg(
        "A record kind (message, tool_call, tool_result, …: memories only) or rule / fact (units only).",
        max_length=NAME_CHARS,
    )
    outcome: Optional[str] = _arg("success or failure (memories only).", max_length=NAME_CHARS)
    since: Moment = _arg("Not older than this (ISO-8601, UTC).", max_length=NAME_CHARS)
    until: Moment = _arg("Not newer than this (ISO-8601, UTC).", max_length=NAME_CHARS)
    goal: Optional[str] = _arg("Only memories of this goal id.", max_length=NAME_CHARS)
    project: Optional[str] = _arg(
        "The coding project asked about (django/django, django, or its folder): its test, build and "
        "error rules come first.",
        max_length=NAME_CHARS,
    )
    budget: Optional[int] = _arg(
        "Stop adding hits when the prompt text would pass this many tokens.", ge=1, le=MAX_BUDGET
    )
    include_dormant: bool = _arg("Search dormant memories too.", default=False)
    expand: Optional[bool] = _arg("Show a unit's sources most relevant to the query (default: on).")
    session: Optional[str] = _arg(
        "The asking session: when it ends with an outcome, that credits what was shown.", max_length=NAME_CHARS
    )
    goal_id: Optional[str] = _arg("The asking goal: its outcome credits what was shown.", max_length=NAME_CHARS)

    def __post_init__(self) -> None:
        from ..errors import InputError

        for f in fields(self):
            value, low, high = getattr(self, f.name), f.metadata.get("ge"), f.metadata.get("le")
            if isinstance(value, int) and low is not None and value < low:
                raise InputError(f"{f.name} must be at least {low}, got {value}")
            if isinstance(value, int) and high is not None and value > high:
                raise InputError(f"{f.name} must be at most {high}, got {value}")
