"""One project whose sessions come from three coding agents (bench/mixed_agents.py --mixed): real Claude
Code, Gemini CLI and Aider sessions from ../shared/data/wild, given one project each by rewriting the
fields their readers take it from. Every agent's records land in that project, and the project's test
runner is the one its records ran, whichever agent ran it (Claude Code in one project, Gemini CLI in the
other). The sessions are real; their shared project is made up. (Whether the compacted store's answer
names the runner first is the bench's measure, not asserted here: see docs/benchmarks.md.)"""

from __future__ import annotations

from pathlib import Path

from helpers import load, shared_data


def test_each_agents_sessions_land_in_the_one_project_and_its_runner_is_found(make_engine, tmp_path: Path):
    bench = load("mixed_agents")
    files = bench.mixed_projects(shared_data("wild"), tmp_path / "logs")
    engine = make_engine(store=tmp_path / "store", overrides={"llm.mode": "template"})
    ingested = engine.ingest([str(f) for f in files])
    assert ingested.rejected == 0 and ingested.stored > 1000
    assert bench.project_agents(engine) == {p: ["aider", "claude-code", "gemini-cli"] for p in ("alpha", "beta")}
    found = {p: (program, agents) for p, (program, _, _, agents) in bench.runners(engine).items()}
    assert found == {"alpha": ("mix", ["claude-code"]), "beta": ("go", ["gemini-cli"])}
