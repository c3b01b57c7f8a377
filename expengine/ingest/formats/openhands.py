"""OpenHands: a `--save-trajectory-path` JSON list of events, one event per file under
`~/.openhands/sessions/<sid>/events/<n>.json`, the V1 SDK's events (`kind`: ActionEvent,
ObservationEvent, MessageEvent …) under `~/.openhands/conversations/<id>/events/`, and evaluation
`output.jsonl` (one task a line, its events in `history`).

An event is an action (`action`: message, run, run_ipython, edit, read, browse, finish, think …) or
an observation (`observation`: run with `exit_code`, edit, read, error …) that names its action by
`cause`. A run observation with a non-zero exit code, an `error` observation and an edit whose
content starts `ERROR:` are errors. The system prompt and recalls are boilerplate; thoughts are
skipped and counted. The project is the task's repository, else the workspace the commands ran in.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Callable, Iterator

from ...store.vocabulary import EventError
from ..events import Event, as_text
from ..trajectories import repo_of
from .base import AgentReader, FileContext, counted, mapping, project_meta, timestamp

_BOILERPLATE = {"system", "recall", "change_agent_state", "null", "agent_state_changed"}
_V1_SKIPPED = {"SystemPromptEvent", "ConversationStateUpdateEvent", "Condensation", "CondensationRequest", "PauseEvent"}


def is_openhands_event(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    if obj.get("kind") in ("ActionEvent", "ObservationEvent", "MessageEvent", "SystemPromptEvent", "AgentErrorEvent"):
        return True
    return isinstance(obj.get("action", obj.get("observation")), str) and "kind" not in obj and "role" not in obj


def is_openhands_trajectory(obj: Any) -> bool:
    return isinstance(obj, list) and bool(obj) and all(is_openhands_event(e) for e in obj[:3])


def is_openhands_output(obj: Any) -> bool:
    """An evaluation output line: `history` of events (or of [action, observation] pairs) and the task."""
    if not isinstance(obj, dict) or not isinstance(obj.get("history"), list) or "instruction" not in obj:
        return False
    first = obj["history"][:1]
    return not first or is_openhands_event(first[0]) or (isinstance(first[0], list) and len(first[0]) == 2)


class OpenHandsReader(AgentReader):
    """One conversation's events, in order; an observation finds its action by `cause` or call id."""

    def __init__(self, *, agent: str, session: str, now: dt.datetime, meta: dict[str, Any] | None = None) -> None:
        super().__init__(agent=agent)
        self.session = session
        self.now = now
        self.meta: dict[str, Any] = dict(meta or {})
        self.n = 0
        self.last_call: str | None = None  # an observation without `cause` answers the last action
        self.folder: Path | None = None  # one event per file: where an observation's cause is read from

    def output(self, obj: dict[str, Any]) -> list[Event]:
        """An evaluation line: the task (its instruction is the goal when no user message opens the
        history), then each event, pairs flattened."""
        instance = mapping(obj, "instance")
        issue = mapping(obj, "issue")
        repo = instance.get("repo") or (f"{issue['owner']}/{issue['repo']}" if issue.get("owner") else None)
        repo = repo or repo_of(str(obj.get("instance_id") or ""))
        if repo:
            self.meta["repo"] = repo
        events = [e for item in obj["history"] for e in (item if isinstance(item, list) else [item])]
        out: list[Event] = []
        if not any(_is_user_message(e) for e in events) and str(obj.get("instruction") or "").strip():
            out.extend(self.prompt(str(obj["instruction"]).strip(), **self.common(None)))
        for e in events:
            out.extend(self.one(e))
        return out

    def common(self, e: dict[str, Any] | None) -> dict[str, Any]:
        self.n += 1
        eid = e.get("id") if e else None
        ts = timestamp(e.get("timestamp") if e else None, self.now + dt.timedelta(milliseconds=self.n))
        meta = dict(self.meta) if e and e.get("timestamp") else {**self.meta, "time_assumed": True}
        return {
            "id": f"{self.session}/{eid if eid not in (None, '') else f'n{self.n}'}",
            "ts": ts,
            "session": self.session,
            "meta": meta,
        }

    def one(self, e: Any) -> list[Event]:
        if not isinstance(e, dict):
            raise EventError("an OpenHands event must be a JSON object")
        if "kind" in e:
            return self.v1(e)
        nested = mapping(e, "args")
        if str(e.get("thought") or nested.get("thought") or "").strip():
            self.skip("thought")
        action, observation = e.get("action"), e.get("observation")
        if action in _BOILERPLATE or observation in _BOILERPLATE:
            return self.skip(str(action or observation))
        args: dict[str, Any] = nested or {k: v for k, v in e.items() if k not in ("action", "thought")}
        common = self.common(e)
        if action == "message":
            text = str(args.get("content") or e.get("message") or "").strip()
            if not text:
                return self.skip("empty")
            if e.get("source", "user") == "user":
                return self.prompt(text, **common)
            return [self.event("message", role="assistant", content=text, **common)]
        if action == "think":
            return self.skip("thinking")
        if action == "finish":
            text = str(
                args.get("final_thought")
                or args.get("thought")
                or e.get("message")
                or as_text(args.get("outputs"))
                or ""
            )
            return (
                [self.event("message", role="assistant", content=text.strip(), **common)]
                if text.strip()
                else self.skip("empty")
            )
        if action:
            call_args = {
                k: v
                for k, v in args.items()
                if k
                not in (
                    "thought",
                    "keep_prompt",
                    "is_confirmed",
                    "action_risk",
                    "security_risk",
                    "hidden",
                    "confirmation_state",
                )
            }
            if "code" in call_args and "command" not in call_args:
                call_args["command"] = "python"  # run_ipython: named as Python, the code kept in the args
            call_id = str(e.get("id", f"n{self.n}"))
            self.last_call = call_id
            ev = self.call(call_id, str(action), call_args, **common)
            if action not in ("run", "run_ipython"):
                ev.tool_name = str(action)  # an edit's `command` (str_replace, view) is no program
            return [ev]
        if observation:
            extras = mapping(e, "extras") or e
            metadata = mapping(extras, "metadata")
            content = str(e.get("content") or "")
            cause = e.get("cause")
            cause_id = str(cause) if cause is not None else self.last_call
            if cause is not None and cause_id not in self.calls and self.folder is not None:
                self._read_cause(str(cause))
            code = extras.get("exit_code", metadata.get("exit_code"))
            failed = (
                observation == "error"
                or (observation == "run" and isinstance(code, int) and code not in (0, -1))
                or (observation == "edit" and content.lstrip().startswith("ERROR:"))
                or (observation == "run_ipython" and "Traceback (most recent call last)" in content)
            )
            self.workspace(metadata.get("working_dir"))
            result = self.result(cause_id, content or str(e.get("message") or ""), failed, **common)
            if isinstance(code, int):
                result.meta = {**result.meta, "exit_code": code}
            return [result]
        raise EventError("an OpenHands event needs `action` or `observation`")

    def _read_cause(self, cause: str) -> None:
        """The action an observation answers, from its own file: its call is remembered, not stored again."""
        action = self.folder / f"{cause}.json" if self.folder else None
        if action is not None and action.is_file():
            try:
                self.one(json.loads(action.read_text(encoding="utf-8")))
            except (ValueError, EventError):
                return  # that file is read (and rejected) as its own source; this result names no call

    def workspace(self, folder: Any) -> None:
        """The folder commands ran in: the cwd, and the project where the task named none."""
        if folder and "cwd" not in self.meta:
            found = project_meta(folder)
            self.meta.update(found if "repo" not in self.meta else {"cwd": found["cwd"]})

    def v1(self, e: dict[str, Any]) -> list[Event]:
        """The V1 SDK: `kind` ActionEvent (`action.kind`, `tool_call_id`), ObservationEvent, MessageEvent …"""
        kind = e.get("kind")
        if kind in _V1_SKIPPED:
            return self.skip(str(kind))
        common = self.common(e)
        if kind == "MessageEvent":
            message = e.get("llm_message") or {}
            content = message.get("content")
            text = (
                content
                if isinstance(content, str)
                else "\n".join(str(c.get("text", "")) for c in content or [] if isinstance(c, dict))
            ).strip()
            if not text:
                return self.skip("empty")
            if e.get("source") == "user" or message.get("role") == "user":
                return self.prompt(text, **common)
            return [self.event("message", role="assistant", content=text, **common)]
        if kind == "ActionEvent":
            action = mapping(e, "action")
            if e.get("thought") or e.get("reasoning_content") or e.get("thinking_blocks"):
                self.skip("thought")
            if action.get("kind") == "ThinkAction":
                return self.skip("thinking")
            if action.get("kind") == "FinishAction":
                text = str(action.get("message") or "").strip()
                return [self.event("message", role="assistant", content=text, **common)] if text else self.skip("empty")
            args = {k: v for k, v in action.items() if k != "kind"}
            name = str(e.get("tool_name") or action.get("kind") or "tool")
            ev = self.call(e.get("tool_call_id"), name, args, **common)
            if action.get("kind") != "ExecuteBashAction":
                ev.tool_name = name  # a file editor's `command` (view, create) is no program
            return [ev]
        if kind == "ObservationEvent":
            obs = mapping(e, "observation")
            if e.get("tool_name") == "finish":
                return self.skip("finish")
            metadata = mapping(obs, "metadata")
            code = obs.get("exit_code") if obs.get("exit_code") is not None else metadata.get("exit_code")
            self.workspace(metadata.get("working_dir"))
            output = _v1_output(obs)
            failed = bool(obs.get("error")) or (isinstance(code, int) and code not in (0, -1))
            result = self.result(e.get("tool_call_id"), output, failed, **common)
            if isinstance(code, int):
                result.meta = {**result.meta, "exit_code": code}
            return [result]
        if kind == "AgentErrorEvent":
            return [self.result(e.get("tool_call_id"), str(e.get("error") or "error"), True, **common)]
        return self.skip(str(kind))


