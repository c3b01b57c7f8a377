"""Object storage: a store exported as Parquet to S3 (moto's server, on 127.0.0.1, started and stopped
here by its pid) and restored from it into a new store that answers the same."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from fleet_helpers import make_fleet
from test_cli_usage import run_main

boto3 = pytest.importorskip("boto3", reason="moto and boto3 come with the test extra: pip install -e '.[test]'")
pytest.importorskip("moto", reason="moto comes with the test extra: pip install -e '.[test]'")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's S3 server and the AWS variables that point boto3 and pyarrow at it, with a bucket."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=out
        )
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        deadline = time.monotonic() + 60
        while True:  # until it accepts connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"]).create_bucket(Bucket="fleet")
        yield boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"])
    finally:
        os.kill(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


def test_snapshot_to_s3_and_restore_from_it(tmp_path, embedder, s3, monkeypatch, capsys):
    from expengine import Engine

    root = tmp_path / "fleet"
    ids = make_fleet(root, embedder, names=("alpha",))
    with Engine(store=root / "alpha", embedder=embedder) as engine:
        engine.compact(refine=False)
        before = engine.query("book a flight", k=5, touch=False).to_dict()
        stats = engine.stats()
    code, out, _ = run_main(
        monkeypatch, capsys, ["--store", str(root / "alpha"), "snapshot", "--to", "s3://fleet/alpha/1", "--json"]
    )
    exported = json.loads(out)
    assert code == 0 and exported["tables"]["records"] == len(ids["alpha"])
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="fleet", Prefix="alpha/1/")["Contents"]}
    assert {"alpha/1/manifest.json", "alpha/1/records.parquet", "alpha/1/embeddings.parquet"} <= keys

    copy = tmp_path / "copy"
    code, out, _ = run_main(
        monkeypatch, capsys, ["--store", str(copy), "restore", "--from", "s3://fleet/alpha/1", "--json"]
    )
    assert code == 0, out
    with Engine(store=copy, embedder=embedder) as engine:
        again = engine.query("book a flight", k=5, touch=False).to_dict()
        restored = engine.stats()
        assert {r["id"] for r in engine.records(limit=1000)} == ids["alpha"]
        assert [r["status"] for r in engine.history()] == ["completed"]
    assert (restored.raw, restored.active, restored.units) == (stats.raw, stats.active, stats.units)
    assert [h["id"] for h in again["hits"]] == [h["id"] for h in before["hits"]]
    # into a store that holds records: refused, nothing changed
    code, _, err = run_main(monkeypatch, capsys, ["--store", str(copy), "restore", "--from", "s3://fleet/alpha/1"])
    assert code == 2 and "already holds records" in err
    code, _, err = run_main(
        monkeypatch, capsys, ["--store", str(tmp_path / "new"), "restore", "--from", "s3://fleet/none"]
    )
    assert code == 5 and "no complete export" in err


def test_logs_on_s3_are_ingested_and_backfilled_per_store(tmp_path, embedder, s3, monkeypatch, capsys):
    """`ingest s3://…` and `fleet ingest s3://…` stream the objects (plain and gzip) under a prefix,
    as they read local files; a prefix with nothing under it is a one-line error."""
    import gzip

    from fleet_helpers import fleet_lines

    pytest.importorskip("ray", reason="the fleet extra is not installed: pip install -e '.[fleet]'")

    from expengine import Engine
    from expengine.fleet.ingest import ingest_fleet

    alpha, beta = fleet_lines("alpha"), fleet_lines("beta")
    s3.put_object(Bucket="fleet", Key="logs/day1.jsonl", Body="\n".join(map(json.dumps, alpha[:8] + beta)).encode())
    s3.put_object(
        Bucket="fleet", Key="logs/day2.jsonl.gz", Body=gzip.compress("\n".join(map(json.dumps, alpha[8:])).encode())
    )
    s3.put_object(Bucket="fleet", Key="logs/notes.txt", Body=b"not a log")

    with Engine(store=tmp_path / "one", embedder=embedder) as engine:
        first = engine.ingest(["s3://fleet/logs"])
        assert first.files == ["s3://fleet/logs/day1.jsonl", "s3://fleet/logs/day2.jsonl.gz"]
        assert first.stored == len(alpha + beta) and first.rejected == 0
        assert engine.ingest(["s3://fleet/logs/day2.jsonl.gz"]).duplicates == len(alpha) - 8

    root = tmp_path / "fleet"
    aws = {
        k: os.environ[k]
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL")
    }
    report = ingest_fleet(["s3://fleet/logs/"], root=root, worker_env=aws)
    rows = {r.store: r for r in report.stores}
    assert report.failed == 0 and report.files == 2
    assert (rows["alpha"].stored, rows["beta"].stored) == (len(alpha), len(beta))
    with Engine(store=root / "alpha", embedder=embedder) as engine:
        assert {r["id"] for r in engine.records(limit=1000)} == {line["id"] for line in alpha}

    code, out, err = run_main(monkeypatch, capsys, ["--store", str(tmp_path / "two"), "ingest", "s3://fleet/none/"])
    assert code == 2 and out == "" and "no such object or prefix: s3://fleet/none/" in err and "Traceback" not in err
