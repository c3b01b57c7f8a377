"""Hostile input wherever it is stored or shown: markup-like text, odd ids, one JSON date format, config types."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from helpers import weather_session

from expengine.cli import common, main
from expengine.errors import InputError, NotFoundError

MARKUP = "[/x] [bold]b[/bold] [link=http://e.x]l[/link] :smile:"
ODD_AGENT = 'o\'dd "agent" \\ 🦜\nline'
ODD_SESSION = 's\'; DROP TABLE records; -- \\ "🔥"\n'
ODD_IDS = ["q'uote\"d", "back\\slash\\", "new\nline", "emoji 🦜🔥", "x" * 10_000, "[/x]"]
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(\+00:00)?$")
DATE_LIKE = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d")


def hostile_events() -> list[dict[str, Any]]:
    """Weather sessions (so refinement makes a unit) by an odd agent in an odd session, ids made odd."""
    events = [e for n in range(4) for e in weather_session(n, rate_limited=n < 3)]
    for n, event in enumerate(events):
        event["agent"], event["session"] = ODD_AGENT, ODD_SESSION
        event["id"] = ODD_IDS[n] if n < len(ODD_IDS) else event["id"] + MARKUP
        if "args" in event.get("tool", {}):
            event["tool"]["args"]["city"] = "[/x]"
    events.append(
        {
            "id": "m" + MARKUP,
            "ts": "2026-03-01T09:00:00Z",
            "kind": "message",
            "agent": MARKUP,
            "session": MARKUP,
            "role": "user",
            "content": f"weather in Boston {MARKUP}",
        }
    )
    return events


@pytest.fixture(scope="module")
def store(tmp_path_factory, embedder) -> Path:
    """A closed store with odd ids/agents/sessions, markup in every text, a markup reject, a unit and a run."""
    from expengine import Engine

    folder = tmp_path_factory.mktemp("hostile")
    log = folder / "log.jsonl"
    lines = [json.dumps(e) for e in hostile_events()] + ['{"kind": "message", "raw": "[/x] [bold]"']
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with Engine(store=folder / "store", embedder=embedder, overrides={"llm.mode": "template"}) as engine:
        result = engine.ingest([str(log)])
        assert result.rejected == 1 and result.stored == len(lines) - 1
        assert engine.refine().units_written >= 1
        engine.compact(refine=False)
        engine.snapshot(reason=MARKUP)
    return folder / "store"


@pytest.fixture
def wide(monkeypatch):
    """Wide consoles, so a table never folds the text a test looks for."""
    for console in (common.stdout, common.stderr):
        monkeypatch.setattr(console, "width", 20_000)


def run(store: Path, *args: str, code: int = 0) -> Any:
    """The real entry point (`main`, which turns errors into one line and an exit code), in this process."""
    runner = CliRunner()
    result = runner.invoke(_main, ["--store", str(store), "--set", "llm.mode=template", *args])
    assert result.exit_code == code, (result.output, result.exception)
    assert "Traceback" not in result.output
    return result


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []})
@click.pass_context
def _main(ctx: click.Context) -> None:
    sys.argv = ["expengine", *ctx.args]
    main()


def unit_id(store: Path) -> str:
    return json.loads(run(store, "units", "--json").stdout)["units"][0]["id"]


# --- markup prints verbatim -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        ["rejects"],
        ["stats"],
        ["units"],
        ["snapshots"],
        ["show", "m" + MARKUP],
        ["query", "weather in Boston", "--format", "table", "--no-touch", "-k", "20"],
        ["query", "weather in Boston", "--format", "prompt", "--no-touch", "-k", "20"],
        ["feedback", "m" + MARKUP, "--helpful", "--note", MARKUP],
    ],
)
def test_markup_like_text_prints_verbatim(store, wide, command):
    # the markup around the record's words takes its cosine to the query under MiniLM's floor
    floor_off = ["--set", "query.min_similarity=0"] if command[0] == "query" else []
    out = run(store, *floor_off, *command).stdout
    expected = "[/x]" if command[0] in ("rejects", "units") else MARKUP
    if command[0] == "query":  # the top hit may be the record's note, which ends its sentence with a stop
        expected = MARKUP.rstrip(":")
    assert expected in out, out


def test_history_renders_a_store_holding_markup(store, wide):
    assert "share" in run(store, "history").stdout  # the active-share column (80-column header)


def test_trace_prints_markup_ids_and_text_verbatim(store, wide):
    out = run(store, "trace", unit_id(store)).stdout
    assert "[/x]" in out and MARKUP in out


def test_error_lines_print_markup_verbatim(store, wide):
    result = run(store, "show", "nope " + MARKUP, code=NotFoundError.exit_code)
    assert MARKUP in result.stderr and "Traceback" not in result.output


def test_ingest_summary_prints_a_markup_reject_verbatim(tmp_path, wide):
    log = tmp_path / "bad.jsonl"
    log.write_text('{"ts": "2026-03-01T09:00:00Z", "kind": "[/x][bold]"}\n', encoding="utf-8")
    result = run(tmp_path / "s", "ingest", str(log))
    assert "unknown kind '[/x][bold]'" in result.stderr


# --- one JSON date format -----------------------------------------------------------------------------------
def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_every_reporting_command_prints_iso_t_dates(store):
    commands = [
        ["rejects"],
        ["units"],
        ["trace", unit_id(store)],
        ["history"],
        ["snapshots"],
        ["stats"],
        ["show", "m" + MARKUP],
        ["show", unit_id(store)],
        ["query", "weather", "--no-touch"],
        ["feedback", "m" + MARKUP, "--helpful"],
        ["compact", "--dry-run", "--no-refine"],
    ]
    dates: list[str] = []
    for command in commands:
        lines = [line for line in run(store, *command, "--json").stdout.splitlines() if line.strip()]
        assert len(lines) == 1, (command, lines)
        dates += [s for s in _strings(json.loads(lines[0])) if DATE_LIKE.match(s)]
    assert len(dates) > 20
    assert [d for d in dates if not ISO.match(d)] == []


# --- odd ids, agents and sessions end to end --------------------------------------------------------------
def test_odd_ids_agents_and_sessions_work_end_to_end(store, make_engine):
    engine = make_engine(store=store, overrides={"llm.mode": "template"})
    agent_ids = {e["id"] for e in hostile_events() if e["agent"] == ODD_AGENT}
    hits = engine.query("get_weather rate limited", agent=ODD_AGENT, k=20, touch=True).hits
    memories = {h.id for h in hits if h.type == "memory"}
    assert memories and memories <= agent_ids and any(h.type == "unit" for h in hits)
    assert engine.units(agent=ODD_AGENT)
    for rid in ODD_IDS:
        shown = engine.show(rid)
        assert shown.id == rid and shown.item["agent"] == ODD_AGENT and shown.item["session"] == ODD_SESSION
        assert engine.feedback(rid, helpful=True).id == rid
    traced = engine.trace(engine.units(agent=ODD_AGENT)[0]["id"])
    assert len({r["id"] for r in traced["records"]} & set(ODD_IDS)) >= 4 and traced["missing_source_ids"] == []
    engine.forget(ids=ODD_IDS)
    for rid in ODD_IDS:
        with pytest.raises(NotFoundError):
            engine.show(rid)
    assert not {h.id for h in engine.query("get_weather", agent=ODD_AGENT, k=50, touch=False).hits} & set(ODD_IDS)


def test_odd_ids_through_the_cli(tmp_path, wide):
    log = tmp_path / "log.jsonl"
    log.write_text(
        "".join(
            json.dumps(
                {
                    "id": rid,
                    "ts": "2026-03-01T09:00:00Z",
                    "kind": "note",
                    "agent": ODD_AGENT,
                    "session": ODD_SESSION,
                    "content": f"note {n} about lanterns",
                }
            )
            + "\n"
            for n, rid in enumerate(ODD_IDS)
        ),
        encoding="utf-8",
    )
    store = tmp_path / "store"
    assert json.loads(run(store, "ingest", str(log), "--json").stdout)["stored"] == len(ODD_IDS)
    found = json.loads(run(store, "query", "lanterns", "--agent", ODD_AGENT, "-k", "10", "--json").stdout)
    # near-identical notes: the ones folded under another's line are listed there
    assert {i for h in found["hits"] for i in (h["id"], *(r["id"] for r in h["repeats"]))} == set(ODD_IDS)
    for rid in ODD_IDS:
        assert json.loads(run(store, "show", rid, "--json").stdout)["id"] == rid
        assert json.loads(run(store, "feedback", rid, "--harmful", "--json").stdout)["id"] == rid
    assert json.loads(run(store, "forget", *ODD_IDS, "--yes", "--json").stdout)["records"] == len(ODD_IDS)


# --- config types -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "toml, message",
    [
        ('[decay]\ntheta_dormant = "high"\n', "config key decay.theta_dormant must be a number, got str 'high'"),
        (
            "[cluster]\nmin_cluster_size = 2.5\n",
            "config key cluster.min_cluster_size must be an integer, got float 2.5",
        ),
        ("[ingest]\nredact = 1\n", "config key ingest.redact must be true or false, got int 1"),
        ("[llm]\nmode = 3\n", "config key llm.mode must be a string, got int 3"),
        ('[decay]\nlambda_by_category = { fact = "x" }\n', "config key decay.lambda_by_category must be a table"),
    ],
)
def test_a_wrong_config_type_is_exit_2_naming_key_and_type(tmp_path, wide, toml, message):
    store = tmp_path / "store"
    store.mkdir()
    (store / "config.toml").write_text(toml, encoding="utf-8")
    result = run(store, "stats", code=InputError.exit_code)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize(
    "setting, message",
    [
        ("decay.theta_dormant=high", "config key decay.theta_dormant must be a number, got 'high'"),
        ("cluster.max_k=1.5", "config key cluster.max_k must be an integer, got '1.5'"),
        ("ingest.redact=maybe", "config key ingest.redact must be true or false, got 'maybe'"),
        ("decay.lambda_by_category=[1]", "config key decay.lambda_by_category must be a table of numbers, got list"),
    ],
)
def test_a_wrong_set_value_is_exit_2_naming_key_and_type(tmp_path, wide, setting, message):
    result = run(tmp_path / "store", "--set", setting, "stats", code=InputError.exit_code)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_ints_are_numbers_and_good_values_load(tmp_path):
    from expengine.config import Config

    store = tmp_path
    (store / "config.toml").write_text("[decay]\ntheta_dormant = 1\n[ingest]\nredact = false\n", encoding="utf-8")
    config = Config.load(store).with_overrides({"cluster.max_k": "7"})
    assert config.decay.theta_dormant == 1 and config.ingest.redact is False and config.cluster.max_k == 7


def test_a_corrupt_gzip_file_is_one_error_line_not_a_traceback(tmp_path, wide):
    log = tmp_path / "bad.jsonl.gz"
    log.write_bytes(b"\x1f\x8b" + bytes(range(256)))
    result = run(tmp_path / "store", "ingest", str(log), code=InputError.exit_code)
    assert result.stderr.startswith(f"error: cannot read {log}")
