"""The log formats ingest reads, one entry each: its name, how to recognise one of its JSON objects (a
line of JSONL, or a whole file), and how one file's objects become events.

A file's format is the one that recognises most of its first lines (`readers.sniff`), so a Claude Code
session is one whatever its first line's type. A new format is a module with its reader and one
`Format(...)` line in FORMATS; the order there is the order of recognition (native last: it is the
fallback and says what a bad native line lacks).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from ..events import Event, event_from_native
from ..openai_chat import events_from_run, is_run
from ..otel import Read, is_otlp_object, read_otlp
from ..outcomes import events_from_outcome, is_outcome_line, is_report, outcome_of_line, outcomes_of_report
from ..trajectories import events_from_trajectory, is_trajectory
from . import aider, cline, gemini, goose, opencode, openhands
from .claude_code import ClaudeCodeReader, is_claude_code
from .codex import CodexReader, is_codex


@dataclass(frozen=True)
class Context:
    """What a file's reader knows besides its objects."""

    label: str  # the file's name as shown in rejects
    agent: str  # for events that name no agent
    now: dt.datetime  # the ingest's time, for formats that log none


# one object (and its line number) -> its events; raises EventError (a reject) or Skipped (counted)
ObjectReader = Callable[[Any, int], list[Event]]


@dataclass(frozen=True)
class Format:
    name: str
    what: str  # what one of its objects is, for the error when a forced format meets something else
    recognises: Callable[[Any], bool]
    reader: Callable[[Context], ObjectReader]
    # formats read whole rather than by object (an OTLP file: a trace's spans come in several batches)
    read_file: Callable[[IO[bytes]], Iterator[Read]] | None = None
    # text formats (Markdown chat logs): recognised by the file's first bytes, read whole
    recognises_text: Callable[[str], bool] | None = None
    read_text: Callable[[IO[bytes], Context], Iterator[Read]] | None = None


def _trajectory(ctx: Context) -> ObjectReader:
    run_name = Path(ctx.label).name.split(".")[0]
    return lambda obj, _: list(events_from_trajectory(obj, run_name, agent=ctx.agent, base_ts=ctx.now))


def _chat_run(ctx: Context) -> ObjectReader:
    return lambda obj, number: list(events_from_run(obj, number, agent=ctx.agent, base_ts=ctx.now))


def _outcomes(ctx: Context) -> ObjectReader:
    def read(obj: Any, _: int) -> list[Event]:
        pairs = outcomes_of_report(obj) if is_report(obj) else [outcome_of_line(obj)]
        return [ev for s, o in pairs for ev in events_from_outcome(s, o, agent=ctx.agent, ts=ctx.now)]

    return read


def _no_object(obj: Any) -> bool:
    """A text format: no JSON object is one of its own."""
    return False


def _no_reader(ctx: Context) -> ObjectReader:
    return lambda obj, _: []


def _native(obj: Any, _: int) -> list[Event]:
    return [event_from_native(obj)]


FORMATS: list[Format] = [
    Format(
        "openhands",
        "an OpenHands event, trajectory or evaluation output line",
        openhands.recognises,
        openhands.object_reader,
    ),  # before swe-agent: its demonstrations are a `history` of `action`s too
    Format(
        "swe-agent",
        "a mini-swe-agent or SWE-agent trajectory (`messages` with `trajectory_format`, or `trajectory`)",
        is_trajectory,
        _trajectory,
    ),
    Format(
        "claude-code",
        "a Claude Code session line",
        is_claude_code,
        lambda ctx: ClaudeCodeReader(agent=ctx.agent).events,
    ),
    Format(
        "codex",
        "a Codex rollout line (`type` and `payload`)",
        is_codex,
        lambda ctx: CodexReader(agent=ctx.agent, label=ctx.label).events,
    ),
    Format("gemini-cli", "a Gemini CLI session (JSON, or JSONL lines)", gemini.recognises, gemini.object_reader),
    Format(
        "cline",
        "a Cline or Roo Code task's ui_messages.json or api_conversation_history.json",
        cline.recognises,
        cline.object_reader,
    ),
    Format(
        "opencode", "an opencode session (export, or storage/session file)", opencode.recognises, opencode.object_reader
    ),
    Format("goose", "a Goose session line", goose.recognises, goose.object_reader),
    Format(
        "aider",
        "an Aider chat history (.aider.chat.history.md)",
        _no_object,
        _no_reader,
        recognises_text=aider.is_aider_history,
        read_text=aider.read_history,
    ),
    Format(
        "gemini-share",
        "a Gemini CLI /chat share Markdown export",
        _no_object,
        _no_reader,
        recognises_text=gemini.is_gemini_share,
        read_text=gemini.read_share,
    ),
    Format("openai-chat", "a chat run (`messages` or `traj` list)", is_run, _chat_run),
    Format(
        "outcomes",
        "an outcome (`session` and `outcome`, or an sb-cli report)",
        lambda obj: is_report(obj) or is_outcome_line(obj),
        _outcomes,
    ),
    Format("otel", "an OTLP JSON traces document", is_otlp_object, lambda ctx: lambda obj, _: [], read_file=read_otlp),
    Format("native", "a native event", lambda obj: isinstance(obj, dict) and "kind" in obj, lambda ctx: _native),
]
NAMES = ("auto", *(f.name for f in FORMATS))


def by_name(name: str) -> Format:
    return next(f for f in FORMATS if f.name == name)


def recognise_text(head: str) -> Format | None:
    """The text format whose first lines these are (None: none)."""
    return next((f for f in FORMATS if f.recognises_text is not None and f.recognises_text(head)), None)


def recognise(obj: Any) -> str | None:
    """The first format that recognises this object (None: none does, not even native)."""
    return next((f.name for f in FORMATS if f.recognises(obj)), None)
