"""The fleet: a root of stores compacted on a local Ray (2 CPUs, started once for this module and shut
down at its end), and the fleet commands' reports and exit codes."""

from __future__ import annotations

import json
import sys

import pytest
from helpers import NAMES, load_kill_test, make_fleet, run_main

from expengine.store.pause import PAUSE_ENV, PAUSE_MARKER

ray = pytest.importorskip("ray", reason="the fleet extra is not installed: pip install -e '.[fleet]'")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def kill_the_paused_worker(run, marker) -> tuple[int, dict]:
    """`kill_test.kill_paused_worker`, and the command's rows by store (none failed)."""
    killed, report = load_kill_test().kill_paused_worker(run, marker, timeout=240)
    rows = {r.store: r for r in report.stores}
    assert report.failed == 0, rows
    return killed, rows


def test_fleet_compact_runs_every_store_and_reports_the_broken_one(tmp_path, embedder, local_ray):
    from expengine.fleet.cycles import compact_fleet

    root = tmp_path / "fleet"
    make_fleet(root, embedder)
    (root / "broken").mkdir()
    (root / "broken" / "expengine.duckdb").write_bytes(b"not a database" * 100)
    report = compact_fleet(root, max_parallel=2, refine=False)
    rows = {r.store: r for r in report.stores}
    assert sorted(rows) == ["alpha", "beta", "broken", "gamma"]
    assert report.failed == 1 and not rows["broken"].ok and rows["broken"].error
    for name in NAMES:
        row = rows[name]
        assert row.ok and row.error is None and row.cycles == 1, row
        assert row.hot_share_after is not None and row.hot_share_after <= row.hot_share_before
    assert len({rows[n].worker_pid for n in NAMES}) <= 2  # two CPUs: the workers are reused across stores


def test_a_killed_worker_is_retried_and_the_store_is_compacted_once(tmp_path, embedder, local_ray):
    """SIGKILL the worker in the middle of a store's compaction: Ray runs the task again, the retry
    rolls the half-done run back from its snapshot, and the store ends with one completed cycle."""
    from expengine.fleet.cycles import compact_fleet

    root = tmp_path / "fleet"
    ids = make_fleet(root, embedder, names=("alpha", "beta"))
    marker = root / "alpha" / (PAUSE_MARKER + "decay")
    (root / "beta" / marker.name).write_text("")  # the hook pauses once per marker: beta runs straight through
    killed, rows = kill_the_paused_worker(
        lambda: compact_fleet(root, refine=False, worker_env={PAUSE_ENV: "decay"}), marker
    )
    alpha = rows["alpha"]
    assert alpha.ok and alpha.cycles == 1 and alpha.recovered == 1 and alpha.worker_pid != killed
    for name in ("alpha", "beta"):
        (root / name / marker.name).unlink()
    kill_test = load_kill_test()
    for name in ("alpha", "beta"):
        assert kill_test.check_store(root / name, ids[name], embedder) == []
    from expengine import Engine

    with Engine(store=root / "alpha", embedder=embedder) as engine:
        statuses = [r["status"] for r in engine.history()]
    assert statuses == ["rolled_back", "completed"]


