"""Coding-agent trajectories (mini-swe-agent and SWE-agent) turned into native events.

Read as chat, a coding agent's run is all messages: its commands sit in fenced blocks and their
results in the next user turn, so no tool rule or error rule could be mined from it. Here each
command becomes a `tool_call` named by the program it runs, and its observation a `tool_result`
that is an error when the return code is not 0. The instance id is the session and the goal; the
task (`<pr_description>`) is the goal's description; the repository goes to `meta.repo`, so a rule
can say which project it holds for.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import PurePosixPath
from typing import Any, Iterator

from ..store.vocabulary import TIME_ASSUMED, EventError
from .events import Event, as_text

# mini-swe-agent runs a reply's command only when it holds exactly one block of this form.
_COMMAND = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_THOUGHT = re.compile(r"^\s*THOUGHT:\s*", re.IGNORECASE)
_RETURN_CODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_TAG = re.compile(r"</?(?:output|output_head|output_tail|elided_chars|warning)>")
_TASK = re.compile(r"<pr_description>\s*(?:Consider the following PR description:\s*)?(.*?)\s*</pr_description>", re.S)
_SEPARATORS = {"&&", "||", ";", "|"}
_WRAPPERS = {"sudo", "time", "env", "nohup", "command", "exec"}
_PYTHONS = re.compile(r"^python(\d+(\.\d+)?)?$")


def is_trajectory(obj: Any) -> bool:
    """A mini-swe-agent run (`trajectory_format` mini-swe-agent-*) or an SWE-agent one (`trajectory` steps)."""
    if not isinstance(obj, dict):
        return False
    if str(obj.get("trajectory_format", "")).startswith("mini-swe-agent") and isinstance(obj.get("messages"), list):
        return True
    steps = obj.get("trajectory")
    if isinstance(steps, list):
        return all(isinstance(s, dict) and "action" in s for s in steps[:3])
    history = obj.get("history")  # a demonstration: the history alone, actions on the assistant's turns
    return isinstance(history, list) and any(isinstance(h, dict) and "action" in h for h in history[:8])


def program_of(command: str) -> str:
    """The program a shell command runs: after `cd … &&`, variable assignments and wrappers such as
    `timeout 60`; `python -m pytest` runs pytest, and `./tests/runtests.py` is named by its path."""
    try:
        words = shlex.split(command, comments=True, posix=True)
    except ValueError:
        words = command.split()
    # shlex keeps `a&&b` glued only when written without spaces; split those too.
    tokens = [t for w in words for t in re.split(r"(&&|\|\||;)", w) if t]
    i = 0
    while i < len(tokens):
        word = tokens[i]
        if word == "cd":  # `cd DIR &&`: skip to what follows the separator
            i += 1
            while i < len(tokens) and tokens[i] not in _SEPARATORS:
                i += 1
            i += 1
            continue
        if word in _SEPARATORS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word) or word in _WRAPPERS:
            i += 1
            continue
        if word == "timeout":
            i += 1
            while i < len(tokens) and (tokens[i].startswith("-") or re.match(r"^\d+[smhd]?$", tokens[i])):
                i += 1
            continue
        break
    if i >= len(tokens):
        return "shell"
    program = tokens[i]
    if _PYTHONS.match(PurePosixPath(program).name):
        rest = tokens[i + 1 : i + 3]
        if len(rest) == 2 and rest[0] == "-m":
            return rest[1]
        return "python"
    if program.startswith("/"):
        return PurePosixPath(program).name
    return program[2:] if program.startswith("./") else program


def repo_of(instance_id: str) -> str | None:
    """`django__django-11099` → `django/django` (SWE-bench's instance naming)."""
    match = re.match(r"^(.+?)__(.+)-\d+$", instance_id)
    return f"{match.group(1)}/{match.group(2)}" if match else None


def events_from_trajectory(obj: dict[str, Any], name: str, *, agent: str, base_ts: dt.datetime) -> Iterator[Event]:
    """One run → goal (the task), the agent's thoughts, its commands and their results, the patch."""
    instance = str(obj.get("instance_id") or name)
    repo = repo_of(instance)
    meta: dict[str, Any] = {"repo": repo} if repo else {}
    step = 0

    def new(kind: str, **fields: Any) -> Event:
        nonlocal step
        ev = Event(
            ts=base_ts + dt.timedelta(milliseconds=step),
            kind=kind,
            id=f"{instance}/step{step}",
            agent=agent,
            session=instance,
            goal_id=instance,
        )
        ev.meta = {**meta, TIME_ASSUMED: True, **fields.pop("meta", {})}
        for key, value in fields.items():
            setattr(ev, key, value)
        step += 1
        return ev

    if "messages" in obj:
        yield from _mini_swe_agent(obj["messages"], instance, new)
    else:
        yield from _swe_agent(obj, instance, new)


def _goal(task_text: str, new: Any) -> Event:
    match = _TASK.search(task_text)
    description = match.group(1) if match else task_text
    return new("goal", role="user", goal_status="open", goal_description=description)


def _mini_swe_agent(messages: list[Any], instance: str, new: Any) -> Iterator[Event]:
    goal_opened = False
    pending: Event | None = None  # the command whose output the next user turn holds
    for message in messages:
        if not isinstance(message, dict):
            raise EventError(f"run {instance}: every message must be an object")
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else (as_text(content) or "")
        if role == "system":
            continue  # the same instructions open every run: not a memory
        if role == "user" and not goal_opened:
            goal_opened = True
            yield _goal(text, new)  # the task; the instructions around it repeat in every run
            continue
        if role == "assistant":
            commands = _COMMAND.findall(text)
            thought = _THOUGHT.sub("", _COMMAND.sub("", text)).strip()
            if thought:
                yield new("message", role="assistant", content=thought)
            pending = None
            if len(commands) == 1:
                command = commands[0].strip()
                pending = new(
                    "tool_call", role="assistant", tool_name=program_of(command), tool_args={"command": command}
                )
                yield pending
            continue
        if role != "user":
            raise EventError(f"run {instance}: unknown role {role!r}")
        code = _RETURN_CODE.search(text)
        if pending is not None and code:
            output = _TAG.sub("", _RETURN_CODE.sub("", text, count=1)).strip()
            failed = int(code.group(1)) != 0
            yield new(
                "tool_result",
                role="tool",
                tool_name=pending.tool_name,
                tool_error=(f"exit {code.group(1)}: {output}" if output else f"exit {code.group(1)}")
                if failed
                else None,
                tool_result=None if failed else output,
                meta={"call_record": pending.id, "returncode": int(code.group(1))},
            )
        elif text.strip():
            # a format complaint from the harness, or the submitted patch at the end
            yield new("observation", content=text.strip())
        pending = None


def _swe_agent(obj: dict[str, Any], instance: str, new: Any) -> Iterator[Event]:
    history = obj["history"] if isinstance(obj.get("history"), list) else []
    # the task is the first user turn that is not a demonstration (`is_demo`: another task, solved as an example)
    task = next(
        (
            h.get("content")
            for h in history
            if isinstance(h, dict) and h.get("role") == "user" and h.get("content") and not h.get("is_demo")
        ),
        None,
    )
    if task:
        yield _goal(task if isinstance(task, str) else (as_text(task) or ""), new)
    steps = obj["trajectory"] if isinstance(obj.get("trajectory"), list) else _steps_of(history)
    for number, item in enumerate(steps):
        if not isinstance(item, dict):
            raise EventError(f"run {instance}: trajectory step {number} must be an object")
        thought = str(item.get("thought") or "").strip()
        if thought:
            yield new("message", role="assistant", content=thought)
        action = str(item.get("action") or "").strip()
        if not action:
            continue
        call = new("tool_call", role="assistant", tool_name=program_of(action), tool_args={"command": action})
        yield call
        observation = str(item.get("observation") or "").strip()
        failed = _looks_failed(observation)
        yield new(
            "tool_result",
            role="tool",
            tool_name=call.tool_name,
            tool_error=observation if failed else None,
            tool_result=None if failed else observation,
            meta={"call_record": call.id},
        )


def _steps_of(history: list[Any]) -> list[dict[str, Any]]:
    """A history's actions, each with the observation that answered it (a demonstration has no trajectory)."""
    steps: list[dict[str, Any]] = []
    for entry in history:
        if not isinstance(entry, dict) or entry.get("is_demo"):
            continue
        if entry.get("role") == "assistant" and entry.get("action"):
            steps.append({"thought": entry.get("thought"), "action": entry["action"], "observation": ""})
        elif entry.get("role") in ("tool", "user") and steps and not steps[-1]["observation"]:
            content = entry.get("content")
            steps[-1]["observation"] = content if isinstance(content, str) else as_text(content) or ""
    return steps


# SWE-agent logs no return code: a traceback, a missing command, an error line, or its linter refusing an edit
_FAILED = re.compile(
    r"^Traceback \(most recent call last\)|command not found|No such file or directory"
    r"|^Your proposed edit has introduced new syntax error",
    re.M,
)


def _looks_failed(observation: str) -> bool:
    head = observation[:2000]
    return bool(_FAILED.search(head) or re.match(r"^(error|usage):", head, re.I))
