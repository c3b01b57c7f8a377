"""Shared fixtures. The whole suite runs offline: hub access is disabled and sockets are guarded."""

from __future__ import annotations

import os
import socket

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
