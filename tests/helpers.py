"""What several test files share: the hand-made logs, the shared data's whereabouts, child processes whose
output goes to files, servers, fleets and the scripts under bench/ and scripts/ loaded by path."""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import json
import lzma
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import numpy as np
import pytest
from typer.testing import CliRunner

from expengine.cli import app, main
from expengine.clock import utcnow
from expengine.errors import ExpengineError
from expengine.ingest.rules import assess
from expengine.service.client import Client, find_server
from expengine.store.index import UNITS
from expengine.store.lance_rows import memory_rows
from expengine.store.pause import PAUSE_ENV, PAUSE_MARKER
from expengine.store.reindex import unit_rows

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
DIM = 8


def shared_data(relative: str) -> Path:
    """`../shared/data/RELATIVE`, which a clone without the shared data lacks: there the test skips, and
    under CI (where .ci/run runs beside shared/) it fails."""
    path = SHARED_DATA / relative
    if not path.exists():
        reason = f"../shared/data/{relative} is not here: this test reads the shared data by path"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


class Child(subprocess.Popen):
    """A child process whose stdout and stderr go to files, read back by `communicate`: a pipe nobody
    reads fills at 64 KiB and blocks the child in write() while the test waits on it."""

    def __init__(self, args: list[str], **kwargs: Any) -> None:
        self._out = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 (closed in communicate)
        self._err = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        super().__init__(args, stdout=self._out, stderr=self._err, text=True, **kwargs)

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[str, str]:  # noqa: A002
        """Wait for the end, then (stdout, stderr) as the files hold them."""
        self.wait(timeout)
        return self.output()

    def output(self) -> tuple[str, str]:
        """(stdout, stderr) so far, the child still running or not."""
        texts = []
        for sink in (self._out, self._err):
            sink.flush()
            sink.seek(0)
            texts.append(sink.read())
        return texts[0], texts[1]


def ev(rid, ts_min, kind, *, session="s1", goal_id=None, agent="bot", **fields):
    """One native log event, `ts_min` minutes after a fixed start."""
    ts = (dt.datetime(2026, 3, 1, 9, 0) + dt.timedelta(minutes=ts_min)).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = {"id": rid, "ts": ts, "kind": kind, "agent": agent, "session": session, **fields}
    if goal_id:
        out["goal_id"] = goal_id
    return out


def tool(rid, t, kind, name, *, goal_id, session="s1", args=None, result=None, error=None):
    body = {"name": name}
    if args is not None:
        body["args"] = args
    if result is not None:
        body["result"] = result
    if error is not None:
        body["error"] = error
    return ev(
        rid, t, kind, session=session, goal_id=goal_id, role="assistant" if kind == "tool_call" else "tool", tool=body
    )


# A succeeded booking with a fixed rate-limit error, and a failed refund with a user correction.
BOOKING = [
    ev(
        "b01",
        0,
        "goal",
        goal_id="g1",
        goal={"id": "g1", "status": "open", "description": "Book a flight DEN->NRT on 2026-03-20"},
    ),
    ev("b02", 1, "message", goal_id="g1", role="user", content="I need a flight from DEN to Tokyo NRT on 2026-03-20"),
    tool("b03", 2, "tool_call", "search_flights", goal_id="g1", args={"origin": "DEN", "destination": "NRT"}),
    tool("b04", 3, "tool_result", "search_flights", goal_id="g1", error="429 Too Many Requests: rate limited"),
    tool(
        "b05", 4, "tool_call", "search_flights", goal_id="g1", args={"origin": "DEN", "destination": "NRT", "retry": 1}
    ),
    tool(
        "b06", 5, "tool_result", "search_flights", goal_id="g1", result={"flights": ["AS 1618 10:05", "AA 1139 13:30"]}
    ),
    ev(
        "b07",
        6,
        "message",
        goal_id="g1",
        role="assistant",
        content="Two options: AS 1618 at 10:05 or AA 1139 at 13:30.",
    ),
    ev("b08", 7, "message", goal_id="g1", role="user", content="the morning one please"),
    tool("b09", 8, "tool_call", "book_flight", goal_id="g1", args={"flight": "AS 1618"}),
    tool("b10", 9, "tool_result", "book_flight", goal_id="g1", result={"confirmation": "WGBVMS"}),
    ev("b11", 10, "message", goal_id="g1", role="assistant", content="Booked AS 1618, confirmation WGBVMS."),
    ev("b12", 11, "goal", goal_id="g1", goal={"id": "g1", "status": "succeeded"}),
    ev("b13", 12, "outcome", goal_id="g1", outcome="success", content="Booked AS 1618 DEN->NRT, confirmation WGBVMS"),
]