def test_without_the_extra_fleet_says_what_to_install(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    code, out, err = run_main(monkeypatch, capsys, ["fleet", "stats", "--root", str(tmp_path)])
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["error: the fleet commands need Ray: pip install 'expengine[fleet]'"]


def test_fleet_commands_report_per_store_and_in_total(monkeypatch, capsys, tmp_path, embedder, local_ray):
    root = tmp_path / "fleet"
    ids = make_fleet(root, embedder, names=("alpha", "beta"))
    code, out, _ = run_main(monkeypatch, capsys, ["fleet", "compact", "--root", str(root), "--no-refine", "--json"])
    compacted = json.loads(out)
    assert code == 0 and [s["store"] for s in compacted["stores"]] == ["alpha", "beta"] and compacted["failed"] == 0
    code, out, _ = run_main(monkeypatch, capsys, ["fleet", "history", "--root", str(root), "--json"])
    history = json.loads(out)
    assert code == 0 and [s["cycles"] for s in history["stores"]] == [1, 1] and history["never_compacted"] == []
    code, out, _ = run_main(monkeypatch, capsys, ["fleet", "stats", "--root", str(root), "--json"])
    stats = json.loads(out)
    assert code == 0 and stats["totals"]["raw"] == sum(map(len, ids.values())) == sum(s["raw"] for s in stats["stores"])
    (root / "gamma").mkdir()
    (root / "gamma" / "expengine.duckdb").write_bytes(b"not a database" * 100)
    code, out, err = run_main(monkeypatch, capsys, ["fleet", "stats", "--root", str(root), "--json"])
    broken = json.loads(out)
    assert code == 1 and broken["failed"] == 1 and "1 store(s) failed" in err
    assert [s["store"] for s in broken["stores"] if "error" in s] == ["gamma"]


@pytest.mark.parametrize("runner", ["tasks", "data"])
def test_fleet_ingest_routes_by_agent_keeps_rejects_and_is_idempotent(tmp_path, embedder, local_ray, runner):
    import gzip

    from helpers import fleet_lines

    from expengine import Engine
    from expengine.fleet.ingest import ingest_fleet

    logs = tmp_path / "logs"
    logs.mkdir()
    alpha, beta = fleet_lines("alpha"), fleet_lines("beta")
    alpha[0]["content"] = "write to mallory@example.com about the refund"
    (logs / "mixed.jsonl").write_text(
        "\n".join([*map(json.dumps, alpha[:10] + beta[:10]), '{"agent": "beta", "kind": "bogus"}', "not json"]) + "\n",
        encoding="utf-8",
    )
    with gzip.open(logs / "rest.jsonl.gz", "wt", encoding="utf-8") as gz:
        gz.write("\n".join(map(json.dumps, alpha[10:] + beta[10:])) + "\n")
    root = tmp_path / "fleet"
    first = ingest_fleet([str(logs)], root=root, max_parallel=2, runner=runner)
    rows = {r.store: r for r in first.stores}
    assert sorted(rows) == ["alpha", "beta", "unrouted"] and first.failed == 0 and first.files == 2
    assert rows["alpha"].stored == len(alpha) and rows["beta"].stored == len(beta)
    assert rows["beta"].rejected == 1 and rows["unrouted"].rejected == 1 and rows["unrouted"].stored == 0
    for name, lines in (("alpha", alpha), ("beta", beta)):
        with Engine(store=root / name, embedder=embedder) as engine:
            stored = engine.records(limit=1000)
            assert {r["id"] for r in stored} == {line["id"] for line in lines}
            assert {r["agent"] for r in stored} == {name}
            assert len(engine.rejects()) == (1 if name == "beta" else 0)
            if name == "alpha":
                text = " ".join(str(r.get("content")) for r in stored)
                assert "mallory@example.com" not in text and "[REDACTED:EMAIL]" in text
    again = ingest_fleet([str(logs)], root=root, max_parallel=2, runner=runner)
    assert again.stored == 0 and again.duplicates == first.stored and again.failed == 0


@pytest.mark.parametrize("runner", ["tasks", "data"])
def test_a_worker_killed_mid_ingest_loses_and_duplicates_nothing(tmp_path, embedder, local_ray, runner):
    """SIGKILL the worker that writes alpha after its first batch is committed: Ray runs the store's
    task again, which stores the rest (the first batch counts as duplicates), and a rerun of the whole
    backfill stores nothing."""
    from expengine.fleet.ingest import ingest_fleet
    from expengine.ingest.pipeline import BATCH
    from expengine.store.pause import PAUSE_ENV, PAUSE_MARKER

    events = [
        {"id": f"{name}-{i}", "ts": f"2026-03-01T{9 + i // 600:02d}:{i // 10 % 60:02d}:{i % 10:02d}Z", "kind": "message",
         "role": "user", "agent": name, "session": f"{name}-s{i // 50}", "content": f"{name} asks about order {i}"}
        for name, count in (("alpha", BATCH + 150), ("beta", 40))
        for i in range(count)
    ]  # fmt: skip
    source = tmp_path / "backfill.jsonl"
    source.write_text("\n".join(map(json.dumps, events)) + "\n", encoding="utf-8")
    root = tmp_path / "fleet"
    marker = root / "alpha" / (PAUSE_MARKER + "ingest-batch")
    (root / "beta").mkdir(parents=True)
    (root / "beta" / marker.name).write_text("")  # the hook pauses once per marker: beta runs straight through
    env = {PAUSE_ENV: "ingest-batch"}
    _, rows = kill_the_paused_worker(
        lambda: ingest_fleet([str(source)], root=root, worker_env=env, runner=runner), marker
    )
    assert rows["alpha"].stored == 150 and rows["alpha"].duplicates == BATCH  # the retry's view
    assert rows["beta"].stored == 40
    (root / "alpha" / marker.name).unlink()
    (root / "beta" / marker.name).unlink()
    kill_test = load_kill_test()
    for name in ("alpha", "beta"):
        expected = {e["id"] for e in events if e["agent"] == name}
        assert kill_test.check_store(root / name, expected, embedder) == []  # every id once, indexed, healed
    again = ingest_fleet([str(source)], root=root, runner=runner)
    assert again.stored == 0 and again.duplicates == len(events) and again.failed == 0


def test_a_reject_routes_by_its_raw_json_even_when_cut_or_nested_10000_deep():
    from expengine.fleet.writes import UNROUTED, route_key
    from expengine.ingest.items import Item

    def reject(raw: str) -> Item:
        return Item(file="log.jsonl", line=1, error="bad line", raw=raw)

    assert route_key(reject('{"agent": "beta", "kind": "bogus"}'), "agent") == "beta"
    assert route_key(reject('{"agent": "beta", "kind": "no'), "agent") == UNROUTED
    assert route_key(reject('{"a":' * 10_000 + "1" + "}" * 10_000), "agent") == UNROUTED
