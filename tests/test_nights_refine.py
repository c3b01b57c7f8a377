"""Whole-store passes that read only what changed: refinement's intents and environment passes
(lifecycle/refine/runs_read.py), notes' speakers and names (lifecycle/notes/people.py) and the cycle's
token figures (store/stats.hot_text).

Each keeps what it distilled per run or session with the fingerprint of its records and reads again only
the ones that changed. Same result as a whole read: the runs, commands, speakers and figures are equal;
a store whose kept runs are dropped before every cycle (so it reads everything) ends with the same
units; and a night reads fewer records than the store holds (nothing at all when nothing changed)."""

from __future__ import annotations

import pytest
from helpers import swe_script_fixes
from test_nights import NIGHT, START, thirds

from expengine.lifecycle.refine.runs_read import ReadCount, intent_runs, project_commands

LOGS = ("coding_assistant.jsonl", "support_bot.jsonl")


def swe_night(tmp_path, night: int) -> tuple[str, str]:
    """The night's coding runs: two django and two sympy tasks, each a failing script fixed the same way."""
    return swe_script_fixes(
        tmp_path / f"swe{night}",
        tmp_path / f"swe{night}.json",
        first=1000 + 10 * night,
        count=2,
        task=f"Task {night}.{{n}}: the validator rejects names with trailing spaces",
        test_step=False,
        resolved=lambda n: bool(n or night % 2),
    )


def ingest_night(engine, tmp_path, paths: list[str], night: int) -> None:
    engine.ingest(paths)
    runs, report = swe_night(tmp_path, night)
    engine.ingest([runs], fmt="swe-agent", outcomes=[report])


def live_units(engine) -> list[tuple]:
    return sorted(
        engine.store.con.execute(
            "SELECT kind, cluster_key, coalesce(condition, ''), coalesce(action, ''), coalesce(statement, ''), status, "
            "source_ids FROM units"
        ).fetchall()
    )


def read_both(store) -> tuple:
    status = dict(store.con.execute("SELECT goal_id, status FROM goals").fetchall())
    kept, whole = ReadCount(), ReadCount()
    runs = intent_runs(store, status, kept, full=False, dry_run=True)
    runs_whole = intent_runs(store, status, whole, full=True, dry_run=True)
    commands = project_commands(store, kept, full=False, dry_run=True)
    commands_whole = project_commands(store, whole, full=True, dry_run=True)
    return (runs, commands, kept), (runs_whole, commands_whole, whole)


def test_kept_runs_equal_a_whole_read_and_reading_follows_the_night(make_engine, tmp_path):
    nights = thirds(tmp_path, LOGS)
    engine = make_engine(overrides={"llm.mode": "template"})
    for n, paths in enumerate(nights, start=1):
        ingest_night(engine, tmp_path, paths, n)
        (runs, commands, kept), (runs_whole, commands_whole, whole) = read_both(engine.store)
        assert runs == runs_whole and commands == commands_whole
        assert runs and commands
        report = engine.compact(now=START + NIGHT * n)
        refine = report.steps["refine"]
        if n == 1:
            assert refine["run_records_read"] == whole.records
            continue
        # only the runs the night touched (a new record, an outcome, a message swept into chatter) are read
        assert 0 < refine["run_records_read"] < whole.records, (refine["run_records_read"], whole.records)
        assert 0 < kept.records < whole.records and kept.runs < whole.runs
    (runs, commands, kept), (runs_whole, commands_whole, whole) = read_both(engine.store)
    assert runs == runs_whole and commands == commands_whole
    assert kept.records == 0, "nothing changed since the cycle: nothing is read again"


def test_kept_runs_give_the_units_a_whole_read_gives(make_engine, tmp_path):
    nights = thirds(tmp_path, LOGS)
    kept = make_engine(tmp_path / "kept", overrides={"llm.mode": "template"})
    whole = make_engine(tmp_path / "whole", overrides={"llm.mode": "template"})
    for n, paths in enumerate(nights, start=1):
        for engine, folder in ((kept, tmp_path / "k"), (whole, tmp_path / "w")):
            ingest_night(engine, folder, paths, n)
        whole.store.con.execute("DELETE FROM derived_runs")  # as if never kept: every run is read
        kept.compact(now=START + NIGHT * n)
        whole.compact(now=START + NIGHT * n)
    assert live_units(kept) == live_units(whole)


