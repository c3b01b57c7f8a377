"""One store fed by several coding agents' real logs, asked each project's "how do I run the tests".

    python bench/mixed_agents.py [--data ../shared/data/wild] [--out bench/results/mixed_agents.json]

The real files of `../shared/data/wild` (Claude Code, Codex, Gemini CLI, Aider, OpenHands; each file's
own project, as its reader names it in `meta.repo`) go into one store, which is compacted once. Then,
for every project whose logs ran a test command, "how do I run the tests in <project>" and "how do I
build <project>" are asked. The expected runner is the program the project's own records ran tests
with most (read from the store, not chosen here); the check is that the first answer line names it,
whichever agent ran it, and that no answer quotes another project's runner first.
"""

from __future__ import annotations

import argparse
import json
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


def runners(engine: Any) -> dict[str, tuple[str, int, list[str]]]:
    """Per project: the test runner its records ran most (program and command), how often, and the
    agents' files it was seen in."""
    rows = engine.store.con.execute(
        "SELECT json_extract_string(meta, '$.repo'), tool_name, CASE WHEN json_valid(tool_args) THEN json_extract_string(tool_args, '$.command') END, "
        "source_file FROM records WHERE kind = 'tool_call' AND json_extract_string(meta, '$.repo') IS NOT NULL"
    ).fetchall()
    seen: dict[str, Counter[str]] = {}
    files: dict[tuple[str, str], set[str]] = {}
    for repo, program, command, source in rows:
        head = " ".join(str(command or "").split()[:3])  # `go test ./...`, not a commit message about tests
        if program in ("git", "echo", "cat", "grep") or not any(w in head for w in TEST_WORDS):
            continue
        seen.setdefault(repo, Counter())[program] += 1
        files.setdefault((repo, program), set()).add(Path(source or "").name)
    return {
        repo: (program, n, sorted(files[(repo, program)]))
        for repo, counts in seen.items()
        for program, n in [counts.most_common(1)[0]]
    }


def check(engine: Any) -> dict[str, Any]:
    """Compact once, then ask every project with a test runner for its tests and its build."""
    engine.compact(refine=True)
    expected = runners(engine)
    others = {program for program, _, _ in expected.values()}
    report: dict[str, Any] = {}
    for repo, (program, n, files) in sorted(expected.items()):
        answer = engine.query(f"how do I run the tests in {repo}", touch=False).prompt.strip().splitlines()
        first = next((line for line in answer if line.lstrip("- ").startswith("[")), "")
        build = engine.query(f"how do I build {repo}", touch=False).prompt.strip().splitlines()[:3]
        report[repo] = {
            "runner": program,
            "runs": n,
            "files": files,
            "first": first[:200],
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
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "mixed_agents.json")
    args = parser.parse_args(argv)
    files = [p for p in wild_files(args.data) if not args.only or any(o in str(p) for o in args.only)]
    report = run(files)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return report


if __name__ == "__main__":
    main()
