"""`ingest --from-agents` on a synthetic home: every tool's layout, thousands of session files.

    python bench/sources.py [--files 2000] [--mb 100] [--grow 20] [--out bench/results/sources.json]

The home holds `--files` session files spread over the tools' layouts (Claude Code, Codex, Gemini CLI
JSON and JSONL, Cline and Roo Code task folders, opencode storage, Goose, OpenHands event folders,
Aider histories under a projects root), about `--mb` MB in all: each session a few prompts, calls and
results, the results padded with command output (most of the bytes, as in real logs). Every text is
unique, so every record is really embedded. Three runs of the CLI, each its own process:

1. the first `ingest --from-agents`: MB/s over the bytes read;
2. again with nothing new: its time and the bytes it read (targets: under 2 s, under 1 MB);
3. after `--grow` JSONL files gained a few lines each: the bytes it read (only those lines).

Peak memory is each process's maximum resident set and `cpu_s` its user + system CPU seconds
(`/usr/bin/time`; target: under 300 MB); `baseline` is the same command on a home of one line (the
libraries, the store and the encoder loaded, one record written), so each run's peak less it is what
reading the home added. `read_only` is the readers alone
(every source read into events, nothing stored): their own MB/s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from expengine.models.onnx import cache_dir  # noqa: E402

ROUNDS = 4  # prompt, call and result rounds per session (--rounds)
WORDS = "build test lint deploy parser cache index query retry timeout socket schema migration fixture".split()


def text(rng: random.Random, n: int, tag: str) -> str:
    return f"{tag} " + " ".join(rng.choice(WORDS) for _ in range(n))


def pad(rng: random.Random, size: int, tag: str) -> str:
    line = f"{tag} " + " ".join(rng.choice(WORDS) for _ in range(12))
    return "\n".join(f"{line} {i}" for i in range(max(1, size // (len(line) + 6))))


def claude(rng, i, out, size, rounds) -> list[str]:
    sid = f"cc{i:05d}"
    lines = []
    for n in range(rounds):
        common = {"sessionId": sid, "timestamp": f"2026-01-01T00:00:{n:02d}Z", "cwd": f"/home/u/proj{i % 40}"}
        lines.append(
            {
                **common,
                "type": "user",
                "uuid": f"{sid}-{n}u",
                "message": {"role": "user", "content": text(rng, 12, f"{sid} ask {n}")},
            }
        )
        use = {
            "type": "tool_use",
            "id": f"{sid}-t{n}",
            "name": "Bash",
            "input": {"command": f"pytest -x tests/t{i}_{n}.py"},
        }
        lines.append(
            {**common, "type": "assistant", "uuid": f"{sid}-{n}a", "message": {"role": "assistant", "content": [use]}}
        )
        result = {
            "type": "tool_result",
            "tool_use_id": f"{sid}-t{n}",
            "content": pad(rng, size // rounds, f"{sid} out {n}"),
            "is_error": n == 2,
        }
        lines.append(
            {**common, "type": "user", "uuid": f"{sid}-{n}r", "message": {"role": "user", "content": [result]}}
        )
    path = out / ".claude" / "projects" / f"-home-u-proj{i % 40}" / f"{sid}.jsonl"
    return write_lines(path, lines)


def codex(rng, i, out, size, rounds) -> list[str]:
    sid = f"cx{i:05d}"
    lines: list[dict[str, Any]] = [
        {
            "timestamp": "2026-01-01T00:00:00Z",
            "type": "session_meta",
            "payload": {"id": sid, "cwd": f"/home/u/proj{i % 40}"},
        }
    ]
    for n in range(rounds):
        ts = f"2026-01-01T00:00:{n + 1:02d}Z"
        lines.append(
            {
                "timestamp": ts,
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": text(rng, 12, f"{sid} ask {n}")}],
                },
            }
        )
        lines.append(
            {
                "timestamp": ts,
                "type": "response_item",
                "payload": {
                    "type": "function_call",
                    "name": "shell",
                    "call_id": f"{sid}c{n}",
                    "arguments": json.dumps({"command": ["bash", "-lc", f"cargo test t{i}_{n}"]}),
                },
            }
        )
        lines.append(
            {
                "timestamp": ts,
                "type": "response_item",
                "payload": {
                    "type": "function_call_output",
                    "call_id": f"{sid}c{n}",
                    "output": json.dumps(
                        {"output": pad(rng, size // rounds, f"{sid} out {n}"), "metadata": {"exit_code": n % 2}}
                    ),
                },
            }
        )
    return write_lines(out / ".codex" / "sessions" / "2026" / "01" / "01" / f"rollout-{sid}.jsonl", lines)


def gemini(rng, i, out, size, rounds) -> list[str]:
    sid = f"gm{i:05d}"
    messages = []
    for n in range(rounds):
        messages.append(
            {
                "id": f"{sid}u{n}",
                "timestamp": f"2026-01-01T00:00:{n:02d}Z",
                "type": "user",
                "content": text(rng, 12, f"{sid} ask {n}"),
            }
        )
        call = {"id": f"{sid}c{n}", "name": "run_shell_command", "args": {"command": f"npm test -- t{i}_{n}"}, "status": "error" if n == 1 else "success",
                "result": [{"functionResponse": {"response": {"output": pad(rng, size // rounds, f"{sid} out {n}")}}}]}  # fmt: skip
        messages.append(
            {
                "id": f"{sid}g{n}",
                "timestamp": f"2026-01-01T00:00:{n:02d}Z",
                "type": "gemini",
                "content": "",
                "toolCalls": [call],
            }
        )
    chats = out / ".gemini" / "tmp" / f"h{i % 40:03d}" / "chats"
    if i % 2:
        header = {
            "sessionId": sid,
            "projectHash": f"h{i % 40:03d}",
            "startTime": "2026-01-01T00:00:00Z",
            "kind": "main",
        }
        return write_lines(chats / f"session-{sid}.jsonl", [header, *messages])
    path = chats / f"session-{sid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"sessionId": sid, "projectHash": f"h{i % 40:03d}", "messages": messages}))
    return []


def cline(rng, i, out, size, rounds) -> list[str]:
    ext = "saoudrizwan.claude-dev" if i % 2 else "rooveterinaryinc.roo-cline"
    task = out / ".config" / "Code" / "User" / "globalStorage" / ext / "tasks" / f"{1733000000000 + i}"
    task.mkdir(parents=True, exist_ok=True)
    ui = [{"ts": 1733000000000 + i, "type": "say", "say": "task", "text": text(rng, 12, f"cl{i} task")}]
    for n in range(rounds):
        ui.append({"ts": 1733000000001 + i + n, "type": "ask", "ask": "command", "text": f"make test{i}_{n}"})
        ui.append(
            {
                "ts": 1733000000002 + i + n,
                "type": "say",
                "say": "command_output",
                "text": pad(rng, size // rounds, f"cl{i} out {n}") + f"\nExit code: {n % 2}",
            }
        )
    (task / "ui_messages.json").write_text(json.dumps(ui))
    api = [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": f"<task>x</task><environment_details>\n# Current Working Directory (/home/u/proj{i % 40}) Files\n</environment_details>",
                }
            ],
        }
    ]
    (task / "api_conversation_history.json").write_text(json.dumps(api))
    (task / "task_metadata.json").write_text(json.dumps({"model_usage": [{"model_id": "m"}]}))
    return []


def opencode(rng, i, out, size, rounds) -> list[str]:
    storage = out / ".local" / "share" / "opencode" / "storage"
    sid = f"ses_{i:05d}"
    (storage / "session" / "p").mkdir(parents=True, exist_ok=True)
    (storage / "session" / "p" / f"{sid}.json").write_text(
        json.dumps({"id": sid, "projectID": "p", "directory": f"/home/u/proj{i % 40}"})
    )
    for n in range(rounds):
        mid = f"msg_{i:05d}_{n}"
        (storage / "message" / sid).mkdir(parents=True, exist_ok=True)
        (storage / "message" / sid / f"{mid}.json").write_text(
            json.dumps(
                {"id": mid, "role": "user" if n % 2 == 0 else "assistant", "time": {"created": 1733000000000 + n}}
            )
        )
        (storage / "part" / mid).mkdir(parents=True, exist_ok=True)
        part = ({"id": f"prt_{mid}", "type": "text", "text": text(rng, 12, f"{sid} ask {n}")} if n % 2 == 0 else
                {"id": f"prt_{mid}", "type": "tool", "tool": "bash", "callID": f"{mid}c", "state": {"status": "completed", "input": {"command": f"go test ./t{i}"}, "output": pad(rng, size // rounds, f"{sid} out {n}")}})  # fmt: skip
        (storage / "part" / mid / f"prt_{mid}.json").write_text(json.dumps(part))
    return []


def goose(rng, i, out, size, rounds) -> list[str]:
    lines: list[dict[str, Any]] = [{"working_dir": f"/home/u/proj{i % 40}", "description": f"g{i}", "message_count": 8}]
    for n in range(rounds):
        lines.append(
            {
                "role": "user",
                "created": 1733000000 + n,
                "content": [{"type": "text", "text": text(rng, 12, f"go{i} ask {n}")}],
            }
        )
        lines.append(
            {
                "role": "assistant",
                "created": 1733000000 + n,
                "content": [
                    {
                        "type": "toolRequest",
                        "id": f"go{i}r{n}",
                        "toolCall": {
                            "status": "success",
                            "value": {"name": "developer__shell", "arguments": {"command": f"pytest t{i}_{n}"}},
                        },
                    }
                ],
            }
        )
        lines.append(
            {
                "role": "user",
                "created": 1733000000 + n,
                "content": [
                    {
                        "type": "toolResponse",
                        "id": f"go{i}r{n}",
                        "toolResult": {
                            "status": "success",
                            "value": [{"type": "text", "text": pad(rng, size // rounds, f"go{i} out {n}")}],
                        },
                    }
                ],
            }
        )
    return write_lines(out / ".local" / "share" / "goose" / "sessions" / f"go{i:05d}.jsonl", lines)


def openhands(rng, i, out, size, rounds) -> list[str]:
    events = out / ".openhands" / "sessions" / f"oh{i:05d}" / "events"
    events.mkdir(parents=True, exist_ok=True)
    items = [{"id": 0, "source": "user", "action": "message", "args": {"content": text(rng, 12, f"oh{i} ask")}}]
    for n in range(rounds):
        items.append({"id": 2 * n + 1, "source": "agent", "action": "run", "args": {"command": f"make check{i}_{n}"}})
        items.append(
            {
                "id": 2 * n + 2,
                "source": "agent",
                "observation": "run",
                "cause": 2 * n + 1,
                "content": pad(rng, size // rounds, f"oh{i} out {n}"),
                "extras": {"metadata": {"exit_code": n % 2}},
            }
        )
    for item in items:
        (events / f"{item['id']}.json").write_text(json.dumps(item))
    return []


def aider(rng, i, out, size, rounds) -> list[str]:
    project = out / "src" / f"proj{i:05d}"
    project.mkdir(parents=True, exist_ok=True)
    body = [f"# aider chat started at 2026-01-01 00:00:{i % 60:02d}\n"]
    for n in range(rounds):
        body.append(f"#### {text(rng, 12, f'ai{i} ask {n}')}\n\nOk.\n\n#### /run pytest t{i}_{n}\n")
        body.extend(f"> {line}\n" for line in pad(rng, size // rounds, f"ai{i} out {n}").splitlines())
        body.append("\n")
    (project / ".aider.chat.history.md").write_text("".join(body))
    return []


def write_lines(path: Path, lines: list[dict[str, Any]]) -> list[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return [str(path)]


LAYOUTS = [claude, codex, gemini, cline, opencode, goose, openhands, aider]


def build_home(home: Path, files: int, mb: float, rounds: int = ROUNDS, seed: int = 7) -> tuple[list[str], int]:
    rng = random.Random(seed)
    size = int(mb * 1e6 / files)
    growable: list[str] = []
    for i in range(files):
        growable += LAYOUTS[i % len(LAYOUTS)](rng, i, home, size, rounds)
    total = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
    return growable, total


def grow(paths: list[str], n: int, rng: random.Random) -> int:
    """Append a few lines to `n` JSONL sources (in each one's own shape: a copy of its last lines, new ids)."""
    added = 0
    for path in paths[:n]:
        lines = Path(path).read_text().splitlines()
        new = [json.dumps(_fresh(json.loads(line), rng)) + "\n" for line in lines[-3:]]
        with open(path, "a") as f:
            f.write("".join(new))
        added += sum(len(x.encode()) for x in new)
    return added


def _fresh(obj: Any, rng: random.Random) -> Any:
    """The same line with every id and text made new."""
    tag = f"grown{rng.randrange(10**9)}"
    blob = json.dumps(obj)
    for key in ("uuid", "call_id", "id", "tool_use_id"):
        blob = blob.replace(f'"{key}": "', f'"{key}": "{tag}')
    return json.loads(blob.replace(" out ", f" {tag} out "))


# the variables that move a tool's folders away from HOME: unset, so the synthetic home is the one read
_TOOL_HOMES = (
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "GEMINI_CLI_HOME",
    "OPENHANDS_HOME",
)


def read_only(home: Path) -> dict[str, Any]:
    """Every source read into events as the first run reads them, nothing stored or embedded: the readers'
    own rate (in this process, with HOME pointed at the synthetic home)."""
    import datetime as dt
    from types import SimpleNamespace

    from expengine.config import IngestConfig
    from expengine.ingest.agents import read_plan
    from expengine.ingest.discovery import find_sources
    from expengine.ingest.incremental import plan

    saved = {k: os.environ.pop(k) for k in (*_TOOL_HOMES, "HOME") if k in os.environ}
    os.environ["HOME"] = str(home)
    try:
        started = time.perf_counter()
        store: Any = SimpleNamespace(config=SimpleNamespace(ingest=IngestConfig()))
        moved: dict[str, Any] = {}
        sizes: dict[str, int] = {}
        events = 0
        for source in find_sources(None, [str(home / "src")]):
            events += sum(
                i.event is not None for i in read_plan(store, plan(source, None), dt.datetime(2026, 1, 1), moved, sizes)
            )
        seconds = time.perf_counter() - started
    finally:
        os.environ.update(saved)
    return {"seconds": round(seconds, 2), "events": events, "mb_per_s": round(sum(sizes.values()) / 1e6 / seconds, 2)}


def baseline(tmp: Path, env: dict[str, str]) -> float:
    """Peak memory of `ingest --from-agents` on a home holding one Claude Code line."""
    home = tmp / "home-baseline"
    line = {"type": "user", "sessionId": "b1", "uuid": "b1u", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/home/u/p",
            "message": {"role": "user", "content": "run the tests"}}  # fmt: skip
    write_lines(home / ".claude" / "projects" / "-home-u-p" / "b1.jsonl", [line])
    return run(tmp / "store-baseline", home, {**env, "HOME": str(home)})["peak_rss_mb"]


def run(store: Path, home: Path, env: dict[str, str]) -> dict[str, Any]:
    peak_file = store.parent / "peak_kb"
    cmd = [
        "/usr/bin/time",
        "-f",
        "%M %U %S",
        "-o",
        str(peak_file),
        sys.executable,
        "-m",
        "expengine",
        "--store",
        str(store),
        "ingest",
        "--from-agents",
        "--root",
        str(home / "src"),
        "--json",
    ]
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"ingest failed ({done.returncode}): {done.stderr[-800:]}")
    result = json.loads(done.stdout)
    peak_kb, user_s, system_s = peak_file.read_text().split()[-3:]
    peak = int(peak_kb) / 1024
    ingest = result["ingest"]
    return {
        "wall_s": round(wall, 2),
        "ingest_s": ingest["seconds"],
        "bytes_read": result["bytes_read"],
        "sources_read": result["read_sources"],
        "unchanged": result["unchanged"],
        "by_reason": result["by_reason"],
        "read": ingest["read"],
        "stored": ingest["stored"],
        "duplicates": ingest["duplicates"],
        "rejected": ingest["rejected"],
        "skipped": ingest.get("skipped", {}),
        "peak_rss_mb": round(peak, 1),
        "cpu_s": round(float(user_s) + float(system_s), 2),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--grow", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="prompt/call/result rounds per session")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "sources.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        home, store = Path(tmp) / "home", Path(tmp) / "store"
        growable, total = build_home(home, args.files, args.mb, args.rounds)
        env = {k: v for k, v in os.environ.items() if k not in _TOOL_HOMES}
        # the encoder's exported model stays where it is cached: the synthetic home would export it again
        env.update(
            {"HOME": str(home), "EXPENGINE_CACHE_DIR": str(cache_dir()), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
        )
        floor = baseline(Path(tmp), env)
        reading = read_only(home)
        first = run(store, home, env)
        first["mb_per_s"] = round(first["bytes_read"] / 1e6 / first["ingest_s"], 2)
        second = run(store, home, env)
        appended = grow(growable, args.grow, random.Random(11))
        third = run(store, home, env)
        report = {
            "files": args.files,
            "rounds": args.rounds,
            "home_mb": round(total / 1e6, 1),
            "baseline_peak_rss_mb": floor,
            "read_only": reading,
            "first": first,
            "nothing_new": second,
            "grown": {**third, "files_grown": args.grow, "bytes_appended": appended},
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