def test_forget_drops_the_kept_runs(make_engine, tmp_path):
    nights = thirds(tmp_path, ("support_bot.jsonl",))
    engine = make_engine(overrides={"llm.mode": "template"})
    engine.ingest(nights[0])
    engine.compact(now=START + NIGHT)
    con = engine.store.con
    assert con.execute("SELECT count(*) FROM derived_runs").fetchall()[0][0] > 0
    (session,) = con.execute("SELECT session FROM records WHERE goal_id IS NOT NULL ORDER BY id LIMIT 1").fetchall()[0]
    engine.forget(sessions=[session])
    assert engine.store.con.execute("SELECT count(*) FROM derived_runs").fetchall()[0][0] == 0


def whole_hot_text(con) -> tuple[int, int]:
    from expengine.textutil import approx_tokens

    rows = con.execute("SELECT state, text FROM records").fetchall()
    return sum(approx_tokens(t) for s, t in rows if s == "active"), sum(approx_tokens(t) for _, t in rows)


def test_the_hot_text_figures_sum_kept_token_counts_and_count_only_new_records(make_engine, tmp_path):
    from expengine.store.stats import hot_text

    nights = thirds(tmp_path, ("support_bot.jsonl",))
    engine = make_engine(overrides={"llm.mode": "template"})
    engine.ingest(nights[0])
    report = engine.compact(now=START + NIGHT)
    kept = engine.store.con.execute("SELECT count(*) FROM record_tokens").fetchall()[0][0]
    assert kept == report.after.raw
    assert (report.after.active_tokens, report.after.raw_tokens) == whole_hot_text(engine.store.con)
    engine.ingest(nights[1])  # counted, not kept, until the next cycle's last count
    figures = hot_text(engine.store)
    assert (figures["active_tokens"], figures["raw_tokens"]) == whole_hot_text(engine.store.con)
    assert engine.store.con.execute("SELECT count(*) FROM record_tokens").fetchall()[0][0] == kept
    (session,) = engine.store.con.execute("SELECT session FROM records WHERE session IS NOT NULL LIMIT 1").fetchall()[0]
    engine.forget(sessions=[session])
    assert (
        engine.store.con.execute("SELECT count(*) FROM record_tokens r ANTI JOIN records USING (id)").fetchall()[0][0]
        == 0
    )


def whole_people(store, agents: set[str]) -> tuple[dict, dict]:
    """The speakers and names as a whole read of the agents' messages gives them (notes before keeping)."""
    import re
    from collections import defaultdict

    from expengine.lifecycle.notes.people import _nickname
    from expengine.lifecycle.notes.statements import split_speaker

    rows = store.con.execute(
        "SELECT coalesce(session, agent), agent || coalesce(chr(31) || user, ''), content FROM records "
        "WHERE kind = 'message' AND agent IN (SELECT unnest(?)) ORDER BY ts, id",
        [sorted(agents)],
    ).fetchall()
    uses: dict = defaultdict(dict)
    in_session: dict = defaultdict(list)
    for session, agent, content in rows:
        label = split_speaker(content or "")[0]
        if label:
            uses[agent][label] = uses[agent].get(label, 0) + 1
            if label not in in_session[session]:
                in_session[session].append(label)
    agent_of = {session: agent for session, agent, _ in rows}
    dialogue = {agent for agent, counted in uses.items() if sum(counted.values()) >= 2}
    speakers = {s: labels for s, labels in in_session.items() if agent_of[s] in dialogue}
    names: dict = defaultdict(set)
    for agent in dialogue:
        for label in uses[agent]:
            for word in label.lower().split():
                names[agent].update({word, word[:3]} if len(word) > 3 else {word})
    capital = re.compile(r"\b[A-Z][a-z]{2,}\b")
    said = {
        (agent, w.lower()) for _, agent, content in rows if agent in dialogue for w in capital.findall(content or "")
    }
    for agent, word in said:
        if any(_nickname(word, name) for name in names[agent]):
            names[agent].add(word)
    return speakers, dict(names)


