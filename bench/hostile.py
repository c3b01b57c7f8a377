"""A hostile client against `expengine serve`, on this machine only (the Unix socket and 127.0.0.1).

    python bench/hostile.py [--tasks 10] [--threads 20] [--socket PATH] [--out bench/results/hostile.json]

Without --socket it ingests the tau-bench airline runs of the first --tasks task ids into a fresh
store and starts `expengine serve --http 127.0.0.1:PORT --ingest-root ROOT` on it (templates, not the
LLM). With --socket it attacks the server listening there instead (no TCP cases; every path case
must then be refused by that server's own --ingest-root rules). Then, one request at a time:
- oversize texts: query text over `query.max_text_chars`, 1 MB and 50 MB query bodies, a 20 MB
  ingest body, a 15 MB ingest of one JSON line (accepted: the line is quarantined, nothing grows), and of one
  line of no format (400, "no log format");
- deep JSON: 10,000 and 1,000,000 levels;
- paths: /etc/shadow, /root, "", relative, `..` traversal, /dev/zero, /proc/self/mem, a FIFO and a
  symlink out of the root (and a good file under the root, accepted);
- wrong types and unknown fields, and the token cases over TCP;
- bad lines (cut, over-long, 10,000 levels deep) first or in the middle of 20 good ones, through HTTP
  (text and path), the command line and MCP: every good line must be kept;
and then --threads threads query in a loop while a compaction (refinement on) runs in the server, and
its snapshot, cut or garbled, is restored through the server (which must go on answering). Then the
command-line cases of bench/hostile_cli.py (skip them with --no-cli).

Counts as a failure: any 5xx, a connection dropped without an answer, or a status other than the
expected one. Reports the failures, the server's peak memory (VmHWM in /proc/PID/status, the pid
from /health) and its RSS at start, and query p50/p95 idle and during the compaction.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, SHARED_DATA, load_embedder, machine, served, table, write_json
from hostile_cli import run_cases
from tau import select_runs

DEFAULT_DATA = SHARED_DATA / "tau_bench_airline" / "gpt-4o-airline_tasks00-39.json"
QUERY = "the customer wants to cancel a flight and get a refund"
GOOD = {"ts": "2026-03-02T10:00:00Z", "kind": "message", "role": "user", "content": "Email the itinerary."}
TIMEOUT_S = 300.0
LINE_LIMIT = 1_000_000  # ingest.max_line_bytes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--tasks", type=int, default=10, help="runs of the first N task ids in the fresh store")
    parser.add_argument("--threads", type=int, default=20, help="query threads during the compaction")
    parser.add_argument("--socket", type=Path, default=None, help="attack the server listening on this socket")
    parser.add_argument("--out", type=Path, default=RESULTS / "hostile.json")
    parser.add_argument("--server-log", type=Path, default=None, help="the started server's JSON log")
    parser.add_argument("--no-cli", action="store_true", help="skip the command-line cases (hostile_cli.py)")
    return parser.parse_args(argv)


class Target:
    """Where requests go: the Unix socket (any path length) or 127.0.0.1:port with a token."""

    def __init__(self, *, socket_path: Path | None = None, port: int | None = None, token: str | None = None):
        self.socket_path, self.port, self.token = socket_path, port, token

    @contextlib.contextmanager
    def connect(self) -> Iterator[socket.socket]:
        from expengine.service.client import unix_address

        if self.socket_path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with unix_address(self.socket_path) as address:
                sock.settimeout(TIMEOUT_S)
                sock.connect(address)
        else:
            sock = socket.create_connection(("127.0.0.1", self.port or 0), timeout=TIMEOUT_S)
        try:
            yield sock
        finally:
            sock.close()

    def send(
        self, method: str, path: str, body: bytes = b"", auth: str | None = None, host: str = "localhost"
    ) -> tuple[int | str, bytes]:
        """(HTTP status, or "dropped" when the connection closed without one; the body). The body is sent
        in chunks, and a server that answers early (413) and closes is still heard. (No half-close after
        the body: uvicorn takes it for a client gone and drops the request.)"""
        auth = auth if auth is not None else (f"Bearer {self.token}" if self.token else "")
        head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {len(body)}\r\nConnection: close\r\n"
        head += f"Authorization: {auth}\r\n\r\n" if auth else "\r\n"
        with self.connect() as sock:
            try:
                sock.sendall(head.encode())
                for start in range(0, len(body), 2**16):
                    sock.sendall(body[start : start + 2**16])
            except (BrokenPipeError, ConnectionResetError):
                pass
            answer = bytearray()
            with contextlib.suppress(ConnectionResetError):
                while chunk := sock.recv(2**16):
                    answer += chunk
        status_line, _, rest = bytes(answer).partition(b"\r\n")
        parts = status_line.split()
        if len(parts) < 2 or not parts[1].isdigit():
            return "dropped", bytes(answer)
        return int(parts[1]), rest.partition(b"\r\n\r\n")[2]

    def call(self, op: str, args: Any) -> tuple[int | str, bytes]:
        return self.send("POST", f"/v1/{op}", json.dumps(args).encode())

    def health(self) -> dict[str, Any]:
        status, body = self.send("GET", "/health")
        assert status == 200, (status, body)
        return json.loads(body)


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of a process, in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {key: int(fields[key].split()[0]) // 1024 for key in ("VmRSS", "VmHWM")}


def cases(root: Path | None, scratch: Path) -> list[tuple[str, str, str, bytes, int]]:
    """(group, name, operation, raw body, expected status)."""

    def js(value: Any) -> bytes:
        return json.dumps(value).encode()

    long_line = json.dumps({**GOOD, "content": "x" * (15 * 2**20)})
    fifo, link, outside = scratch / "pipe.jsonl", scratch / "link.jsonl", scratch / "outside.jsonl"
    outside.write_text(json.dumps(GOOD) + "\n")
    base = root or scratch
    if root is not None:
        fifo, link = root / "pipe.jsonl", root / "link.jsonl"
        (root / "good.jsonl").write_text(json.dumps(GOOD) + "\n")
    os.mkfifo(fifo)
    link.symlink_to(outside)
    deep = 10_000
    out: list[tuple[str, str, str, bytes, int]] = [
        ("oversize", "query text of 8,193 characters", "query", js({"text": "w" * 8193}), 413),
        ("oversize", "query text of 1 MB", "query", js({"text": "w" * 2**20}), 413),
        ("oversize", "query body of 50 MB", "query", js({"text": "w" * (50 * 2**20)}), 413),
        ("oversize", "ingest body of 20 MB", "ingest", js({"text": "x" * (20 * 2**20)}), 413),
        ("oversize", "ingest of one 15 MB JSON line (quarantined)", "ingest", js({"text": long_line}), 200),
        ("oversize", "ingest of one 15 MB line of no format", "ingest", js({"text": "x" * (15 * 2**20)}), 400),
        ("oversize", "feedback note of 5,000 characters", "feedback", js({"id": "x", "note": "n" * 5000}), 400),
        ("deep JSON", "10,000 levels", "query", b'{"text": ' + b"[" * deep + b"]" * deep + b"}", 400),
        ("deep JSON", "1,000,000 levels", "ingest", b'{"records": ' + b"[" * 10**6 + b"]" * 10**6 + b"}", 400),
        ("deep JSON", "a record 100 levels deep", "ingest", js({"records": [{**GOOD, "meta": _nested(100)}]}), 400),
    ]
    for path in [
        "/etc/shadow",
        "/root",
        "",
        "relative/log.jsonl",
        f"{base}/../../../etc/passwd",
        "/dev/zero",
        "/proc/self/mem",
        str(fifo),
        str(link),
        str(outside),
    ]:
        out.append(("paths", f"paths [{path!r}]", "ingest", js({"paths": [path]}), 400))
    if root is not None:
        good = js({"paths": [str(root / "good.jsonl")]})  # the root itself holds the symlink out: refused
        out.append(("paths", "a good file under the root (accepted)", "ingest", good, 200))
    for name, op, body in [
        ("text 5", "query", {"text": 5}),
        ("k 'abc'", "query", {"text": QUERY, "k": "abc"}),
        ("k -1", "query", {"text": QUERY, "k": -1}),
        ("k 10**12", "query", {"text": QUERY, "k": 10**12}),
        ("touch 'yes'", "query", {"text": QUERY, "touch": "yes"}),
        ("budget 10**9", "query", {"text": QUERY, "budget": 10**9}),
        ("an unknown field sql", "query", {"text": QUERY, "sql": "DROP TABLE records"}),
        ("a list body", "query", ["text"]),
        ("a string body", "query", "text"),
        ("helpful 'yes'", "feedback", {"id": "x", "helpful": "yes"}),
        ("records a string", "ingest", {"records": "everything"}),
        ("paths a string", "ingest", {"paths": "/etc"}),
        ("rejects limit 10**9", "rejects", {"limit": 10**9}),
        ("forget with no filter", "forget", {}),
        ("restore 'nope'", "restore", {"snapshot_id": "nope"}),
        ("restore a 70,000-character id", "restore", {"snapshot_id": "s" * 70_000}),
        ("restore '../../etc'", "restore", {"snapshot_id": "../../etc"}),
        ("units status 'bogus'", "units", {"status": "bogus"}),
        ("reindex a bad model", "reindex", {"model": "nope"}),
        ("forget dry run", "forget", {"agents": ["nobody"], "dry_run": True}),
    ]:
        expected = {"restore 'nope'": 404, "forget dry run": 200}.get(name, 400)
        out.append(("wrong types", name, op, js(body), expected))
    out.append(("wrong types", "a query after the failed exclusive ops", "query", js({"text": QUERY}), 200))
    return out


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


def probe(target: Target, tcp: Target | None, root: Path | None, scratch: Path) -> list[dict[str, Any]]:
    rows = []
    for group, name, op, body, expected in cases(root, scratch):
        started = time.perf_counter()
        status, _ = target.send("POST", f"/v1/{op}", body)
        rows.append(_row(group, name, status, expected, started))
    if tcp is not None:
        for name, auth, expected in [
            ("no token", "", 401),
            ("a wrong token", "Bearer nope", 401),
            ("lower-case bearer", f"bearer {tcp.token}", 200),
        ]:
            started = time.perf_counter()
            status, _ = tcp.send("GET", "/health", auth=auth)
            rows.append(_row("tokens", name, status, expected, started))
        for host, expected in [("rebind.attacker.example:80", 421), ("localhost", 200), ("127.0.0.1:1", 200)]:
            started = time.perf_counter()
            status, _ = tcp.send("GET", "/health", host=host)
            rows.append(_row("tokens", f"Host {host}", status, expected, started))
    return rows


def _row(group: str, name: str, status: int | str, expected: int, started: float) -> dict[str, Any]:
    return {
        "group": group,
        "case": name,
        "status": status,
        "expected": expected,
        "ok": status == expected,
        "ms": round((time.perf_counter() - started) * 1000, 1),
    }


def pct(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else None


def timed_query(target: Target) -> tuple[int | str, float]:
    started = time.perf_counter()
    status, _ = target.call("query", {"text": QUERY, "touch": False})
    return status, (time.perf_counter() - started) * 1000


def under_load(target: Target, threads: int) -> dict[str, Any]:
    """`threads` threads query in a loop for as long as a compaction runs in the server."""
    outcome: dict[str, Any] = {}
    lat: list[float] = []
    bad: list[int | str] = []
    lock = threading.Lock()

    def compact() -> None:
        started = time.perf_counter()
        outcome["status"], body = target.call("compact", {"refine": True})
        outcome["seconds"] = round(time.perf_counter() - started, 1)
        outcome["report"] = json.loads(body) if outcome["status"] == 200 else body.decode(errors="replace")[:200]

    worker = threading.Thread(target=compact)
    worker.start()

    def query_loop() -> None:
        while worker.is_alive():
            status, ms = timed_query(target)
            with lock:
                (lat.append(ms) if status == 200 else bad.append(status))

    loops = [threading.Thread(target=query_loop) for _ in range(threads)]
    for t in loops:
        t.start()
    for t in loops:
        t.join()
    worker.join()
    report = outcome.get("report")
    return {
        "threads": threads,
        "compaction_status": outcome.get("status"),
        "compaction": report.get("status") if isinstance(report, dict) else report,
        "compaction_s": outcome.get("seconds"),
        "queries": len(lat),
        "failed": len(bad),
        "failed_statuses": sorted({str(s) for s in bad}),
        "p50_ms": pct(lat, 0.5),
        "p95_ms": pct(lat, 0.95),
    }


def bad_line_files(door: str) -> dict[str, tuple[str, int]]:
    """case -> (file content, good lines in it): bad lines first or in the middle, each line unique to its
    door and case so that every good line kept is one more stored."""

    def good(case: str, n: int) -> list[str]:
        return [json.dumps({**GOOD, "content": f"{door} {case}: email the itinerary, copy {i}."}) for i in range(n)]

    cut = '{"ts":"2026-01-01T00:00:00Z","kind":"no'
    long = json.dumps({**GOOD, "content": "x" * (LINE_LIMIT + 1)})
    deep = '{"a":' * 10_000 + "1" + "}" * 10_000
    files = {
        "cut first line": [cut, *good("cut", 20)],
        "over-long first line": [long, *good("long", 20)],
        "10,000-deep JSON first line": [deep, *good("deep", 20)],
    }
    middle = good("middle", 20)
    files["bad lines in the middle"] = [*middle[:5], cut, *middle[5:10], long, *middle[10:15], deep, *middle[15:]]
    bad = (cut, long, deep)
    return {case: ("\n".join(lines) + "\n", sum(x not in bad for x in lines)) for case, lines in files.items()}


def bad_lines(target: Target, store: Path, root: Path) -> list[dict[str, Any]]:
    """Each bad-line file through every door: HTTP (the file's text, and its path under --ingest-root), the
    command line and MCP (both handed to the running server). A row's status is the good lines kept."""
    import asyncio
    import subprocess

    rows = []
    for door in ("http text", "http path", "cli", "mcp"):
        for case, (content, expected) in bad_line_files(door).items():
            path = root / f"{door.replace(' ', '-')}-{len(rows)}.jsonl"
            path.write_text(content, encoding="utf-8")
            started = time.perf_counter()
            if door == "http text":
                status, body = target.call("ingest", {"text": content})
            elif door == "http path":
                status, body = target.call("ingest", {"paths": [str(path)]})
            elif door == "cli":
                done = subprocess.run(
                    [sys.executable, "-m", "expengine", "--store", str(store), "ingest", str(path), "--json"],
                    capture_output=True,
                    timeout=TIMEOUT_S,
                )
                status, body = (200 if done.returncode == 0 else done.returncode), done.stdout + done.stderr
            else:
                status, body = asyncio.run(_mcp_ingest(store, path))
            kept = json.loads(body)["stored"] if status == 200 else f"status {status}"
            rows.append(_row("bad lines", f"{door}: {case} (good lines kept)", kept, expected, started))
    return rows


async def _mcp_ingest(store: Path, path: Path) -> tuple[int, bytes]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "expengine", "--store", str(store), "mcp"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        answer = await session.call_tool("memory_ingest", {"path": str(path)})
    return (500 if answer.is_error else 200), json.dumps(answer.structured_content).encode()


def damaged_restore(target: Target, store: Path) -> list[dict[str, Any]]:
    """The compaction's snapshot cut in half, then garbled, and restored through the server: each is a 422
    naming the snapshot (exit code 3), and queries, stats and ingests still answer."""
    from expengine.lifecycle.snapshot import own_chunks

    rows = []
    for damage, cut in [("cut in half", lambda b: b[: len(b) // 2]), ("garbled", lambda b: b"garbage" * 99)]:
        newest = sorted((store / "snapshots").glob("*/snapshot.json"))[-1].parent
        packed = own_chunks(newest)[0]
        packed.write_bytes(cut(packed.read_bytes()))
        started = time.perf_counter()
        status, body = target.call("restore", {"snapshot_id": newest.name})
        error = json.loads(body)["error"] if status == 422 else {}
        named = error.get("exit_code") == 3 and newest.name in error.get("message", "")
        rows.append(_row("damaged snapshot", f"restore one {damage}", status if named else "unnamed", 422, started))
        for op, args in [("query", {"text": QUERY, "touch": False}), ("stats", {}), ("ingest", {"records": [GOOD]})]:
            started = time.perf_counter()
            status, _ = target.call(op, args)
            rows.append(_row("damaged snapshot", f"{op} after it", status, 200, started))
    leftovers = list(store.rglob(".tmp-*"))
    rows.append(_row("damaged snapshot", "temporary files left", len(leftovers), 0, time.perf_counter()))
    return rows


def attack(
    target: Target, tcp: Target | None, root: Path | None, threads: int, scratch: Path, store: Path | None = None
) -> dict[str, Any]:
    pid = int(target.health()["pid"])
    report: dict[str, Any] = {"server_pid": pid, "memory_at_start_mb": memory(pid)}
    idle = [timed_query(target) for _ in range(20)]
    assert all(status == 200 for status, _ in idle), idle
    report["idle_p95_ms"] = pct([ms for _, ms in idle], 0.95)
    report["cases"] = probe(target, tcp, root, scratch)
    report["memory_after_cases_mb"] = memory(pid)
    report["during_compaction"] = under_load(target, threads)
    if store is not None:
        report["cases"] += damaged_restore(target, store)
    if store is not None and root is not None:
        report["cases"] += bad_lines(target, store, root)
        kept = [c for c in report["cases"] if c["group"] == "bad lines"]
        report["good_lines_kept"] = {
            "kept": sum(c["status"] for c in kept if isinstance(c["status"], int)),
            "of": sum(c["expected"] for c in kept),
        }
    report["memory_end_mb"] = memory(pid)
    report["unexpected"] = [c for c in report["cases"] if not c["ok"]]
    report["unexpected_5xx"] = sum(
        1 for c in report["cases"] if not isinstance(c["status"], int) or (c["status"] >= 500 and not c["ok"])
    ) + sum(1 for s in report["during_compaction"]["failed_statuses"] if not s.isdigit() or int(s) >= 500)
    report["peak_rss_mb"] = report["memory_end_mb"]["VmHWM"]
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    report: dict[str, Any] = {"benchmark": "hostile", "machine": machine(), "threads": args.threads}
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        if args.socket is not None:
            report["target"] = str(args.socket)
            report.update(attack(Target(socket_path=args.socket), None, None, args.threads, scratch))
        else:
            from expengine import Engine

            runs = select_runs(json.loads(args.data.read_text(encoding="utf-8")), tasks=args.tasks, trials=None)
            store, root, log = Path(tmp) / "store", Path(tmp) / "root", Path(tmp) / "runs.json"
            root.mkdir()
            log.write_text(json.dumps(runs), encoding="utf-8")
            with Engine(store=store, embedder=load_embedder()) as engine:
                report["stored"] = engine.ingest([str(log)], fmt="openai-chat").stored
            report.update(runs=len(runs), tasks=args.tasks, target="a fresh tau-bench store")
            overrides = {"llm.mode": "template"}
            serve_args = ["--ingest-root", str(root)]
            with served(store, overrides, serve_args=serve_args, log=args.server_log) as (unix, http):
                tcp = Target(port=int(http.url.rpartition(":")[2]), token=http.token)
                unix_target = Target(socket_path=Path(unix.socket_path))
                report.update(attack(unix_target, tcp, root, args.threads, scratch, store))
        if not args.no_cli:  # the careless script: the command line (bench/hostile_cli.py)
            script = run_cases(Path(tmp) / "cli")
            report["cases"] = report.get("cases", []) + script["cases"]
            report["unexpected"] = [c for c in report["cases"] if not c["ok"]]
            report["tracebacks"] = sum(1 for c in script["cases"] if c["trouble"] == "a traceback")
            report["cli_children_peak_rss_mb"] = script["children_peak_rss_mb"]
    write_json(args.out, report)
    print(render(report))
    print(f"results: {args.out}")
    return report


def render(r: dict[str, Any]) -> str:
    rows = [[c["group"], c["case"], c["expected"], c["status"], c["ms"]] for c in r["cases"]]
    d = r["during_compaction"]
    summary = [
        ["unexpected answers (of the cases)", f"{len(r['unexpected'])} of {len(r['cases'])}"],
        ["unexpected 5xx or dropped (cases and load)", r["unexpected_5xx"]],
        ["tracebacks on the command line", r.get("tracebacks", "not run")],
        [
            "good lines kept around bad ones (4 doors)",
            "{kept} of {of}".format(**r.get("good_lines_kept", {"kept": "-", "of": "-"})),
        ],
        ["command-line peak RSS (a child)", f"{r.get('cli_children_peak_rss_mb', '-')} MB"],
        ["server peak RSS (VmHWM)", f"{r['peak_rss_mb']} MB (RSS at start {r['memory_at_start_mb']['VmRSS']} MB)"],
        ["query p95 idle", f"{r['idle_p95_ms']} ms"],
        [
            f"{d['threads']} query threads during a compaction",
            f"p50 {d['p50_ms']} ms, p95 {d['p95_ms']} ms; {d['queries']} answered, {d['failed']} failed "
            f"{d['failed_statuses'] or ''}; compaction {d['compaction']} in {d['compaction_s']} s",
        ],
    ]
    return (
        f"hostile client on {r['target']} ({r['machine']})\n"
        + table(["group", "case", "expected", "got", "ms"], rows)
        + "\n\n"
        + table(["what", "measured"], summary)
    )


if __name__ == "__main__":
    main()
