"""Object storage: a store exported as Parquet to S3 (moto's server, on 127.0.0.1, started and stopped
here by its pid) and restored from it into a new store that answers the same."""

from __future__ import annotations

import json
import os

import pytest
from helpers import make_fleet, moto_server, run_main

boto3 = pytest.importorskip("boto3", reason="moto and boto3 come with the test extra: pip install -e '.[test]'")
pytest.importorskip("moto", reason="moto comes with the test extra: pip install -e '.[test]'")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's S3 server and the AWS variables that point boto3, pyarrow and LanceDB at it, with a bucket."""
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log", bucket="fleet") as client:
        yield client


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

    from helpers import fleet_lines

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


def lance_objects(s3, prefix: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket="fleet", Prefix=prefix)
    return sorted(o["Key"] for o in listed.get("Contents", []))


def test_a_store_keeps_its_lancedb_on_s3(tmp_path, embedder, s3):
    """`[index] uri = "s3://..."`: ingest, the hybrid query (vectors and the full-text index), compaction
    (whose cleanup leaves one version of each table), a snapshot and its restore (the index rebuilt from
    the restored DuckDB) all work with the tables on S3; DuckDB and the snapshots stay local."""
    from helpers import fleet_lines

    from expengine import Engine
    from expengine.store.db import LANCE_DIR, REINDEX_PENDING

    lines = fleet_lines("alpha")
    log = tmp_path / "alpha.jsonl"
    log.write_text("\n".join(map(json.dumps, lines)) + "\n", encoding="utf-8")
    later = tmp_path / "later.jsonl"
    extra = {"id": "alpha-late", "ts": "2026-03-02T09:00:00Z", "kind": "message", "role": "user", "agent": "alpha"}
    extra["content"] = "the zeppelin voucher was lost"
    later.write_text(json.dumps(extra) + "\n", encoding="utf-8")
    local, remote = tmp_path / "local", tmp_path / "remote"
    answers = {}
    for store in (local, remote):
        store.mkdir(exist_ok=True)
        if store == remote:
            (store / "config.toml").write_text('[index]\nuri = "s3://fleet/index/alpha"\n', encoding="utf-8")
        with Engine(store=store, embedder=embedder) as engine:
            assert engine.ingest([str(log)]).stored == len(lines)
            answers[store] = [h["id"] for h in engine.query("book a flight", k=5, touch=False).to_dict()["hits"]]
    assert answers[remote] == answers[local] and answers[remote]
    assert not (remote / LANCE_DIR).exists()
    assert any(k.startswith("index/alpha/memories.lance/_indices/") for k in lance_objects(s3, "index/alpha/"))

    with Engine(store=remote, embedder=embedder) as engine:
        report = engine.compact(refine=False).to_dict()
        assert report["status"] == "completed"
        manifests: dict[str, int] = {}
        for key in lance_objects(s3, "index/alpha/"):
            if "/_versions/" in key and key.endswith(".manifest"):
                table = key.split("/")[2]
                manifests[table] = manifests.get(table, 0) + 1
        assert manifests.get("memories.lance") == 1 and set(manifests.values()) == {1}, (
            manifests
        )  # old versions cleaned
        stats = engine.stats()
        assert stats.indexed_memories == stats.active + stats.dormant
        snapshot = engine.snapshot().id
        assert not (remote / "snapshots" / snapshot / LANCE_DIR).exists()
        engine.ingest([str(later)])
        assert engine.stats().indexed_memories == stats.indexed_memories + 1
        assert "alpha-late" in [h["id"] for h in engine.query("zeppelin voucher", k=3, touch=False).to_dict()["hits"]]
        engine.restore(snapshot)
        after = engine.stats()
        assert (after.raw, after.indexed_memories, after.indexed_units) == (
            stats.raw,
            stats.indexed_memories,
            stats.indexed_units,
        )
        hits = engine.query("zeppelin voucher", k=3, touch=False).to_dict()["hits"]
        assert "alpha-late" not in [h["id"] for h in hits]  # gone from DuckDB and from the index on S3
        assert [h["id"] for h in engine.query("book a flight", k=5, touch=False).to_dict()["hits"]]
        gone = sorted(lines, key=lambda e: e["id"])[0]["id"]
        engine.forget(ids=[gone])  # scrubbed from the tables on S3 (compacted, old versions dropped) too
        with engine.session() as store:
            left = store.index.table("memories").search().select(["id"]).limit(100).to_arrow().column("id").to_pylist()
        assert gone not in left and len(left) == after.indexed_memories - 1
        with engine.session() as store:  # as a restore killed after its swap, before its rebuild, leaves it
            (remote / REINDEX_PENDING).write_text("")
            store.index.drop("memories")
        assert engine.stats().indexed_memories == len(left) and not (remote / REINDEX_PENDING).exists()


def test_fleet_ingest_puts_each_new_stores_index_under_the_index_root(tmp_path, embedder, s3):
    from helpers import fleet_lines

    pytest.importorskip("ray", reason="the fleet extra is not installed: pip install -e '.[fleet]'")
    from expengine import Engine
    from expengine.config import Config
    from expengine.fleet.ingest import ingest_fleet

    log = tmp_path / "logs.jsonl"
    alpha, beta = fleet_lines("alpha"), fleet_lines("beta")
    log.write_text("\n".join(map(json.dumps, alpha + beta)) + "\n", encoding="utf-8")
    root = tmp_path / "fleet"
    aws = {
        k: os.environ[k]
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL")
    }
    report = ingest_fleet([str(log)], root=root, index_root="s3://fleet/idx/", worker_env=aws)
    assert report.failed == 0 and report.stored == len(alpha + beta)
    for name in ("alpha", "beta"):
        assert Config.load(root / name).index.uri == f"s3://fleet/idx/{name}"
        assert lance_objects(s3, f"idx/{name}/memories.lance/")
    with Engine(store=root / "beta", embedder=embedder) as engine:
        assert engine.stats().indexed_memories == len(beta)
    moved = ingest_fleet([str(log)], root=root, index_root="s3://fleet/other", worker_env=aws)
    errors = {r.store: r.error for r in moved.stores}
    assert moved.failed == 2 and moved.stored == 0, errors  # refused per store, nothing moved or written
    assert "keeps its index at s3://fleet/idx/alpha, not at s3://fleet/other/alpha" in errors["alpha"]
