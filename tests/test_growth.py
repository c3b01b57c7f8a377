"""Growth pictured: history's series, its 80-column table, the terminal and PNG charts, stats --weights."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from helpers import BOOKING, CHATTER, REFUND
from typer.testing import CliRunner

from expengine.cli import app

NIGHTS = [dt.datetime(2026, 3, 2, 3, 15) + dt.timedelta(days=n) for n in range(3)]


@pytest.fixture(scope="module")
def grown(tmp_path_factory, embedder):
    """A store that lived through three nightly compactions."""
    from expengine import Engine

    folder = tmp_path_factory.mktemp("grown") / "store"
    log = folder.parent / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in BOOKING + REFUND + CHATTER), encoding="utf-8")
    with Engine(store=folder, embedder=embedder) as engine:
        engine.ingest([str(log)])
        reports = [engine.compact(refine=False, now=night) for night in NIGHTS]
    return folder, reports


def cli(folder, *args: str):
    result = CliRunner().invoke(app, ["--store", str(folder), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_history_json_gives_the_series_with_what_each_cycle_did(grown):
    folder, reports = grown
    data = json.loads(cli(folder, "history", "--json"))
    series = data["series"]
    assert series["cycle"] == [1, 2, 3]
    assert series["raw"] == [len(BOOKING + REFUND + CHATTER)] * 3
    assert series["hot_tokens"] == [r.after.hot_tokens for r in reports]
    assert series["active"] == [r.after.active for r in reports]
    # Nothing was dormant before the first night, and no purge can come that early: all it put to sleep is new.
    assert series["forgotten"][0] == reports[0].after.dormant > 0
    assert [run["forgotten"] for run in data["runs"]] == series["forgotten"]
    assert all(len(values) == 3 for values in series.values())


def test_history_table_fits_80_columns_and_cuts_no_value(grown):
    folder, reports = grown
    text = cli(folder, "history")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text
    runs = json.loads(cli(folder, "history", "--json"))["runs"]
    for report, run in zip(reports, runs):
        row = next(line for line in lines if report.run_id.rsplit("-", 1)[-1] in line)
        assert run["started"][5:16].replace("T", " ") in row  # 12-01 13:08, the year in the header
        assert f" {report.after.active} " in row and f" {report.after.raw} " in row
    assert f"{runs[0]['started'][:4]} UTC" in text


def test_history_plot_without_a_tty_is_plain_text(grown):
    folder, _ = grown
    text = cli(folder, "history", "--plot")
    assert "\x1b[" not in text
    assert "raw vs hot tokens" in text and "forgotten" in text and "hot tokens" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_history_png_writes_a_chart(grown, tmp_path):
    folder, _ = grown
    target = tmp_path / "growth.png"
    cli(folder, "history", "--png", str(target))
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_stats_weights_distribution_and_categories_forgotten_most(grown):
    folder, reports = grown
    data = json.loads(cli(folder, "stats", "--weights", "--json"))
    memories = data["memories"]
    assert memories["count"] == reports[-1].after.active
    assert sum(b["count"] for b in memories["bins"]) == memories["count"]
    assert memories["min"] <= memories["median"] <= memories["max"]
    shares = [c["share"] for c in data["categories"]]
    assert shares == sorted(shares, reverse=True) and shares[0] > 0
    assert sum(c["records"] for c in data["categories"]) == len(BOOKING + REFUND + CHATTER)
    text = cli(folder, "stats", "--weights")
    assert "forgotten most" in text and data["categories"][0]["category"] in text
