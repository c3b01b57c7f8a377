"""One store fed by several coding agents' real logs, asked each project's "how do I run the tests".

    python bench/mixed_agents.py [--data ../shared/data/wild] [--out bench/results/mixed_agents.json]

The real files of `../shared/data/wild` (Claude Code, Codex, Gemini CLI, Aider, OpenHands; each file's
own project, as its reader names it in `meta.repo`) go into one store, which is compacted once. Then,
for every project whose logs ran a test command, "how do I run the tests in <project>" and "how do I
build <project>" are asked. The expected runner is the program the project's own records ran tests
with most (read from the store, not chosen here); the check is that the first answer line names it,
whichever agent ran it, and that no answer quotes another project's runner first.

No project in the wild data has sessions of more than one agent, so `--mixed` builds two that do, in a
temporary copy: real sessions of Claude Code, Gemini CLI and Aider are given one project each by
rewriting the fields their readers take the project from (Claude Code's `cwd`, Gemini CLI's
`projectHash` with a `.project_root` beside `chats/`, the working folder a `/chat share` export names,
and the folder, with a `.git`, an Aider history lies in). In one project the test runs come from Claude
Code (`mix test`), in the other from Gemini CLI (`go test`); the third agent's session, and Aider's,
ran no test. The sessions are real; only their project is made up.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SUFFIXES = {".jsonl", ".json", ".md", ".traj"}
TEST_WORDS = ("test", "pytest", "jest", "vitest", "rspec")
OVERRIDES = {"embedder.model": "minilm"}


def wild_files(data: Path) -> list[Path]:
    """Every log file in the wild data (licences, READMEs and input histories are not logs)."""
    return sorted(
        p
        for p in data.rglob("*")
        if p.is_file() and p.suffix in SUFFIXES and p.name.upper() not in ("README.MD", "LICENSE.MD")
    )


# two made-up projects, each given real sessions of three agents: (agent, file in the wild data). A
# project's test rule needs its command in two runs: `alpha`'s tests ran in two Claude Code sessions,
# `beta`'s in two Gemini CLI ones; the other agents' sessions there ran none.
MIXED = {
    "alpha": [
        ("claude-code", "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"),
        ("claude-code", "claude-code/spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"),
        ("gemini-cli", "gemini-cli/codemie/session-2025-12-01T21-45-5b959dae.json"),
        ("aider", "aider/Monochromatic/.aider.chat.history.md"),
    ],
    "beta": [
        ("claude-code", "claude-code/codemie/session-196820da.jsonl"),
        ("gemini-cli", "gemini-cli/go-ai-agent-v2/agent-chat-share.md"),
        ("gemini-cli", "gemini-cli/go-ai-agent-v2/current.md"),
        ("aider", "aider/OpenCoder/.aider.chat.history.md"),
    ],
}
AGENTS = ("claude-code", "codex", "gemini-cli", "aider", "openhands", "swe-agent")
_WORKING_IN = "I'm currently working in the directory: "


def mixed_projects(data: Path, out: Path) -> list[Path]:
    """Copies of MIXED's sessions under `out`, each project's sessions naming `out/work/<project>` as
    their project folder, however their agent records it."""
    files = []
    for project, sessions in MIXED.items():
        folder = out / "work" / project
        (folder / ".git").mkdir(parents=True, exist_ok=True)
        for agent, relative in sessions:
            source = data / relative
            text = source.read_text(encoding="utf-8")
            if agent == "claude-code":
                target = out / "claude" / project / source.name
                target.parent.mkdir(parents=True, exist_ok=True)
                lines = [json.loads(line) for line in text.splitlines() if line.strip()]
                target.write_text("".join(json.dumps(_with_cwd(line, str(folder))) + "\n" for line in lines))
            elif (
                agent == "gemini-cli" and source.suffix == ".md"
            ):  # a `/chat share` export: its preamble names the working folder
                target = out / "gemini" / project / source.name
                target.parent.mkdir(parents=True, exist_ok=True)
                old = text.split(_WORKING_IN, 1)[1].split("\n", 1)[0].strip()
                target.write_text(text.replace(old, str(folder)), encoding="utf-8")
            elif agent == "gemini-cli":  # tmp/<hash>/chats/session-*.json, with the CLI's `.project_root`
                digest = hashlib.sha256(str(folder).encode()).hexdigest()
                target = out / "gemini" / digest / "chats" / source.name
                target.parent.mkdir(parents=True, exist_ok=True)
                (target.parent.parent / ".project_root").write_text(str(folder))
                target.write_text(json.dumps({**json.loads(text), "projectHash": digest}))
            else:  # Aider keeps its history in the project's root
                target = folder / source.name
                shutil.copyfile(source, target)
            files.append(target)
    return files


def _with_cwd(line: Any, cwd: str) -> Any:
    return {**line, "cwd": cwd} if isinstance(line, dict) and "cwd" in line else line


def runners(engine: Any) -> dict[str, tuple[str, int, list[str], list[str]]]:
    """Per project: the test runner its records ran most (program and command), how often, the agents'
    files it was seen in, and those agents."""
    rows = engine.store.con.execute(
        "SELECT json_extract_string(meta, '$.repo'), tool_name, CASE WHEN json_valid(tool_args) THEN json_extract_string(tool_args, '$.command') END, "
        "source_file FROM records WHERE kind = 'tool_call' AND json_extract_string(meta, '$.repo') IS NOT NULL"
    ).fetchall()
    seen: dict[str, Counter[str]] = {}
    files: dict[tuple[str, str], set[str]] = {}
    agents: dict[tuple[str, str], set[str]] = {}
    for repo, program, command, source in rows:
        head = " ".join(str(command or "").split()[:3])  # `go test ./...`, not a commit message about tests
        if program in ("git", "echo", "cat", "grep") or not any(w in head for w in TEST_WORDS):
            continue
        seen.setdefault(repo, Counter())[program] += 1
        files.setdefault((repo, program), set()).add(Path(source or "").name)
        agents.setdefault((repo, program), set()).add(agent_of(source))
    return {
        repo: (program, n, sorted(files[(repo, program)]), sorted(agents[(repo, program)]))
        for repo, counts in seen.items()
        for program, n in [counts.most_common(1)[0]]
    }


def agent_of(source: str | None) -> str:
    """The agent that wrote a file: its folder in the wild data, or its entry in MIXED."""
    path = Path(source or "")
    names = {Path(relative).name: agent for sessions in MIXED.values() for agent, relative in sessions}
    return next((part for part in path.parts if part in AGENTS), None) or names.get(path.name, "?")


def project_agents(engine: Any) -> dict[str, list[str]]:
    """Per project: the agents whose records name it."""
    rows = engine.store.con.execute(
        "SELECT DISTINCT json_extract_string(meta, '$.repo') AS repo, source_file FROM records WHERE repo IS NOT NULL"
    ).fetchall()
    found: dict[str, set[str]] = {}
    for repo, source in rows:
        found.setdefault(repo, set()).add(agent_of(source))
    return {repo: sorted(agents) for repo, agents in found.items()}


def check(engine: Any) -> dict[str, Any]:
    """Compact once, then ask every project with a test runner for its tests and its build."""
    engine.compact(refine=True)
    expected = runners(engine)
    others = {program for program, _, _, _ in expected.values()}
    mixed = project_agents(engine)
    report: dict[str, Any] = {}
    for repo, (program, n, files, agents) in sorted(expected.items()):
        answer = engine.query(f"how do I run the tests in {repo}", touch=False).prompt.strip().splitlines()
        first = next((line for line in answer if line.lstrip("- ").startswith("[")), "")
        build = engine.query(f"how do I build {repo}", touch=False).prompt.strip().splitlines()[:3]
        report[repo] = {
            "runner": program,
            "runs": n,
            "files": files,
            "runner_agents": agents,
            "project_agents": mixed.get(repo, []),
            "first": first[:200],
            "answer": [line[:200] for line in answer[:4]],
            "names_runner": program in first,
            "names_other": sorted(p for p in others - {program} if p and f" {p} " in f" {first} "),
            "build": build,
        }
    return report


def run(files: list[Path]) -> dict[str, Any]:
    from expengine import Engine

    with tempfile.TemporaryDirectory(prefix="mixed-agents-") as tmp:
        with Engine(store=Path(tmp) / "store", overrides=OVERRIDES) as engine:
            started = time.perf_counter()
            ingested = engine.ingest([str(p) for p in files])
            ingest_s = time.perf_counter() - started
            by_project = engine.store.con.execute(
                "SELECT json_extract_string(meta, '$.repo') AS repo, count(*) FROM records GROUP BY repo ORDER BY 2 DESC"
            ).fetchall()
            projects = check(engine)
    return {
        "files": len(files),
        "stored": ingested.stored,
        "rejected": ingested.rejected,
        "ingest_s": round(ingest_s, 1),
        "records_by_project": {str(r): n for r, n in by_project},
        "projects": projects,
        "answered": sum(p["names_runner"] for p in projects.values()),
        "asked": len(projects),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "wild")
    parser.add_argument("--only", action="append", help="only files whose path holds this (repeatable)")
    parser.add_argument("--mixed", action="store_true", help="two projects, each of three agents' sessions (MIXED)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "mixed_agents.json")
    args = parser.parse_args(argv)
    if args.mixed:
        with tempfile.TemporaryDirectory(prefix="mixed-projects-") as tmp:
            report = run(mixed_projects(args.data, Path(tmp)))
    else:
        files = [p for p in wild_files(args.data) if not args.only or any(o in str(p) for o in args.only)]
        report = run(files)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return report


if __name__ == "__main__":
    main()
