"""Cline and Roo Code: a folder per task under the editor's `globalStorage/<extension>/tasks/<id>/`,
holding `ui_messages.json` (what the panel shows: `{ts, type: ask | say, ask, say, text}`),
`api_conversation_history.json` (the Anthropic messages sent to the model) and `task_metadata.json`
(files in context, models used).

The task folder reads as one session: the panel's messages carry the times and every step, so they
are the events; the API history gives the working folder (its `<environment_details>` names it) and
is read on its own only where no `ui_messages.json` is beside it. `say: task` and `user_feedback` are
the user's words (the first the goal); `command` and `tool` are calls, `command_output` a command's
result (an error when it reports a non-zero exit code); `api_req_failed`, `error`, `diff_error` and
a `mistake_limit_reached` ask are errors. `reasoning` and thinking blocks are skipped and counted,
as are the request bookkeeping (`api_req_started`, checkpoints) and partial (still streaming) rows.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any, Callable

from ...store.vocabulary import EventError
from ..events import Event, as_text
from .base import AgentReader, FileContext, counted, from_ms, project_meta

UI_FILE, API_FILE, METADATA_FILE = "ui_messages.json", "api_conversation_history.json", "task_metadata.json"
TASK_FILES = (UI_FILE, API_FILE, METADATA_FILE)
_CWD = re.compile(r"# Current (?:Working|Workspace) Directory \(([^)\n]+)\)")
_EXIT = re.compile(r"exit code:?\s*(-?\d+)", re.IGNORECASE)
_TASK = re.compile(r"<task>\s*(.*?)\s*</task>", re.DOTALL)
_FEEDBACK = re.compile(r"<feedback>\s*(.*?)\s*</feedback>", re.DOTALL)
_RESULT = re.compile(r"^\[(\w+)(?: for '(.*?)')?\] Result:\s*", re.DOTALL)
_XML_TOOL = re.compile(
    r"<(execute_command|read_file|write_to_file|replace_in_file|apply_diff|search_files|list_files|"
    r"list_code_definition_names|browser_action|use_mcp_tool|access_mcp_resource|ask_followup_question|"
    r"attempt_completion|new_task|insert_content|search_and_replace)>(.*?)</\1>",
    re.DOTALL,
)
_PARAM = re.compile(r"<(\w+)>(.*?)</\1>", re.DOTALL)
_BOOKKEEPING = {
    "api_req_started",
    "api_req_finished",
    "api_req_retried",
    "api_req_deleted",
    "deleted_api_reqs",
    "checkpoint_created",
    "checkpoint_saved",
    "shell_integration_warning",
    "task_progress",
    "info",
    "condense_context",
    "mcp_server_request_started",
    "subtask_result",
    "load_mcp_documentation",
    "clineignore_error",
}
_QUIET_ASKS = {"resume_task", "resume_completed_task", "completion_result", "command_output", "new_task"}


def is_cline_ui(obj: Any) -> bool:
    return (
        isinstance(obj, list)
        and bool(obj)
        and all(isinstance(m, dict) and "ts" in m and m.get("type") in ("ask", "say") for m in obj[:3])
    )


def is_cline_api(obj: Any) -> bool:
    """Anthropic messages whose first user turn carries Cline's `<task>` or `<environment_details>`."""
    if not (isinstance(obj, list) and obj and isinstance(obj[0], dict) and obj[0].get("role") == "user"):
        return False
    text = _text(obj[0].get("content"))
    return "<task>" in text or "<environment_details>" in text


def task_meta(folder: Path) -> dict[str, Any]:
    """The working folder (from the API history's environment details) and the models used."""
    meta: dict[str, Any] = {}
    api = folder / API_FILE
    if api.is_file():
        with api.open("rb") as f:
            match = _CWD.search(f.read(1 << 20).decode("utf-8", "replace"))
        if match:
            meta.update(project_meta(match.group(1).strip()))
    try:
        metadata = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        metadata = None
    if isinstance(metadata, dict):
        models = [
            m.get("model_id") for m in metadata.get("model_usage") or [] if isinstance(m, dict) and m.get("model_id")
        ]
        if models:
            meta["model"] = models[-1]
        files = [
            str(f["path"]) for f in metadata.get("files_in_context") or [] if isinstance(f, dict) and f.get("path")
        ]
        if files:
            meta["files"] = sorted(set(files))[:50]
    return meta