REFUND = [
    ev(
        "r01",
        20,
        "goal",
        session="s2",
        goal_id="g2",
        goal={"id": "g2", "status": "open", "description": "Refund order W123"},
    ),
    ev("r02", 21, "message", session="s2", goal_id="g2", role="user", content="please refund order W123"),
    tool("r03", 22, "tool_call", "request_refund", session="s2", goal_id="g2", args={"order": "W123"}),
    tool(
        "r04",
        23,
        "tool_result",
        "request_refund",
        session="s2",
        goal_id="g2",
        error="order W123 is past the 30 day refund window",
    ),
    ev(
        "r05",
        24,
        "message",
        session="s2",
        goal_id="g2",
        role="user",
        content="That's wrong, you must never start a refund before checking the order date",
    ),
    ev(
        "r06",
        25,
        "message",
        session="s2",
        goal_id="g2",
        role="assistant",
        content="Sorry about that, I will check dates first.",
    ),
    ev("r07", 26, "outcome", session="s2", goal_id="g2", outcome="failure", content="refund refused: outside window"),
]


CHATTER = [
    ev("c01", 30, "message", session="s3", role="user", content="hi"),
    ev("c02", 31, "message", session="s3", role="user", content="thanks!"),
    ev(
        "c03", 32, "note", session="s3", content="User u-101 prefers aisle seats on long flights", category="preference"
    ),
]


def weights(engine) -> dict[str, float]:
    return dict(engine.store.con.execute("SELECT id, weight FROM records").fetchall())


def state_of(engine) -> dict[str, str]:
    return dict(engine.store.con.execute("SELECT id, state FROM records").fetchall())


def spawn_cli(store: Path, *args: str, env: dict[str, str] | None = None, **popen) -> Child:
    """`expengine --store STORE ARGS` started in a child process."""
    return Child(
        [sys.executable, "-m", "expengine", "--store", str(store), *args],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        **popen,
    )


def paused_cli(store: Path, step: str, *args: str, timeout: float = 180) -> Child:
    """`expengine --store STORE ARGS` stopped at the pause point `step`: it writes the marker there and
    blocks until the test kills it (polled, bounded by `timeout`; the child's exit fails the wait)."""
    child = spawn_cli(store, *args, env={PAUSE_ENV: step})
    marker = store / (PAUSE_MARKER + step)
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the child never reached the pause point"
        time.sleep(0.05)
    return child


def run_main(monkeypatch, capsys, argv: list[str]) -> tuple[int, str, str]:
    """The real entry point `main` in this process (sys.argv as the shell would give it)."""
    monkeypatch.setattr(sys, "argv", ["expengine", *argv])
    with pytest.raises(SystemExit) as stop:
        main()
    out, err = capsys.readouterr()
    return stop.value.code, out, err


TEMPLATES = ["--set", "llm.mode=template"]


QUERY = "search_flights fails with 429 Too Many Requests"  # the store holds it (the floor silences a query it does not)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn_server(store: Path, *args: str, env: dict[str, str] | None = None) -> Child:
    """A server process, just started (it is still loading the model)."""
    return Child(
        [sys.executable, "-m", "expengine", "--store", str(store), *TEMPLATES, "serve", *args],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )


def start_server(store: Path, *args: str, env: dict[str, str] | None = None) -> Child:
    """A server process, returned once its socket answers /health (polled, with a deadline)."""
    child = spawn_server(store, *args, env=env)
    deadline = time.monotonic() + 300
    while find_server(store) is None:
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the server never answered /health"
        time.sleep(0.1)
    return child


