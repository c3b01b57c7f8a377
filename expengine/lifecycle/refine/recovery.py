"""Errors and what the agent did about them: an error's variable parts named (`generalise`), errors
that differ only in those grouped (`error_shape`), and the recovery paths between an error and the
failing tool's next result."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .wording import Wording

SCRATCHPAD_TOOLS = ("think",)  # the agent thinking aloud through a tool: never a step of a procedure


def tool_arguments(record: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(record.get("tool_args") or "null")
    except (json.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


@dataclass
class RecoveryPath:
    """What an agent did between an error and the next result of the failing tool: the calls that
    worked (and notes), in order; how often it was taken and how often the tool then worked."""

    steps: tuple[str, ...]
    count: int = 0
    recovered: int = 0
    args: dict[tuple[int, str], Counter] = field(default_factory=dict)  # (step, argument) → rendered values
    renamed: Counter = field(default_factory=Counter)  # 'dateutil → python-dateutil': the value respelled
    notes: Counter = field(default_factory=Counter)  # what the agent noted first

    def describe(self, words: Wording) -> str:
        """ "call pip_install(package=<module>)", with each argument's most common rendering, and the note
        most runs of the path took first; or, when most runs noted something first however worded, the
        note worded alike in at least two of them ("waiting 60 s before retrying"), never a one-off."""
        parts = []
        note, seen = self.notes.most_common(1)[0] if self.notes else ("", 0)
        if note and (2 * seen >= self.count or (seen >= 2 and 2 * sum(self.notes.values()) >= self.count)):
            parts.append(words.note.format(note=note))
        for i, step in enumerate(self.steps):
            args = ", ".join(
                f"{name}={values.most_common(1)[0][0]}" for (j, name), values in self.args.items() if j == i
            )
            parts.append(words.call.format(call=f"{step}({args})"))
        return words.joined(parts)

    def respelled(self, words: Wording) -> str:
        """' (respelled where needed, e.g. jwt → PyJWT)', or nothing."""
        if not self.renamed:
            return ""
        return words.respelled.format(examples=", ".join(v for v, _ in self.renamed.most_common(2)))


@dataclass
class ErrorPattern:
    tool: str
    example: str  # the first error's first line, its variable parts named: "No module named <module>"
    count: int = 0
    followups: Counter = field(default_factory=Counter)
    recovered: int = 0
    paths: dict[tuple[str, ...], RecoveryPath] = field(default_factory=dict)

    def best_path(self) -> RecoveryPath | None:
        """The path that recovered most often (ties: the more reliable); None when nothing recovered."""
        working = [p for p in self.paths.values() if p.recovered]
        return max(working, key=lambda p: (p.recovered, p.recovered / p.count, -len(p.steps)), default=None)

    def failed_paths(self) -> list[RecoveryPath]:
        """Paths after which the tool never worked: pitfalls, never actions."""
        return sorted((p for p in self.paths.values() if not p.recovered), key=lambda p: -p.count)


_QUOTED_VALUE = re.compile(r"(?:(\w+) named |(\w+) )?'([^'\s]{1,80})'")
_PATH_LIKE = re.compile(r"/|\.\w{1,4}$")
_ID = re.compile(r"\b[A-Z]{2,}\d+\b|\b[a-z]+_\d+\b")
_NOT_A_NAME = frozenset("a an the is was of in on at to for from with by and or not no as".split())
_CODE_OR_NUMBER = re.compile(r"\b[A-Z]{2,}\d+\b|\b[a-z]+_\d+\b|\d+(?:[.:\-/]\d+)*")


def generalise(message: str) -> tuple[str, dict[str, str]]:
    """An error's first line with its variable parts named, and their values:
    "No module named 'jwt'" → ("No module named <module>", {"module": "jwt"}); quoted paths are <file>,
    codes like HAT030 are <id>. Errors that differ only in these values are one error."""
    values: dict[str, str] = {}

    def name(match: re.Match) -> str:
        named, before, value = match.groups()
        if _PATH_LIKE.search(value):
            var = "file"
        elif named or (before and before.isascii() and before.isalpha() and before.lower() not in _NOT_A_NAME):
            var = (named or before).lower()
        else:
            var = "value"
        key, n = var, 2
        while key in values and values[key] != value:
            key, n = f"{var}{n}", n + 1
        values[key] = value
        prefix = f"{named} named " if named else (f"{before} " if before else "")
        return f"{prefix}<{key}>"

    text = _QUOTED_VALUE.sub(name, message.strip().splitlines()[0] if message.strip() else "")

    def code(match: re.Match) -> str:
        key = "id" if "id" not in values or values["id"] == match.group(0) else f"id{len(values)}"
        values[key] = match.group(0)
        return f"<{key}>"

    return _ID.sub(code, text), values


def error_shape(message: str) -> str:
    """Group errors that differ only in named values, ids, numbers and dates ('flight HAT030 …' ~ 'flight HAT229 …')."""
    return _CODE_OR_NUMBER.sub("#", generalise(message)[0])[:120]


PATH_WINDOW = 12  # records after an error in which the failing tool's next result is looked for


def recovery_path(
    after: list[dict[str, Any]], tool: str, values: dict[str, str]
) -> tuple[tuple[str, ...], dict, list, list, bool | None]:
    """The calls that worked between an error and the failing tool's next result (each argument rendered
    as the error's variable, <module>, when it passes that value), the notes taken, whether the tool then
    worked (None: no rerun seen)."""
    steps: list[str] = []
    notes: list[str] = []
    args: dict[tuple[int, str], str] = {}
    renamed: list[str] = []
    by_value = {v.lower(): k for k, v in values.items()}
    pending: dict[str, tuple[str, dict[str, Any]]] = {}
    for r in after[:PATH_WINDOW]:
        name = r.get("tool_name")
        if r["kind"] == "observation" and r.get("content"):
            notes.append(" ".join(r["content"].split())[:80])
        elif r["kind"] == "tool_call" and name and name != tool and name not in SCRATCHPAD_TOOLS:
            pending[name] = (name, tool_arguments(r))
        elif r["kind"] == "tool_result" and name == tool:
            return tuple(steps), args, notes, renamed, not r.get("tool_error")
        elif r["kind"] == "tool_result" and name in pending:
            _, call_args = pending.pop(name)
            if r.get("tool_error"):
                continue  # a call that failed is no step of the path (see the pitfalls)
            for arg, value in call_args.items():
                text = str(value)
                near = next((k for v, k in by_value.items() if len(v) >= 3 and v in text.lower()), None)
                if text.lower() in by_value:
                    rendered = f"<{by_value[text.lower()]}>"
                elif near:  # the value, spelled another way: dateutil → python-dateutil
                    rendered = f"<{near}>"
                    renamed.append(f"{values[near]} → {text}")
                else:
                    rendered = "…"
                args[(len(steps), arg)] = rendered
            steps.append(name)
    return tuple(steps), args, notes, renamed, None


def followup(after: list[dict[str, Any]], tool: str) -> tuple[str, bool]:
    """What the agent did next in the session after an error, and whether the same tool then worked."""
    steps: list[str] = []
    recovered = False
    for r in after[:4]:
        if r["kind"] == "observation" and r.get("content"):
            steps.append(f"noted {r['content'][:100]!r}")
        elif r["kind"] == "tool_call":
            steps.append(f"retried {tool}" if r.get("tool_name") == tool else f"called {r.get('tool_name')}")
        elif r["kind"] == "tool_result" and r.get("tool_name") == tool:
            recovered = not r.get("tool_error")
            steps.append(f"{tool} {'succeeded' if recovered else 'failed again'}")
            break
    return ", then ".join(steps[:3]), recovered