class ClineReader(AgentReader):
    def __init__(self, *, agent: str, task: str, now: dt.datetime, meta: dict[str, Any] | None = None) -> None:
        super().__init__(agent=agent)
        self.task = task
        self.now = now
        self.meta = dict(meta or {})
        self.last_call: str | None = None

    def common(self, key: str, ts: dt.datetime, assumed: bool = False) -> dict[str, Any]:
        meta = {**self.meta, "time_assumed": True} if assumed else self.meta
        return {"id": f"{self.task}/{key}", "ts": ts, "session": self.task, "meta": meta}

    def ui(self, messages: list[Any]) -> list[Event]:
        out: list[Event] = []
        for n, m in enumerate(messages):
            if not isinstance(m, dict):
                raise EventError(f"ui_messages.json item {n} is not an object")
            out.extend(self.ui_message(m, n))
        return out

    def ui_message(self, m: dict[str, Any], n: int) -> list[Event]:
        if m.get("partial"):
            return self.skip("partial")
        kind = m.get("say") if m.get("type") == "say" else m.get("ask")
        text = str(m.get("text") or "").strip()
        common = self.common(
            f"{m.get('ts')}/{n}",
            from_ms(m.get("ts"), self.now),
        )
        if m.get("type") == "say":
            if kind in ("task", "user_feedback", "user_feedback_diff"):
                return self.prompt(text, **common) if text else self.skip("empty")
            if kind in ("text", "completion_result"):
                return [self.event("message", role="assistant", content=text, **common)] if text else self.skip("empty")
            if kind == "reasoning":
                return self.skip("reasoning")
            if kind == "command_output":
                return self.output(text, common)
            if kind in ("command", "tool", "use_mcp_server", "browser_action", "browser_action_launch"):
                return self.ui_call(str(kind), text, common)
            if kind in ("mcp_server_response", "browser_action_result"):
                return [self.result(self.last_call, text, False, **common)]
            if kind in ("error", "diff_error", "rooignore_error"):
                return [
                    self.result(self.last_call if kind == "diff_error" else None, text or str(kind), True, **common)
                ]
            if kind in _BOOKKEEPING:
                return self.skip(str(kind))
            return self.skip(f"say {kind}")
        if kind in ("command", "tool", "use_mcp_server", "browser_action_launch"):
            return self.ui_call(str(kind), text, common)
        if kind in ("api_req_failed", "mistake_limit_reached", "auto_approval_max_req_reached"):
            return [
                self.result(None, text or str(kind), True, **{**common, "meta": {**common["meta"], "failure": kind}})
            ]
        if kind == "followup":
            question = _json(text).get("question") if text.startswith("{") else text
            return [self.event("message", role="assistant", content=str(question or text), **common)] if text else []
        if kind in _QUIET_ASKS:
            return self.skip(f"ask {kind}")
        return self.skip(f"ask {kind}")

    def ui_call(self, kind: str, text: str, common: dict[str, Any]) -> list[Event]:
        if kind == "command":
            command = text.removesuffix("REQ_APP").strip()  # the panel's marker that the command asks approval
            if (
                self.last_call
                and self.calls.get(self.last_call)
                and self.calls[self.last_call].tool_args == {"command": command}
            ):
                return self.skip("repeated ask")  # the say that follows an approved ask
            call = self.call(common["id"], "execute_command", {"command": command}, **common)
        else:
            args = _json(text) if text.startswith("{") else {"text": text}
            name = str(args.get("tool") or args.get("toolName") or kind)
            call = self.call(common["id"], name, args, **common)
            call.tool_name = name  # an edit's fields are no command line
        self.last_call = call.tool_call_id
        return [call]

    def output(self, text: str, common: dict[str, Any]) -> list[Event]:
        match = _EXIT.search(text)
        code = int(match.group(1)) if match else None
        result = self.result(self.last_call, text, code not in (None, 0), **common)
        if code is not None:
            result.meta = {**result.meta, "exit_code": code}
        return [result]

    def api(self, messages: list[Any]) -> list[Event]:
        """The API history alone: no times of its own (the task id is its start, in ms), tools as blocks
        or as Cline's XML tags, their results as `[tool for 'x'] Result:` user text."""
        base = from_ms(int(self.task), self.now) if self.task.isdigit() else self.now
        out: list[Event] = []
        for n, m in enumerate(messages):
            if not isinstance(m, dict):
                raise EventError(f"api_conversation_history.json item {n} is not an object")
            blocks = m.get("content")
            blocks = [{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks or []
            for k, block in enumerate(blocks):
                if not isinstance(block, dict):
                    continue
                ts = from_ms(m.get("ts"), base + dt.timedelta(milliseconds=n))
                common = self.common(f"api{n}/{k}", ts, assumed="ts" not in m)
                out.extend(self.api_block(m.get("role"), block, common))
        return out

    def api_block(self, role: Any, block: dict[str, Any], common: dict[str, Any]) -> list[Event]:
        kind = block.get("type")
        if kind in ("thinking", "redacted_thinking", "reasoning"):
            return self.skip("thinking")
        if kind == "tool_use":
            call = self.call(block.get("id"), str(block.get("name") or "tool"), block.get("input"), **common)
            self.last_call = call.tool_call_id
            return [call]
        if kind == "tool_result":
            text = _text(block.get("content"))
            match = _EXIT.search(text)
            failed = bool(block.get("is_error")) or bool(match and int(match.group(1)) != 0)
            return [self.result(block.get("tool_use_id"), text, failed, **common)]
        if kind != "text":
            return self.skip(str(kind))
        text = re.sub(
            r"<environment_details>.*?(</environment_details>|$)", "", str(block.get("text") or ""), flags=re.DOTALL
        ).strip()
        if not text:
            return self.skip("environment details")
        if role == "user":
            result = _RESULT.match(text)
            if result:
                body = text[result.end() :]
                match = _EXIT.search(body)
                failed = body.lstrip().startswith(("Error", "The tool execution failed")) or bool(
                    match and int(match.group(1)) != 0
                )
                return [self.result(self.last_call, body, failed, **common)]
            task = _TASK.search(text) or _FEEDBACK.search(text)
            return self.prompt(task.group(1) if task else text, **common)
        out: list[Event] = []
        prose = _XML_TOOL.sub("", text)
        prose = re.sub(r"<thinking>.*?</thinking>", "", prose, flags=re.DOTALL).strip()
        if "<thinking>" in text:
            self.skip("thinking")
        if prose:
            out.append(self.event("message", role="assistant", content=prose, **common))
        for t, tool in enumerate(_XML_TOOL.finditer(text)):
            args = {p.group(1): p.group(2).strip() for p in _PARAM.finditer(tool.group(2))}
            at = {**common, "id": f"{common['id']}/t{t}"}
            if tool.group(1) == "attempt_completion":
                out.append(self.event("message", role="assistant", content=args.get("result", ""), **at))
                continue
            call = self.call(at["id"], tool.group(1), args, **at)
            if tool.group(1) != "execute_command":
                call.tool_name = tool.group(1)
            self.last_call = call.tool_call_id
            out.append(call)
        return out


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"text": text}
    return value if isinstance(value, dict) else {"value": value}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return as_text(content) or ""


def task_events(folder: Path, *, agent: str, now: dt.datetime) -> tuple[list[Event], ClineReader]:
    """A task folder as one session: its panel messages (or, without them, its API history)."""
    reader = ClineReader(agent=agent, task=folder.name, now=now, meta=task_meta(folder))
    ui, api = folder / UI_FILE, folder / API_FILE
    if ui.is_file():
        return reader.ui(json.loads(ui.read_text(encoding="utf-8"))), reader
    if api.is_file():
        return reader.api(json.loads(api.read_text(encoding="utf-8"))), reader
    raise EventError(f"no {UI_FILE} or {API_FILE} in the task folder {folder}")


def recognises(obj: Any) -> bool:
    return is_cline_ui(obj) or is_cline_api(obj)


def object_reader(ctx: FileContext) -> Callable[[Any, int], list[Event]]:
    """A task's `ui_messages.json` (read with the files beside it: the folder is the session) or, alone,
    its `api_conversation_history.json`."""
    folder = Path(ctx.label).parent
    on_disk = ctx.label != "<stdin>"
    reader = ClineReader(
        agent=ctx.agent,
        task=folder.name if on_disk else "stdin",
        now=ctx.now,
        meta=task_meta(folder) if on_disk else {},
    )
    return counted(reader, lambda obj, _: reader.ui(obj) if is_cline_ui(obj) else reader.api(obj))
