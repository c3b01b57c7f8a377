"""Shared fixtures. The whole suite runs offline: hub access is disabled and sockets are guarded."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class NetworkAccessError(RuntimeError):
    """Raised when a test tries to reach anything but this machine."""


_real_connect = socket.socket.connect


def _guarded_connect(sock: socket.socket, address, *args, **kwargs):
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        if host not in ("127.0.0.1", "::1", "localhost") and not str(host).startswith("127."):
            raise NetworkAccessError(f"test tried to reach {address!r}: the suite must run offline")
    return _real_connect(sock, address, *args, **kwargs)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def embedder():
    """The real packaged all-MiniLM-L6-v2, loaded once for the whole session."""
    from expengine.models.embedder import get_embedder

    return get_embedder()


@pytest.fixture
def make_engine(tmp_path, embedder):
    """Open engines on a fresh store folder with the shared real embedder; all closed at teardown."""
    from expengine import Engine

    opened = []

    def factory(store=None, **kwargs):
        kwargs.setdefault("embedder", embedder)
        engine = Engine(store=store or tmp_path / "store", **kwargs)
        opened.append(engine)
        return engine

    yield factory
    for engine in opened:
        engine.close()


@pytest.fixture
def write_jsonl(tmp_path):
    """Write a list of dicts (or raw strings/bytes) as a JSONL file and return its path."""
    import json

    def writer(name: str, lines) -> str:
        path = tmp_path / name
        with open(path, "wb") as fh:
            for line in lines:
                if isinstance(line, bytes):
                    fh.write(line + b"\n")
                elif isinstance(line, str):
                    fh.write(line.encode("utf-8") + b"\n")
                else:
                    fh.write(json.dumps(line).encode("utf-8") + b"\n")
        return str(path)

    return writer


# The query tests' store (test_query.py, test_loop.py); a module's own `store` fixture overrides it.
@pytest.fixture
def store(make_engine, write_jsonl, tmp_path):
    """A store with plain memories, one dormant, one merged survivor (s1 ← s2, s3, archived) and a rule unit
    whose sources include the archived s3; closed again so the CLI can open it too."""
    from helpers import UNIT_TEXT, add_unit, query_events

    from expengine.store.state import set_state

    engine = make_engine()
    result = engine.ingest([write_jsonl("log.jsonl", query_events())])
    assert result.stored == len(query_events())
    set_state(engine.store, ["d1"], "dormant", reason="test")
    set_state(engine.store, ["s2", "s3"], "archived", reason="merged into s1")
    engine.store.con.execute("UPDATE records SET merged_into = 's1' WHERE id IN ('s2', 's3')")
    engine.store.con.execute("""UPDATE records SET merged_ids = '["s2", "s3"]', merged_count = 3 WHERE id = 's1'""")
    add_unit(engine, "u-weather", UNIT_TEXT, ["w1", "w3", "s3"])
    engine.close()
    return tmp_path / "store"


@pytest.fixture
def engine_on(make_engine, store):
    def opener(**kwargs):
        return make_engine(store, **kwargs)

    return opener


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder with the coding agents' variables pointing into it (where they keep their logs)."""
    from expengine.models.onnx import cache_dir

    home = tmp_path / "home"
    monkeypatch.setenv("EXPENGINE_CACHE_DIR", str(cache_dir()))  # the encoder's export stays where it is cached
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(home / "codex"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    return home
