"""Replay Claude Code sessions through expengine's hooks, as Claude Code would run them.

Sessions (`<project>/<session>.jsonl`, subagents in `<session>/subagents/`) are fed in time order into
a fresh store: each transcript is written line by line into a projects folder, and at each moment the
hook command `connect` installs runs with Claude Code's JSON on stdin: SessionStart at the start,
UserPromptSubmit at each prompt, PostToolUseFailure at each failed shell command, Stop at the end of
each turn (the transcript's new lines are ingested). Compaction runs between days (or between
sessions, `--compact-every session`), through the store's server.

Measured:
- at each session start after the first: does the injected context name the project's test command
  (`--test-command`, else the most frequent first two words of its shell commands that run tests)?
- at each failed command whose error kind occurred earlier and was followed by another command: does
  the context name the program run next here? Beside BM25 over the earlier sessions' records, cut at
  the same token budget;
- hook latency p50 / p95, through the server and cold (a sample after the server stops);
- tokens injected per session (SessionStart + prompts), beside claude-mem's reported ~2,500.

Expengine's modules are compiled to bytecode first, as an install does (`--source`: not).

  python bench/coding_live.py [--data DIR] [--compact-every day|session] [--set refine.min_support=1] [--source]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from common import REPO, installed_bytecode, served, words

from expengine.ingest.sessions import project_of as named
from expengine.integrations.claude_code import hook_command
from expengine.integrations.hook_client import FOREGROUND_ENV, LOG_FILE
from expengine.query.agent_context import FIX_BUDGET
from expengine.textutil import approx_tokens, error_key

DATA = REPO / ".." / "shared" / "data" / "wild" / "claude-code"
CLAUDE_MEM_STARTUP_TOKENS = 2500
COLD_SAMPLE = 6


def project_name(cwd: str) -> str:
    return named(cwd) or ""


def sessions(data: Path) -> list[dict[str, Any]]:
    """Every main transcript under `data` with its subagents, first timestamp and cwd, oldest first."""
    found = []
    for path in sorted(data.rglob("*.jsonl")):
        if "subagents" in path.parts:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        objs = [json.loads(line) for line in lines if line.strip()]
        stamps = [o.get("timestamp") for o in objs if isinstance(o, dict) and o.get("timestamp")]
        cwd = next((o["cwd"] for o in objs if isinstance(o, dict) and o.get("cwd")), "")
        if not stamps or not cwd or not any(o.get("type") in ("user", "assistant") for o in objs):
            continue
        subagents = sorted((path.with_suffix("") / "subagents").glob("*.jsonl"))
        found.append({"path": path, "lines": lines, "objs": objs, "start": min(stamps), "cwd": cwd, "subs": subagents})
    return sorted(found, key=lambda s: s["start"])


def _blocks(obj: Any) -> list[dict[str, Any]]:
    message = obj.get("message") if isinstance(obj, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _output(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content or "")


def _program(command: str) -> str:
    from expengine.ingest.trajectories import program_of

    return program_of(command)


def shell_steps(objs: list[Any]) -> list[tuple[int, str, str | None]]:
    """(line index of the result, command, error or None) of each shell command, in order."""
    calls: dict[str, str] = {}
    steps = []
    for i, obj in enumerate(objs):
        for block in _blocks(obj):
            if block.get("type") == "tool_use" and block.get("name") == "Bash":
                calls[str(block.get("id"))] = str((block.get("input") or {}).get("command") or "")
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in calls:
                error = _output(block) if block.get("is_error") else None
                steps.append((i, calls[block["tool_use_id"]], error))
    return steps


def test_command(all_sessions: list[dict[str, Any]]) -> str:
    """The most frequent first two words of the shell commands that run tests."""
    counts: Counter[str] = Counter()
    for s in all_sessions:
        for _, command, _ in shell_steps(s["objs"]):
            for part in re.split(r"&&|;|\|", command):
                ws = part.split()
                if len(ws) >= 2 and "test" in ws[1] and not ws[0].startswith("-"):
                    counts[" ".join(ws[:2])] += 1
    return counts.most_common(1)[0][0] if counts else ""


class Hooks:
    """Runs the hook command with its JSON on stdin; keeps each answer's latency by event."""

    def __init__(self, store: Path):
        self.store = store
        self.latency: dict[str, list[float]] = {}

    def __call__(self, event: str, payload: dict[str, Any], *, label: str = "server") -> str:
        started = time.perf_counter()
        child = subprocess.run(
            hook_command(event, self.store),
            shell=True,
            input=json.dumps({"hook_event_name": event, **payload}),
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "HF_HUB_OFFLINE": "1", FOREGROUND_ENV: "1"},
            check=False,
        )
        self.latency.setdefault(f"{label} {event}", []).append(time.perf_counter() - started)
        if child.returncode or not child.stdout.strip():
            return ""
        return str(json.loads(child.stdout)["hookSpecificOutput"]["additionalContext"])


