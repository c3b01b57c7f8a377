"""`serve --root`: three tenants in one process, each with its own token and store; nothing crosses."""

from __future__ import annotations

import pytest
from helpers import NAMES, make_fleet
from starlette.testclient import TestClient

from expengine.errors import InputError
from expengine.fleet.tenants import Tenants, build_app, read_shard_map
from expengine.service.client import TOKEN_FILE


@pytest.fixture
def served(tmp_path, embedder):
    root = tmp_path / "fleet"
    make_fleet(root, embedder)
    tenants = Tenants(root, max_open=2, lock_timeout=0.2)
    tenants.load_tokens()
    tokens = {name: (root / name / TOKEN_FILE).read_text().strip() for name in NAMES}
    with TestClient(build_app(tenants)) as client:
        yield client, tenants, tokens
    assert tenants.open_names() == []  # the app's shutdown closed every store


def ask(client, store: str, token: str | None, text: str = "book a flight"):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post(f"/v1/{store}/query", json={"text": text, "k": 10}, headers=headers)


def test_a_tenant_reads_only_its_own_store(served):
    client, tenants, tokens = served
    assert len(set(tokens.values())) == 3
    for name in NAMES:
        answer = ask(client, name, tokens[name])
        assert answer.status_code == 200, answer.text
        hits = answer.json()["hits"]
        assert hits and {h["agent"] for h in hits} == {name}
        assert all(source.startswith(f"{name}-") for h in hits for source in [h["id"], *h["source_ids"]])
    for name in NAMES:
        for other in NAMES:
            if other != name:
                refused = ask(client, other, tokens[name])
                assert refused.status_code == 403 and "hits" not in refused.json()
    assert ask(client, "alpha", None).status_code == 401
    assert ask(client, "alpha", "not-a-token").status_code == 401
    assert ask(client, "nosuchstore", tokens["alpha"]).status_code == 403  # no probing for names either
    assert ask(client, "../alpha", tokens["alpha"]).status_code in (400, 404)


def test_stores_open_lazily_within_the_bound_and_a_second_owner_is_refused(served, tmp_path):
    client, tenants, tokens = served
    assert tenants.open_names() == []
    for name in NAMES:
        assert ask(client, name, tokens[name]).status_code == 200
        assert len(tenants.open_names()) <= 2
    assert tenants.counts["opened"] == 3 and tenants.counts["closed"] >= 1
    held = tenants.open_names()
    rival = Tenants(tmp_path / "fleet", lock_timeout=0.2)
    rival.load_tokens()
    with TestClient(build_app(rival)) as other:
        claimed = ask(other, held[0], tokens[held[0]])
        assert claimed.status_code == 409 and "owned by another process" in claimed.json()["error"]["message"]


def test_the_shard_map_names_the_stores_of_one_shard(tmp_path):
    shards = tmp_path / "shards.txt"
    shards.write_text("# store shard\nalpha a\nbeta b\ngamma a  # late joiner\n", encoding="utf-8")
    assert read_shard_map(shards, "a") == {"alpha", "gamma"}
    assert read_shard_map(shards, "b") == {"beta"}
    shards.write_text("alpha\n", encoding="utf-8")
    with pytest.raises(Exception, match="expected `<store> <shard>`"):
        read_shard_map(shards, "a")


def test_serve_root_needs_http_and_a_whole_shard_choice(monkeypatch, capsys, tmp_path):
    from helpers import run_main

    code, out, err = run_main(monkeypatch, capsys, ["serve", "--root", str(tmp_path)])
    assert code == 2 and out == "" and "serve --root needs --http" in err
    args = ["serve", "--root", str(tmp_path), "--http", "127.0.0.1:0", "--shard-map", str(tmp_path / "m.txt")]
    code, out, err = run_main(monkeypatch, capsys, args)
    assert code == 2 and "--shard-map and --shard go together" in err


def test_two_stores_with_one_token_are_refused_at_start_with_a_hint(served, tmp_path):
    _, _, tokens = served
    root = tmp_path / "fleet"
    (root / "beta" / TOKEN_FILE).write_text(tokens["alpha"])  # beta made by `cp -a alpha beta`
    with pytest.raises(InputError, match="'alpha' and 'beta' .* have the same serve.token") as refused:
        Tenants(root).load_tokens()
    assert "rotate one: delete" in (refused.value.hint or "")


def test_an_unknown_token_reads_and_makes_no_token_file_of_a_known_store(served, tmp_path):
    client, tenants, tokens = served
    root = tmp_path / "fleet"
    (root / "alpha" / TOKEN_FILE).unlink()  # would be made again by a re-read of every store
    for _ in range(20):
        assert ask(client, "beta", "not-a-token").status_code == 401
    assert not (root / "alpha" / TOKEN_FILE).exists()
    assert ask(client, "beta", tokens["beta"]).status_code == 200


def test_health_shows_counters_to_a_tenant_only(served):
    client, _, tokens = served
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/health", headers={"Authorization": "Bearer nope"}).json() == {"status": "ok"}
    counted = client.get("/health", headers={"Authorization": f"Bearer {tokens['gamma']}"}).json()
    assert counted["status"] == "ok" and "requests" in counted


def test_mcp_for_a_store_the_root_does_not_have_creates_nothing(monkeypatch, capsys, tmp_path):
    from test_cli_usage import run_main

    root = tmp_path / "fleet"
    root.mkdir()
    code, out, err = run_main(monkeypatch, capsys, ["mcp", "--root", str(root), "--store-name", "nosuch"])
    assert code == 5 and "no store 'nosuch' in the fleet root" in err and "Traceback" not in err
    assert list(root.iterdir()) == []