def stop(child: subprocess.Popen) -> tuple[int, str]:
    """SIGTERM, then (exit code, stderr)."""
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=120)
    return child.returncode, err


def invoke(store: Path, *args: str, direct: bool = False) -> tuple[int, str]:
    """(exit code as `main` would set it, stdout)."""
    result = CliRunner().invoke(app, ["--store", str(store), *(["--direct"] if direct else []), *args])
    error = result.exception
    return (error.exit_code if isinstance(error, ExpengineError) else result.exit_code), result.stdout


def mcp_params(store: Path) -> Any:
    """How the SDK's stdio client starts `expengine mcp` on `store`."""
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "expengine", "--store", str(store), "mcp"],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        cwd=str(REPO),
    )


def call_ignoring_errors(client: Client, op: str) -> None:
    with contextlib.suppress(Exception):  # the server is killed under this call
        client.call(op, {})


def rows(ids: range, state: str = "active"):
    import datetime as dt

    records = [
        {
            "id": f"m{i}",
            "agent": "a",
            "kind": "message",
            "category": "c",
            "ts": dt.datetime(2026, 1, 1),
            "text": f"t{i}",
        }
        for i in ids
    ]
    for r in records:
        r["state"] = state
    vectors = np.random.default_rng(len(ids)).standard_normal((len(records), DIM)).astype(np.float32)
    return memory_rows(records, vectors, DIM)


def assess_event(**kw):
    """The rules' verdict on a user message with no context, with `kw` overriding any field."""
    base = dict(
        kind="message",
        role="user",
        content="",
        tool_error=None,
        outcome=None,
        goal_long_term=None,
        has_goal=False,
        importance=None,
        category=None,
        confidence=None,
    )
    base.update(kw)
    return assess(**base)


def weather_session(n: int, *, rate_limited: bool) -> list[dict]:
    """One support session: get_weather, maybe a 429, an observation, a retry that works."""
    base, s = n * 100, f"s{n}"
    events = [
        {
            "id": f"w{n}-call",
            "ts": at(base),
            "kind": "tool_call",
            "agent": "bot",
            "session": s,
            "tool": {
                "name": "get_weather",
                "args": {"city": ["Boston", "Tokyo", "Austin", "Oslo"][n % 4], "units": "metric"},
            },
        }
    ]
    if rate_limited:
        events += [
            {
                "id": f"w{n}-err",
                "ts": at(base + 1),
                "kind": "tool_result",
                "agent": "bot",
                "session": s,
                "tool": {"name": "get_weather", "error": "HTTP 429 Too Many Requests - Retry-After: 60"},
            },
            {
                "id": f"w{n}-obs",
                "ts": at(base + 2),
                "kind": "observation",
                "agent": "bot",
                "session": s,
                "content": "get_weather rate limited (429); waiting 60 s before retrying.",
            },
            {
                "id": f"w{n}-retry",
                "ts": at(base + 3),
                "kind": "tool_call",
                "agent": "bot",
                "session": s,
                "tool": {"name": "get_weather", "args": {"city": "Boston", "units": "metric"}},
            },
        ]
    events.append(
        {
            "id": f"w{n}-ok",
            "ts": at(base + 4),
            "kind": "tool_result",
            "agent": "bot",
            "session": s,
            "tool": {"name": "get_weather", "result": {"summary": "sunny", "high_c": 5}},
        }
    )
    return events


UNIT_TEXT = (
    "When get_weather returns 429 Too Many Requests, wait 60 seconds and retry once; do not call it twice per second."
)


def write_refined(engine, cluster_key: str, draft, at: dt.datetime) -> str:
    """`draft` written as refinement writes a cluster's unit (merges with an active twin included); its
    row's id."""
    from expengine.lifecycle.refine.inputs import ClusterInput
    from expengine.lifecycle.refine.report import RefineReport
    from expengine.lifecycle.refine.write import unit_row, write_units

    key = cluster_key.rsplit(":", 1)[-1]
    cluster = ClusterInput(cluster_key, "support-bot", f"sig-{key}", draft.source_ids)
    row = unit_row(draft, cluster, at)
    write_units(engine.store, cluster, [(draft, row)], RefineReport(run_id=None, dry_run=False), None, False, at)
    return row["id"]


