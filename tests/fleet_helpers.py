"""A small fleet for the fleet tests: a root with one store per name."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from test_compact import BOOKING, CHATTER, REFUND

NAMES = ("alpha", "beta", "gamma")


def make_fleet(root: Path, embedder, names=NAMES) -> dict[str, set[str]]:
    """One store per name, each with the booking, refund and chatter logs under its own agent and ids."""
    from expengine import Engine

    ids = {}
    for name in names:
        lines = fleet_lines(name)
        log = root.parent / f"{name}.jsonl"
        log.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
        with Engine(store=root / name, embedder=embedder) as engine:
            engine.ingest([str(log)])
        log.unlink()
        ids[name] = {line["id"] for line in lines}
    return ids


def fleet_lines(name: str) -> list[dict]:
    """The booking, refund and chatter events as agent `name`'s, with ids of its own."""
    return [{**e, "id": f"{name}-{e['id']}", "agent": name} for e in BOOKING + REFUND + CHATTER]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def moto_server(log: Path, *, bucket: str) -> Iterator[Any]:
    """moto's S3 server on 127.0.0.1 (stopped by its pid at the end), the AWS variables that point boto3,
    pyarrow and LanceDB at it (put back after), and `bucket` made there; yields a boto3 client."""
    import boto3

    port = free_port()
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
        client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"])
        client.create_bucket(Bucket=bucket)
        yield client
    finally:
        os.kill(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
