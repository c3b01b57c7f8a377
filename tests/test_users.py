"""One agent, many users: every record names whose memory it is, a query for one user never shows
another's, know-how stays shared, and `forget --user` erases a person from every file."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from pathlib import Path

import pytest
from helpers import free_port, mcp_params, start_server, stop
from otel_traces import TraceWriter
from test_cli_usage import run_main
from test_compact import ev
from test_forget import files_holding
from typer.testing import CliRunner

from expengine.cli import app
from expengine.errors import InputError
from expengine.service.client import TOKEN_FILE, Client

SAMPLE = Path(__file__).resolve().parents[1] / "sample_logs" / "support_bot.jsonl"
TEMPLATES = {"llm.mode": "template"}


@pytest.fixture(scope="module")
def support_bot(tmp_path_factory, embedder):
    """The support-bot sample (users u-101 … u-112) in one store, compacted once."""
    from expengine import Engine

    engine = Engine(store=tmp_path_factory.mktemp("users") / "store", embedder=embedder, overrides=TEMPLATES)
    engine.ingest([str(SAMPLE)])
    engine.compact()
    yield engine
    engine.close()


def _records_of(engine, ids: list[str]) -> dict[str, str | None]:
    rows = engine.store.con.execute("SELECT id, user FROM records WHERE id IN (SELECT unnest(?))", [ids]).fetchall()
    return dict(rows)


def test_the_sample_logs_users_land_as_users(support_bot):
    users = support_bot.stats().by_user
    assert {f"u-{n}" for n in range(101, 113)} <= set(users)
    assert users["(shared)"]["records"] == 10  # the bot's own notes, goals and observations


def test_two_users_preferences_never_cross(support_bot):
    mine = support_bot.query("which seat do I prefer", user="u-104", touch=False)
    assert "aisle seat" in mine.prompt  # u-104's own preference is found
    for user in ("u-101", "u-106"):
        theirs = support_bot.query("which seat do I prefer", user=user, touch=False)
        assert "u-104" not in theirs.prompt and "long legs" not in theirs.prompt
        shown = [h.id for h in theirs.hits if h.type == "memory"] + [e.id for h in theirs.hits for e in h.expanded]
        assert set(_records_of(support_bot, shown).values()) <= {user, None}
        assert {h.id for h in theirs.hits if h.type == "unit"}.isdisjoint(
            {u["id"] for u in support_bot.units(user="u-104")}
        )


def test_a_shared_rule_serves_both_users(support_bot):
    shared = [
        u
        for u in support_bot.units(kind="rule", status="active")
        if u["user"] is None and len(set(_records_of(support_bot, u["source_ids"]).values()) - {None}) >= 2
    ]
    assert shared  # rules learnt from several users' runs belong to none of them
    rule = shared[0]
    for user in sorted(set(_records_of(support_bot, rule["source_ids"]).values()) - {None})[:2]:
        result = support_bot.query(rule["text"], user=user, k=10, touch=False)
        assert rule["id"] in {h.id for h in result.hits}, user


def test_every_shared_rule_reaches_every_user_and_quotes_no_ones_values(support_bot):
    """Rules learnt from several users' runs word their requests with slots, so none quotes a person
    and each reaches every user."""
    con = support_bot.store.con
    shared = [u for u in support_bot.units(kind="rule", status="active") if u["user"] is None]
    assert len(shared) >= 10
    quoting = con.execute(
        "SELECT count(*) FROM units WHERE user IS NULL AND quotes IS NOT NULL AND status = 'active'"
    ).fetchone()
    assert quoting == (0,)
    given = {  # what a user gave a tool: order ids, airports, dates, cities
        str(v)
        for (args,) in con.execute(
            "SELECT tool_args FROM records WHERE user IS NOT NULL AND tool_args IS NOT NULL"
        ).fetchall()
        for v in json.loads(args).values()
        if isinstance(v, str) and len(v) >= 3 and v[:1].isupper() | v[:1].isdigit()
    }
    assert "W5065264" in given and "Chicago" in given
    for rule in shared:
        assert not [v for v in given if re.search(rf"(?<!\w){re.escape(v)}(?!\w)", rule["condition"] or "")], rule[
            "text"
        ]
    orders = next(u for u in shared if "<order_id>" in (u["condition"] or ""))
    for user in ("u-101", "u-104"):
        assert orders["id"] in {h.id for h in support_bot.query("where is my order", user=user, k=10, touch=False).hits}


def test_a_note_about_a_user_carries_that_user(make_engine, write_jsonl):
    engine = make_engine(overrides={**TEMPLATES, "query.min_similarity": "0"})
    said = [
        ("u-101", "I'm vegetarian and I live in Lisbon with my two cats."),
        ("u-102", "I'm allergic to peanuts and I live in Denver."),
    ]
    engine.ingest(
        [
            write_jsonl(
                "chat.jsonl",
                [
                    ev(f"m{n}", n, "message", session=f"chat-{user}", role="user", user=user, content=text)
                    for n, (user, text) in enumerate(said)
                ],
            )
        ]
    )
    engine.compact()
    notes = engine.units(kind="note")
    assert notes and {n["user"] for n in notes} == {"u-101", "u-102"}
    for note in notes:
        assert set(_records_of(engine, note["source_ids"]).values()) == {note["user"]}
    result = engine.query("where do I live", user="u-101", touch=False)
    assert "Lisbon" in result.prompt and "Denver" not in result.prompt


def test_require_user_refuses_a_query_without_one(make_engine, write_jsonl, monkeypatch, capsys):
    engine = make_engine(overrides={"query.require_user": "true"})
    engine.ingest([write_jsonl("a.jsonl", [ev("a1", 0, "message", role="user", user="u-1", content="hello there")])])
    with pytest.raises(InputError, match="require_user"):
        engine.query("hello", touch=False)
    assert engine.query("hello", user="u-1", touch=False).hits
    engine.close()
    store = ["--store", str(engine.store_dir), "--set", "query.require_user=true"]
    code, out, err = run_main(monkeypatch, capsys, [*store, "query", "hello"])
    assert code == 2 and out == "" and err.startswith("error: ") and "require_user" in err.splitlines()[0]
    assert CliRunner().invoke(app, [*store, "query", "hello", "--user", "u-1"]).exit_code == 0


MARKER = "zqxvfriend7731"


def test_forget_user_leaves_no_bytes_of_that_user(make_engine, write_jsonl):
    engine = make_engine(overrides={**TEMPLATES, "cluster.interval_new_memories": 1})
    events = [
        ev(
            f"{user}-{n}",
            n + (0 if user == "gone" else 10),
            "message",
            session=f"s-{user}-{n % 2}",
            role="user",
            user=user,
            content=f"My friend {MARKER if user == 'gone' else 'Robin'} and I love hiking near the lake {n}",
        )
        for user in ("gone", "stays")
        for n in range(4)
    ]
    engine.ingest([write_jsonl("log.jsonl", events)])
    engine.compact()
    engine.query(f"what about {MARKER}", user="gone")  # the query log keeps the question's text
    engine.compact()
    assert any("snapshots/" in f for f in files_holding(engine.store_dir, MARKER))  # the test can fail

    planned = engine.forget(users=["gone"], dry_run=True)
    assert planned.records == 4 and files_holding(engine.store_dir, MARKER)
    done = engine.forget(users=["gone"])

    assert done.records == 4 and done.snapshots == 2 and done.query_log >= 1
    assert files_holding(engine.store_dir, MARKER) == []
    assert engine.store.con.execute("SELECT count(*) FROM records WHERE user = 'gone'").fetchall()[0][0] == 0
    assert engine.store.con.execute("SELECT count(*) FROM query_log WHERE user = 'gone'").fetchall()[0][0] == 0
    assert engine.store.con.execute("SELECT count(*) FROM records WHERE user = 'stays'").fetchall()[0][0] == 4
    assert "Robin" in engine.query("my friend and hiking", user="stays", touch=False).prompt


def test_readers_take_the_user_where_each_format_keeps_it(make_engine, write_jsonl, tmp_path):
    engine = make_engine()
    run = {"id": "run-1", "user": "u-7", "messages": [{"role": "user", "content": "book me a table for two"}]}
    (tmp_path / "runs.json").write_text(
        json.dumps([run, {**run, "id": "run-2", "user": None, "metadata": {"user_id": "u-8"}}])
    )
    engine.ingest([str(tmp_path / "runs.json")], fmt="openai-chat")
    engine.ingest(
        [write_jsonl("meta.jsonl", [ev("x1", 0, "message", role="user", content="hi", meta={"customer": "c-9"})])],
        user_field="meta.customer",
    )
    users = dict(engine.store.con.execute("SELECT session, user FROM records").fetchall())
    assert users["run-1"] == "u-7" and users["run-2"] == "u-8" and users["s1"] == "c-9"
    bad = engine.ingest(
        [write_jsonl("bad.jsonl", [ev("x2", 1, "message", role="user", content="hi", meta={"customer": {"id": 1}})])],
        user_field="meta.customer",
    )
    assert bad.rejected == 1 and "--user-field meta.customer" in bad.rejects[0].error
    traces = TraceWriter()
    traces.conversation("conv-oslo", "Oslo", user="u-42")  # user.id on the agent span, inherited below it
    engine.ingest([str(traces.write(tmp_path / "traces.jsonl"))], fmt="otel")
    assert {
        u for (u,) in engine.store.con.execute("SELECT user FROM records WHERE session = 'conv-oslo'").fetchall()
    } == {"u-42"}


def test_stats_by_user_and_units_by_user_on_the_command_line(support_bot):
    runner = CliRunner()
    store = ["--store", str(support_bot.store_dir)]
    support_bot.close()
    by_user = runner.invoke(app, [*store, "stats", "--by", "user", "--json"])
    assert by_user.exit_code == 0 and json.loads(by_user.output)["by_user"]["u-104"]["records"] > 0
    units = runner.invoke(app, [*store, "units", "--user", "u-104", "--json"])
    assert units.exit_code == 0 and {u["user"] for u in json.loads(units.output)["units"]} == {"u-104"}
    assert isinstance(runner.invoke(app, [*store, "stats", "--by", "colour"]).exception, InputError)  # exit 2


def test_require_user_holds_over_http_and_mcp(tmp_path, embedder):
    """A server on 127.0.0.1 for a store that requires a user: a query without one is a 400 naming the
    setting and the fix, over HTTP and MCP alike; with one it is answered."""

    from expengine import Engine

    store, log = tmp_path / "store", tmp_path / "a.jsonl"
    log.write_text(json.dumps(ev("a1", 0, "message", role="user", user="u-1", content="hello there")) + "\n")
    with Engine(store=store, embedder=embedder, overrides=TEMPLATES) as engine:
        engine.ingest([str(log)])
    (store / "config.toml").write_text("[query]\nrequire_user = true\n", encoding="utf-8")
    port = free_port()
    child = start_server(store, "--http", f"127.0.0.1:{port}")
    try:
        client = Client(url=f"http://127.0.0.1:{port}", token=(store / TOKEN_FILE).read_text().strip())
        status, body = client.request("POST", "/v1/query", {"text": "hello", "touch": False}, timeout=60)
        assert status == 400 and "require_user" in body["error"]["message"] and "--user" in body["error"]["hint"]
        status, body = client.request("POST", "/v1/query", {"text": "hello", "user": "u-1", "touch": False}, timeout=60)
        assert status == 200 and body["hits"], body
        without, with_user = asyncio.run(_query_through_mcp(store))
        assert without.is_error and "require_user" in without.content[0].text, without
        assert not with_user.is_error and with_user.structured_content["hits"], with_user
    finally:
        code, err = stop(child)
    assert code in (0, -signal.SIGTERM) and "Traceback" not in err, err


async def _query_through_mcp(store: Path):
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    async with stdio_client(mcp_params(store)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        without = await session.call_tool("memory_query", {"text": "hello", "touch": False})
        with_user = await session.call_tool("memory_query", {"text": "hello", "user": "u-1", "touch": False})
    return without, with_user
