"""One project whose sessions come from three coding agents (bench/mixed_agents.py --mixed): real Claude
Code, Gemini CLI and Aider sessions from ../shared/data/wild, given one project each by rewriting the
fields their readers take it from. After a compaction, "how do I run the tests in <project>" names the
runner the project's records ran, whichever agent ran it (Claude Code in one project, Gemini CLI in the
other). The sessions are real; their shared project is made up."""

from __future__ import annotations

from pathlib import Path

from helpers import load, shared_data


def test_the_runner_is_named_whichever_agent_ran_it(make_engine, tmp_path: Path):
    bench = load("mixed_agents")
    files = bench.mixed_projects(shared_data("wild"), tmp_path / "logs")
    engine = make_engine(store=tmp_path / "store", overrides={"llm.mode": "template"})
    ingested = engine.ingest([str(f) for f in files])
    assert ingested.rejected == 0 and ingested.stored > 1000
    assert bench.project_agents(engine) == {p: ["aider", "claude-code", "gemini-cli"] for p in ("alpha", "beta")}

    report = bench.check(engine)  # compacts once, then asks each project
    assert {p: (r["runner"], r["runner_agents"]) for p, r in report.items()} == {
        "alpha": ("mix", ["claude-code"]),
        "beta": ("go", ["gemini-cli"]),
    }
    for project, row in report.items():
        assert row["names_runner"] and not row["names_other"], (project, row["first"])