def add_unit(
    engine,
    unit_id: str,
    text: str,
    sources: list[str],
    *,
    kind: str = "rule",
    agent: str = "support-bot",
    category: str = "weather",
) -> None:
    now = utcnow()
    engine.store.con.execute(
        """INSERT INTO units (id, kind, text, category, agent, support, confidence, source_ids, method, created, updated)
           VALUES (?, ?, ?, ?, ?, ?, 0.8, ?, 'test', ?, ?)""",
        [
            unit_id,
            kind,
            text,
            category,
            agent,
            len(sources),
            json.dumps(sources),
            now - dt.timedelta(days=10),
            now - dt.timedelta(days=10),
        ],
    )
    engine.store.index.add(UNITS, unit_rows(engine.store, f"id = '{unit_id}'"))
    engine.store.index.refresh_text_index(UNITS)


def cli(store, *args: str):
    from expengine.cli import app

    return CliRunner().invoke(app, ["--store", str(store), *args], catch_exceptions=False)


def dump(engine) -> list:
    return [
        engine.store.con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in ("records", "units", "history")
    ]


MARKER = "zqxvmarker4417"  # lower case: the full-text index stores tokens lower-cased


SECRET = [
    ev(
        f"p{i:02d}",
        40 + i,
        "note",
        session="private",
        agent="bot",
        category="preference",
        content=f"User u-555 {MARKER} prefers {seat} seats and {meal} meals on long flights",
    )
    for i, (seat, meal) in enumerate(
        [("aisle", "vegan"), ("window", "kosher"), ("aisle", "vegan"), ("exit row", "halal")]
    )
]


OTHERS = BOOKING + REFUND + CHATTER


def files_holding(folder: Path, needle: str) -> list[str]:
    """Every file under `folder` whose bytes contain `needle` (what `grep -r` would find, xz unpacked)."""
    data = needle.encode()
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and data in file_bytes(p))


