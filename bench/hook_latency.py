"""Hook latency: the command `connect claude-code` installs, run as Claude Code runs it (JSON on stdin,
a fresh process each time), through a running `expengine serve` and cold (no server: the hook opens the
store itself). Targets: under 150 ms p95 through the server, under 1.5 s cold.

The store learns from Claude Code transcripts first (`--data`, default the wild spotter sessions), so
the hooks answer with real context. Per event: n calls, p50 / p95; beside them a bare `python -S` start-up
at the same moment, the floor under any hook, and the load average.

Expengine's modules are compiled to bytecode first, as an install does (`--source`: not).

  python bench/hook_latency.py [--data DIR] [-n 30] [--cold 6] [--source]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, installed_bytecode, served

from expengine.integrations.claude_code import hook_command
from expengine.integrations.hook_client import LOG_FILE

DATA = REPO / ".." / "shared" / "data" / "wild" / "claude-code" / "spotter"
PROMPT = "the tests fail after my change, how do I run them?"
ERROR = "Exit code 1\n** (CompileError) lib/spotter.ex:12: undefined function foo/0"


def first_cwd(transcripts: list[Path]) -> str:
    for path in transcripts:
        for line in path.read_text(encoding="utf-8").splitlines():
            cwd = json.loads(line).get("cwd") if line.strip().startswith("{") else None
            if cwd:
                return str(cwd)
    return os.getcwd()


def payloads(cwd: str, transcript: Path) -> dict[str, dict[str, Any]]:
    base = {"session_id": "bench", "cwd": cwd, "transcript_path": str(transcript)}
    return {
        "SessionStart": {**base, "source": "startup"},
        "UserPromptSubmit": {**base, "prompt": PROMPT},
        "PostToolUseFailure": {**base, "tool_name": "Bash", "tool_input": {"command": "mix test"}, "error": ERROR},
        "Stop": base,
    }


def call(store: Path, event: str, payload: dict[str, Any]) -> tuple[float, str]:
    started = time.perf_counter()
    child = subprocess.run(
        hook_command(event, store),
        shell=True,
        input=json.dumps({"hook_event_name": event, **payload}),
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        check=False,
    )
    return time.perf_counter() - started, child.stdout


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


def summary(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50_ms": round(1000 * percentile(values, 0.5)),
        "p95_ms": round(1000 * percentile(values, 0.95)),
    }


def bare_start() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-S", "-c", "pass"], check=True)
    return time.perf_counter() - started


def measure(store: Path, events: dict[str, dict[str, Any]], n: int) -> dict[str, Any]:
    """n calls of each event, interleaved so that a load spike costs every event alike."""
    times: dict[str, list[float]] = {e: [] for e in events}
    answered: dict[str, int] = dict.fromkeys(events, 0)
    for _ in range(n):
        for event, payload in events.items():
            seconds, out = call(store, event, payload)
            times[event].append(seconds)
            answered[event] += bool(out.strip())
    every = [v for vs in times.values() for v in vs]
    return {
        "all": summary(every),
        **{e: {**summary(v), "answered": answered[e]} for e, v in times.items()},
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from expengine import Engine

    transcripts = sorted(p for p in args.data.rglob("*.jsonl") if "subagents" not in p.parts)[: args.sessions]
    cwd = first_cwd(transcripts)
    overrides = {"llm.mode": "template"}
    report: dict[str, Any] = {"transcripts": [p.name for p in transcripts], "cwd": cwd}
    report["modules"] = installed_bytecode(not args.source)
    with tempfile.TemporaryDirectory(prefix="hook-latency-") as tmp:
        store = Path(tmp) / "store"
        with Engine(store=store, overrides=overrides) as engine:
            engine.ingest([str(p) for p in transcripts])
            engine.compact()
        events = payloads(cwd, transcripts[-1])
        context = {e: p for e, p in events.items() if e != "Stop"}
        with served(store, overrides):
            call(store, "SessionStart", events["SessionStart"])  # the server's first answer loads its caches
            report["load_before"] = os.getloadavg()
            report["server"] = measure(store, context, args.n)
            report["load_after"] = os.getloadavg()
        report["cold"] = measure(store, context, args.cold)
        # last: each hand-off starts a worker that holds the store while it ingests
        report["Stop (hand-off to a detached worker)"] = summary(
            [call(store, "Stop", events["Stop"])[0] for _ in range(3)]
        )
        log = store / LOG_FILE
        report["hook errors logged"] = log.read_text(encoding="utf-8").splitlines()[-3:] if log.exists() else []
    report["bare python -S start-up"] = summary([bare_start() for _ in range(args.cold)])
    report["targets_ms"] = {"server p95": 150, "cold p95": 1500}
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="A folder of Claude Code transcripts.")
    parser.add_argument("--sessions", type=int, default=1, help="Transcripts the store learns from first.")
    parser.add_argument("-n", type=int, default=30, help="Calls of each event through the server.")
    parser.add_argument("--cold", type=int, default=6, help="Calls of each event without a server.")
    parser.add_argument("--source", action="store_true", help="Run expengine from source, never compiled.")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        raise SystemExit(f"{args.data}: no such folder (give --data DIR of Claude Code transcripts)")
    print(json.dumps(run(args), indent=1))


if __name__ == "__main__":
    main()