def test_the_speakers_kept_per_session_equal_a_whole_read(make_engine, tmp_path, write_jsonl):
    from test_notes import TURNS

    from expengine.lifecycle.notes.people import people

    later = [  # night 3: more of session s1, a user's own session of the agent, another agent's dialogue
        {**TURNS[0], "id": "conv-26:D1:30", "ts": "2023-05-27T10:00:00", "content": "Melanie: Caro, see you soon!"},
        {**TURNS[1], "id": "conv-26:D3:1", "ts": "2023-05-27T10:00:01", "session": "s3", "user": "u1"},
        {**TURNS[2], "id": "conv-26:D3:2", "ts": "2023-05-27T10:00:02", "session": "s3", "user": "u1"},
        {**TURNS[3], "id": "conv-27:D1:1", "agent": "conv-27", "ts": "2023-05-27T10:00:03"},
    ]
    nights = [[t for t in TURNS if t["session"] == "s1"], [t for t in TURNS if t["session"] == "s2"], later]
    engine = make_engine(overrides={"llm.mode": "template"})
    for n, turns in enumerate(nights):
        engine.ingest([str(write_jsonl(f"night{n}.jsonl", turns))])
        agents = {a for (a,) in engine.store.con.execute("SELECT DISTINCT agent FROM records").fetchall()}
        expected = whole_people(engine.store, agents)
        assert people(engine.store, agents, keep=False) == expected
        assert people(engine.store, agents, keep=True, full=True) == expected  # what a cycle keeps
        assert people(engine.store, {"conv-26"}, keep=True) == whole_people(engine.store, {"conv-26"})
    speakers, names = expected
    assert speakers["s2"] == ["Melanie", "Caroline"] and "caro" in names["conv-26"], (speakers, names)


class PerClusterReads:
    """What a refinement pass read before `ClusterReads`: every cluster's units, members and sessions'
    tool use from the database, at the moment the cluster is refined."""

    def __init__(self, store, clusters) -> None:
        self.store = store

    def cluster_sources(self, key: str) -> list[str]:
        from expengine.store.db import json_ids
        from expengine.store.units import LIVE_SQL

        rows = self.store.con.execute(f"SELECT source_ids FROM units WHERE {LIVE_SQL} AND cluster_key = ?", [key])
        return [i for (source_ids,) in rows.fetchall() for i in json_ids(source_ids)]

    def units_changed(self, ids: set[str]) -> None:
        pass

    def fetch(self, ids: list[str]) -> list[dict]:
        from expengine.store.records import fetch_records

        return fetch_records(self.store, ids)

    def session_context(self, records: list[dict]) -> list[dict]:
        from expengine.lifecycle.refine.inputs import session_context

        return session_context(self.store, records)


def record_states(engine) -> list[tuple]:
    return sorted(engine.store.con.execute("SELECT id, state, coalesce(state_reason, '') FROM records").fetchall())


@pytest.mark.parametrize("per_read", [500, 2])
def test_reads_once_a_pass_give_what_reads_per_cluster_give(make_engine, tmp_path, monkeypatch, per_read):
    """The changed clusters' units, records and tool use read once a pass (refine/reads.py), or once per
    slice of `per_read` clusters, and the units a cluster's write changed read again, give the units and
    record states of reading them from the database cluster by cluster."""
    import expengine.lifecycle.refine as refine
    from expengine.lifecycle.refine.reads import ClusterReads

    monkeypatch.setattr(refine, "CLUSTERS_PER_READ", per_read)

    nights = thirds(tmp_path, LOGS)
    once = make_engine(tmp_path / "once", overrides={"llm.mode": "template"})
    each = make_engine(tmp_path / "each", overrides={"llm.mode": "template"})
    refined = 0
    for n, paths in enumerate(nights, start=1):
        for engine, folder in ((once, tmp_path / "o"), (each, tmp_path / "e")):
            ingest_night(engine, folder, paths, n)
        monkeypatch.setattr(refine, "ClusterReads", ClusterReads)
        report = once.compact(now=START + NIGHT * n)
        monkeypatch.setattr(refine, "ClusterReads", PerClusterReads)
        each.compact(now=START + NIGHT * n)
        refined += report.steps["refine"]["clusters_refined"]
        assert live_units(once) == live_units(each)
        assert record_states(once) == record_states(each)
    assert refined > 0