def _v1_output(obs: dict[str, Any]) -> str:
    content = obs.get("content")
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict)).strip()
    return str(
        obs.get("output")
        or content
        or obs.get("message")
        or as_text({k: v for k, v in obs.items() if k != "kind"})
        or ""
    )


def _is_user_message(e: Any) -> bool:
    if not isinstance(e, dict):
        return False
    return (e.get("action") == "message" and e.get("source", "user") == "user") or (
        e.get("kind") == "MessageEvent" and e.get("source") == "user"
    )


def folder_events(folder: Path, *, agent: str, now: dt.datetime) -> Iterator[tuple[str, list[Event], int, str | None]]:
    """`sessions/<sid>/events/<n>.json`: one event per file, in their numbered order, read by one reader
    (an observation names its action by `cause`); (file, its events, its size, the error) per file."""
    reader = OpenHandsReader(agent=agent, session=folder.parent.name, now=now)
    files = sorted(folder.glob("*.json"), key=lambda p: (int(p.stem) if p.stem.isdigit() else 1 << 62, p.name))
    for path in files:
        data = path.read_bytes()
        try:
            yield str(path), reader.one(json.loads(data)), len(data), None
        except ValueError as exc:
            yield str(path), [], len(data), f"malformed JSON: {exc}"
        except EventError as exc:
            yield str(path), [], len(data), str(exc)


def recognises(obj: Any) -> bool:
    return is_openhands_output(obj) or is_openhands_event(obj) or is_openhands_trajectory(obj)


def object_reader(ctx: FileContext) -> Callable[[Any, int], list[Event]]:
    """Evaluation output (a task a line), a trajectory (a list of events), or events one by one (one per
    file in `events/`: an observation's action is then read from the file its `cause` names)."""
    path = Path(ctx.label)
    in_events = path.parent.name == "events"
    shared = OpenHandsReader(agent=ctx.agent, session=path.parent.parent.name if in_events else path.stem, now=ctx.now)
    shared.folder = path.parent if in_events else None

    def read(obj: Any, number: int) -> list[Event]:
        if is_openhands_output(obj):
            task = OpenHandsReader(
                agent=ctx.agent, session=str(obj.get("instance_id") or f"{path.stem}:{number}"), now=ctx.now
            )
            return task.output(obj)
        if isinstance(obj, list):
            return [ev for e in obj for ev in shared.one(e)]
        return shared.one(obj)

    return counted(shared, read)