def replay(session: dict[str, Any], projects: Path, hooks: Hooks) -> dict[str, Any]:
    """One session fed line by line; what its hooks injected, and its failed commands' contexts."""
    target = projects / session["path"].name
    base = {"session_id": session["path"].stem, "transcript_path": str(target), "cwd": session["cwd"]}
    out: dict[str, Any] = {"start": hooks("SessionStart", {**base, "source": "startup"}), "prompts": [], "fixes": {}}
    steps = shell_steps(session["objs"])
    failures = {i: (command, error) for i, command, error in steps if error}
    with open(target, "w", encoding="utf-8") as f:
        for i, (line, obj) in enumerate(zip(session["lines"], session["objs"])):
            blocks = _blocks(obj) if obj.get("type") == "user" else []
            prompt = next((b["text"] for b in blocks if b.get("type") == "text"), None)
            if prompt and i > 0 and not obj.get("isMeta"):
                f.flush()
                hooks("Stop", base)  # the previous turn ended
                out["prompts"].append(hooks("UserPromptSubmit", {**base, "prompt": prompt}))
            f.write(line + "\n")
            if i in failures:
                f.flush()
                command, error = failures[i]
                payload = {**base, "tool_name": "Bash", "tool_input": {"command": command}, "error": error}
                out["fixes"][i] = hooks("PostToolUseFailure", payload)
    subagents = target.with_suffix("") / "subagents"
    subagents.mkdir(parents=True, exist_ok=True)
    for sub in session["subs"]:
        (subagents / sub.name).write_text(sub.read_text(encoding="utf-8"), encoding="utf-8")
    hooks("Stop", base)
    return out


def bm25_fix(earlier: list[dict[str, Any]], query: str) -> str:
    """BM25 over the earlier sessions' prompts, commands and outputs, cut at the hook's budget."""
    from rank_bm25 import BM25Okapi

    docs = []
    for s in earlier:
        for obj in s["objs"]:
            for block in _blocks(obj):
                kind = block.get("type")
                if kind == "text":
                    docs.append(str(block.get("text") or ""))
                elif kind == "tool_use":
                    docs.append(json.dumps(block.get("input"))[:2000])
                elif kind == "tool_result":
                    docs.append(_output(block)[:2000])
    docs = [d for d in docs if d.strip()]
    if not docs:
        return ""
    scores = BM25Okapi([words(d) or ["_"] for d in docs]).get_scores(words(query))
    shown, used = [], 0
    for i in sorted(range(len(docs)), key=lambda i: -scores[i]):
        cost = approx_tokens(docs[i])
        if used + cost > FIX_BUDGET:
            continue
        shown.append(docs[i])
        used += cost
    return "\n".join(shown)