class Counting:
    """The shared embedder, counting the texts it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.texts = inner, 0
        self.name, self.dim = inner.name, inner.dim

    def encode(self, texts):
        self.texts += len(texts)
        return self.inner.encode(texts)


def load_script(path: Path, name: str) -> ModuleType:
    """bench/ and scripts/ are folders of scripts, not packages: load one by path (registered, since
    its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load(name: str) -> ModuleType:
    """One benchmark script, bench/NAME.py."""
    return load_script(REPO / "bench" / f"{name}.py", f"bench_{name}")


def load_kill_test() -> ModuleType:
    return load_script(REPO / "scripts" / "kill_test.py", "kill_test")


def at(minutes: int) -> str:
    return (T0 + dt.timedelta(minutes=minutes)).isoformat() + "Z"


def query_events() -> list[dict]:
    sb = {"agent": "support-bot", "session": "s1"}
    return [
        {
            **sb,
            "id": "w1",
            "ts": ts_at(1),
            "kind": "tool_result",
            "goal_id": "g1",
            "outcome": "failure",
            "category": "weather",
            "tool": {"name": "get_weather", "error": "429 Too Many Requests, rate limit exceeded"},
        },
        {
            **sb,
            "id": "w2",
            "ts": ts_at(2),
            "kind": "tool_result",
            "goal_id": "g2",
            "outcome": "failure",
            "category": "weather",
            "tool": {"name": "get_weather", "error": "429 Too Many Requests, rate limit exceeded"},
        },
        {
            **sb,
            "id": "w3",
            "ts": ts_at(3),
            "kind": "observation",
            "goal_id": "g1",
            "outcome": "success",
            "category": "weather",
            "content": "waited 60 seconds after the 429 and retried get_weather; the forecast came back",
        },
        {
            **sb,
            "id": "w4",
            "ts": ts_at(4),
            "kind": "observation",
            "category": "weather",
            "content": "get_weather rate limit is 60 requests per minute per API key",
        },
        {
            **sb,
            "id": "f1",
            "ts": ts_at(5),
            "kind": "message",
            "role": "user",
            "category": "booking",
            "content": "I need a flight from Denver to Tokyo on March 20, morning departure",
        },
        {
            **sb,
            "id": "f2",
            "ts": ts_at(6),
            "kind": "tool_call",
            "category": "booking",
            "tool": {"name": "search_flights", "args": {"from": "DEN", "to": "NRT", "date": "2026-03-20"}},
        },
        {
            **sb,
            "id": "r1",
            "ts": ts_at(7),
            "kind": "tool_call",
            "category": "refund",
            "tool": {"name": "request_refund", "args": {"order": "A-77"}},
        },
        {
            **sb,
            "id": "d1",
            "ts": ts_at(8),
            "kind": "observation",
            "category": "weather",
            "content": "the weather provider rotates API keys every Sunday night",
        },
        {
            **sb,
            "id": "s1",
            "ts": ts_at(9),
            "kind": "observation",
            "category": "weather",
            "content": "get_weather returns 429 when called twice within a second",
        },
        {
            **sb,
            "id": "s2",
            "ts": ts_at(10),
            "kind": "observation",
            "category": "weather",
            "content": "get_weather gives 429 if called twice within one second",
        },
        {
            **sb,
            "id": "s3",
            "ts": ts_at(11),
            "kind": "observation",
            "category": "weather",
            "content": "calling get_weather twice in a second gives a 429",
        },
        {
            "agent": "coding-assistant",
            "session": "c1",
            "id": "c1",
            "ts": ts_at(12),
            "kind": "observation",
            "category": "dependency",
            "content": "import dotenv failed: fixed by pip install python-dotenv, then tests passed",
        },
    ]


def file_bytes(path: Path) -> bytes:
    """A file's bytes, unpacked where it is a snapshot's xz-compressed database (what `xzgrep` reads) or a
    snapshot's zstd-compressed Parquet chunk (its values, as text)."""
    if path.suffix == ".xz":
        return lzma.decompress(path.read_bytes())
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return path.read_bytes() + str(pq.read_table(path).to_pylist()).encode()
    return path.read_bytes()


BASE = (utcnow() - dt.timedelta(days=30)).replace(microsecond=0)


def ts_at(minutes: int) -> str:
    return (BASE + dt.timedelta(minutes=minutes)).isoformat() + "Z"


T0 = dt.datetime(2026, 3, 1, 8, 0, 0)


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


# `python -c` it: runs the CLI as `python -m expengine` does, then prints on stderr (JSON, its last line)
# which of these heavy modules the process holds
HEAVY_MODULES = (
    "torch",
    "sentence_transformers",
    "transformers",
    "onnx",
    "lancedb",
    "lance",
    "onnxruntime",
    "lance_namespace_urllib3_client.api",
    "lance_namespace_urllib3_client.api_client",
)


def cli_then_modules(modules: tuple[str, ...] = HEAVY_MODULES) -> str:
    """A `python -c` program: the CLI with the arguments given, then (on stderr, as JSON) which of `modules` it loaded."""
    return f"""
import runpy, sys, json
sys.argv = ["expengine", *sys.argv[1:]]
try:
    runpy.run_module("expengine", run_name="__main__")
except SystemExit as done:
    assert not done.code, done.code
held = [m for m in {modules!r} if m in sys.modules]
print(json.dumps(held), file=sys.stderr)
"""


CLI_THEN_MODULES = cli_then_modules()


def run_offline_python(*args: str) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in the repository root, output captured as text, bounded by a timeout."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def damage_snapshot(folder: Path, damage: Any = lambda data: data[: len(data) // 2]) -> Path:
    """Damage a snapshot (a cut or garbled file): its largest chunk that no other snapshot lists, or, for a
    snapshot of the older format, its `.xz`. Returns the damaged file."""
    from expengine.lifecycle.snapshot import PACKED_DB, own_chunks

    target = folder / PACKED_DB if (folder / PACKED_DB).exists() else own_chunks(folder)[0]
    target.write_bytes(damage(target.read_bytes()))
    return target


def old_format_snapshot(store_dir: Path, snapshot_id: str, *, reason: str = "old format") -> Path:
    """A snapshot as expengine wrote them before chunks: the closed store's tables, less the embedding
    cache, in one xz-compressed DuckDB file beside its `snapshot.json`."""
    import duckdb

    from expengine.lifecycle.snapshot import META_FILE, PACKED_DB
    from expengine.store.db import BLOCK_SIZE, DB_FILE, SNAPSHOT_DIR

    folder = store_dir / SNAPSHOT_DIR / snapshot_id
    folder.mkdir(parents=True)
    con = duckdb.connect()
    con.execute(f"ATTACH '{store_dir / DB_FILE}' AS live (READ_ONLY)")
    con.execute(f"ATTACH '{folder / DB_FILE}' AS copy (BLOCK_SIZE {BLOCK_SIZE})")
    con.execute("COPY FROM DATABASE live TO copy")
    con.execute("DELETE FROM copy.embeddings")
    counts = dict(con.execute("SELECT state, count(*) FROM live.records GROUP BY state").fetchall())
    con.close()
    (folder / PACKED_DB).write_bytes(lzma.compress((folder / DB_FILE).read_bytes()))
    (folder / DB_FILE).unlink()
    meta = {"id": snapshot_id, "created": "2026-01-01T00:00:00.000000", "reason": reason}
    meta.update(
        raw=sum(counts.values()), active=counts.get("active", 0), size_bytes=(folder / PACKED_DB).stat().st_size
    )
    (folder / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    return folder


# a Django script run before settings are configured: the error coding runs in tests fail with and fix
DJANGO_SETTINGS_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "/testbed/reproduce_{n}.py", line {line}, in <module>\n'
    "    from django.contrib.auth.models import User\n"
    "django.core.exceptions.ImproperlyConfigured: Requested setting {setting}, but settings are not configured. "
    "You must either define the environment variable DJANGO_SETTINGS_MODULE or call settings.configure() "
    "before accessing settings."
)


def swe_trajectory(instance: str, task: str, steps: list[tuple[str, int, str]]) -> dict:
    """A mini-swe-agent run: the task, then per step a THOUGHT with one bash block and its observation."""
    messages = [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
        {"role": "user", "content": f"<pr_description>\n{task}\n</pr_description>"},
    ]
    for command, code, output in steps:
        messages.append({"role": "assistant", "content": f"THOUGHT: next step.\n\n```bash\n{command}\n```"})
        messages.append({"role": "user", "content": f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>"})
    return {"trajectory_format": "mini-swe-agent-1", "instance_id": instance, "messages": messages}


def swe_script_fixes(
    runs: Path, report: Path, *, first: int, count: int, task: str, test_step: bool, resolved: Any
) -> tuple[str, str]:
    """`count` django and sympy runs (instances `first`, `first` + 1, …), each a script that fails before
    settings are configured and is fixed the project's way (django: a repro script, sympy: a grep), with
    their sb-cli report (`resolved(n)`: whether run n passed); `task` and `test_step` shape each run."""
    passed = []
    for n in range(count):
        for repo, program, tests in (
            ("django__django", "cat <<'EOF' > repro.py", "./tests/runtests.py auth_tests"),
            ("sympy__sympy", "grep -rn Settings sympy", "bin/test sympy/core"),
        ):
            instance = f"{repo}-{first + n}"
            steps = [
                (
                    "cd /testbed && python reproduce.py",
                    1,
                    DJANGO_SETTINGS_ERROR.format(n=n, line=n + 4, setting=f"SETTING_{n}"),
                ),
                (program, 0, "done"),
                ("python reproduce.py", 0, "ok"),
                *([(tests, 0, "OK")] if test_step else []),
            ]
            (runs / instance).mkdir(parents=True)
            trajectory = swe_trajectory(instance, task.format(n=n), steps)
            (runs / instance / f"{instance}.traj.json").write_text(json.dumps(trajectory))
            if resolved(n):
                passed.append(instance)
    report.write_text(json.dumps({"resolved_ids": passed, "unresolved_ids": []}))
    return str(runs), str(report)