def names(text: str, name: str) -> bool:
    return bool(name) and re.search(rf"(?<![\w/.-]){re.escape(name)}(?![\w-])", text) is not None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    all_sessions = sessions(args.data)
    overrides = {"llm.mode": "template", **dict(kv.split("=", 1) for kv in args.set)}
    tests = {project_name(s["cwd"]): args.test_command or "" for s in all_sessions}
    for project in tests:
        tests[project] = tests[project] or test_command([s for s in all_sessions if project_name(s["cwd"]) == project])
    report: dict[str, Any] = {"sessions": len(all_sessions), "test_commands": tests, "overrides": overrides}
    report["modules"] = installed_bytecode(not args.source)
    starts, fixes, tokens = [], [], []
    with tempfile.TemporaryDirectory(prefix="coding-live-") as tmp:
        store, projects = Path(tmp) / "store", Path(tmp) / "projects"
        projects.mkdir()
        hooks = Hooks(store)
        with served(store, overrides) as (client, _):
            day = None
            for n, session in enumerate(all_sessions):
                project = project_name(session["cwd"])
                today = session["start"][:10] if args.compact_every == "day" else session["path"].stem
                if day is not None and today != day:
                    client.call("compact", {})
                day = today
                earlier = [s for s in all_sessions[:n] if project_name(s["cwd"]) == project]
                out = replay(session, projects, hooks)
                ran_tests = bool(tests[project]) and any(
                    tests[project] in c for s in earlier for _, c, _ in shell_steps(s["objs"])
                )
                if ran_tests:
                    starts.append(
                        {"session": session["path"].stem, "names_test_command": tests[project] in out["start"]}
                    )
                tokens.append(approx_tokens(out["start"]) + sum(approx_tokens(p) for p in out["prompts"]))
                fixes += _fix_checks(session, earlier, out)
            report["context_samples"] = {"last_session_start": out["start"]}
        log = store / LOG_FILE
        report["hook errors logged"] = log.read_text(encoding="utf-8").splitlines()[-5:] if log.exists() else []
        for _ in range(COLD_SAMPLE):  # the server has stopped: the store is opened by each hook
            hooks("SessionStart", {"cwd": all_sessions[-1]["cwd"]}, label="cold")
            hooks(
                "PostToolUseFailure",
                {"cwd": all_sessions[-1]["cwd"], "tool_name": "Bash", "error": "Exit code 1\nfailed"},
                label="cold",
            )
    context = [v for k, vs in hooks.latency.items() if k.startswith("server") and "Stop" not in k for v in vs]
    cold = [v for k, vs in hooks.latency.items() if k.startswith("cold") for v in vs]
    report["session_start_names_test_command"] = {
        "hits": sum(s["names_test_command"] for s in starts),
        "of": len(starts),
    }
    report["fix_named_next_program"] = {
        "memory": sum(f["memory"] for f in fixes),
        "BM25 over earlier transcripts": sum(f["bm25"] for f in fixes),
        "of": len(fixes),
        "cases": fixes,
    }
    startup = [_python_startup() for _ in range(COLD_SAMPLE)]
    report["latency_ms"] = {
        "bare python start-up p50 (same machine, same moment)": round(1000 * statistics.median(startup)),
        "through the server p50/p95": [round(1000 * percentile(context, q)) for q in (0.5, 0.95)],
        "cold p50/p95": [round(1000 * percentile(cold, q)) for q in (0.5, 0.95)],
        "Stop (ingest, foreground) p50": round(1000 * statistics.median(hooks.latency.get("server Stop", [0]))),
        "calls": {k: len(v) for k, v in hooks.latency.items()},
    }
    report["tokens_per_session"] = {"each": tokens, "claude-mem start-up": CLAUDE_MEM_STARTUP_TOKENS}
    return report


def _python_startup() -> float:
    """One `python -c pass` of this interpreter: the floor under every hook's latency on this machine."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def _fix_checks(session: dict[str, Any], earlier: list[dict[str, Any]], out: dict[str, Any]) -> list[dict[str, Any]]:
    """The failed commands whose error kind occurred earlier, followed there by another command."""
    seen = {error_key(e) for s in earlier for (_, _, e), nxt in _pairs(shell_steps(s["objs"])) if e and nxt}
    checks = []
    for (i, command, error), nxt in _pairs(shell_steps(session["objs"])):
        if not error or not nxt or error_key(error) not in seen:
            continue
        program = _program(nxt[1])
        baseline = bm25_fix(earlier, f"{command}\n{error}")
        checks.append(
            {
                "error": error_key(error),
                "next": program,
                "memory": names(out["fixes"].get(i, ""), program),
                "bm25": names(baseline, program),
            }
        )
    return checks


def _pairs(steps: list[Any]) -> list[tuple[Any, Any]]:
    return list(zip(steps, [*steps[1:], None]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="A folder of Claude Code transcripts.")
    parser.add_argument("--compact-every", choices=("day", "session"), default="day")
    parser.add_argument("--test-command", default=None, help="The project's test command (default: found).")
    parser.add_argument("--set", action="append", default=[], help="A store config override, key=value.")
    parser.add_argument("--out", type=Path, default=None, help="Write the JSON report here too.")
    parser.add_argument("--source", action="store_true", help="Run expengine from source, never compiled.")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        raise SystemExit(f"{args.data}: no such folder (give --data DIR of Claude Code transcripts)")
    report = run(args)
    text = json.dumps(report, indent=1, default=str)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
