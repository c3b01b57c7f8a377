"""The careless script half of `bench/hostile.py`: the command line against folders that are not stores,
damaged snapshots, a forget that must leave no byte behind, bad config values and options, and a fleet
whose tenants share a token. Each case runs `expengine` in a child process and checks its exit code, that
stderr holds no traceback, and what it must not have changed; the children's peak RSS is reported."""

from __future__ import annotations

import json
import lzma
import os
import resource
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
SECRET = "ZEBRAFISH7731"


def expengine(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "expengine", *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def _session_log(path: Path) -> Path:
    lines = [
        {
            "ts": f"2026-03-01T09:{i:02d}:00Z",
            "kind": "message",
            "role": "user",
            "session": f"s{i % 3}",
            "content": f"Always confirm the seat before booking flight {i} to Lisbon",
        }
        for i in range(30)
    ] + [
        {
            "ts": f"2026-03-01T10:{i:02d}:00Z",
            "kind": "note",
            "session": "privacy-1",
            "content": f"The user's locker code is {SECRET}, seat {i}",
        }
        for i in range(4)
    ]
    rejected = json.dumps({"ts": "not a time", "kind": "note", "session": "privacy-1", "content": SECRET})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + rejected + "\n", encoding="utf-8")
    return path


def files_holding(folder: Path, needle: str, passed_over: frozenset[Path] = frozenset()) -> list[str]:
    """Files whose bytes hold `needle` (either case): an `.xz` unpacked, a snapshot's Parquet chunk read as its
    values (it is compressed). The files in `passed_over` (a snapshot damaged on purpose, which forget leaves
    as it is and names) are not read."""
    import pyarrow.parquet as pq

    found = []
    for path in folder.rglob("*"):
        if not path.is_file() or passed_over & {path, path.parent}:
            continue
        data = path.read_bytes()
        if path.suffix == ".xz":
            data = lzma.decompress(data)
        elif path.suffix == ".parquet":
            data += str(pq.read_table(path).to_pylist()).encode()
        if needle.encode() in data or needle.lower().encode() in data:
            found.append(str(path.relative_to(folder)))
    return found


def _modes(folder: Path) -> dict[str, int]:
    return {str(p): stat.S_IMODE(p.lstat().st_mode) for p in [folder, *folder.rglob("*")]}


def cases(tmp: Path) -> list[tuple[str, Callable[[], tuple[int, int, str]]]]:
    """(name, run) pairs; run returns (expected exit code, got, what else went wrong or "")."""
    store = tmp / "store"
    log = _session_log(tmp / "log.jsonl")
    sets = ["--set", "llm.mode=template", "--set", "cluster.interval_new_memories=1"]

    def code(expected: int, *args: str, check: Callable[[subprocess.CompletedProcess], str] = lambda d: "") -> Any:
        def run() -> tuple[int, int, str]:
            done = expengine(*args)
            trouble = "a traceback" if "Traceback" in done.stderr else check(done)
            return expected, done.returncode, trouble

        return run

    def not_a_store() -> tuple[int, int, str]:
        folder = tmp / "v"
        (folder / "sub").mkdir(parents=True, exist_ok=True)
        (folder / "shared.txt").write_text("hi\n")
        os.chmod(folder / "shared.txt", 0o644)
        before = _modes(folder)
        done = expengine("--store", str(folder), "stats")
        return 2, done.returncode, "modes changed" if _modes(folder) != before else ""

    def missing() -> tuple[int, int, str]:
        done = expengine("--store", str(tmp / "typo"), "stats")
        return 3, done.returncode, "a store was created" if (tmp / "typo").exists() else ""

    def prepared() -> tuple[int, int, str]:
        expengine("--store", str(store), *sets, "ingest", str(log))
        expengine("--store", str(store), "query", f"what is {SECRET}?", "--session", "privacy-1")
        expengine("--store", str(store), "query", f"what is {SECRET}?")
        for _ in range(2):
            done = expengine("--store", str(store), *sets, "compact")
        return 0, done.returncode, ""

    def damaged(which: int, cut: Callable[[bytes], bytes]) -> Callable[[], tuple[int, int, str]]:
        def run() -> tuple[int, int, str]:
            snapshot = _snapshots(store)[which]
            packed = _damageable(snapshot)
            packed.write_bytes(cut(packed.read_bytes()))
            done = expengine("--store", str(store), "restore", snapshot.name)
            left = list(store.rglob(".tmp-*"))
            return 3, done.returncode, f"left {left}" if left else ("a traceback" if "Traceback" in done.stderr else "")

        return run

    def forget_everywhere() -> tuple[int, int, str]:
        done = expengine("--store", str(store), "forget", "--session", "privacy-1", "--yes")
        expengine("--store", str(store), "forget", "--rejects", "--yes")
        damaged_named = "damaged" in done.stderr
        from expengine.store.chunks import snapshot_files

        holding = files_holding(store, SECRET, frozenset(snapshot_files(_snapshots(store)[0])))
        trouble = f"{SECRET} still in {holding}" if holding else "" if damaged_named else "damaged snapshot not named"
        return 0, done.returncode, trouble

    def port_in_use() -> tuple[int, int, str]:
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen(1)
            done = expengine("--store", str(store), "serve", "--http", str(busy.getsockname()[1]))
        return 2, done.returncode, "a traceback" if "Traceback" in done.stderr else ""

    def shared_token() -> tuple[int, int, str]:
        root = tmp / "fleet"
        for name in ("alpha", "beta"):
            expengine("--store", str(root / name), "ingest", str(log))
        (root / "alpha" / "serve.token").write_text("same-token-for-both")
        (root / "beta" / "serve.token").write_text("same-token-for-both")
        done = expengine("serve", "--root", str(root), "--http", "127.0.0.1:0")
        return 2, done.returncode, "" if "rotate one" in done.stderr else "no hint to rotate"

    def fleet_bad_lines() -> tuple[int, int, str]:
        """`fleet ingest` (on Ray) of files whose first line is cut, over-long or 10,000 deep, and of one with
        all three in the middle: every good line is stored in its agent's store."""
        logs = tmp / "fleet-logs"
        logs.mkdir(exist_ok=True)
        good = [
            json.dumps({"ts": "2026-03-01T09:00:00Z", "kind": "message", "agent": "alpha", "content": f"fleet {i}"})
            for i in range(40)
        ]
        cut = '{"ts":"2026-01-01T00:00:00Z","kind":"no'
        long = json.dumps({"ts": "2026-01-01T00:00:00Z", "kind": "message", "agent": "alpha", "content": "x" * 2**21})
        deep = '{"a":' * 10_000 + "1" + "}" * 10_000
        files = [
            [cut, *good[:10]],
            [long, *good[10:20]],
            [deep, *good[20:30]],
            [*good[30:35], cut, long, deep, *good[35:]],
        ]
        for n, lines in enumerate(files):
            (logs / f"bad-{n}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        done = expengine("fleet", "ingest", "--root", str(tmp / "fleet-bad"), str(logs), "--json", timeout=600)
        stored = json.loads(done.stdout)["stored"] if done.returncode == 0 else 0
        return 0, done.returncode, "" if stored == len(good) else f"{stored} of {len(good)} good lines kept"

    def mcp_nosuch() -> tuple[int, int, str]:
        (tmp / "fleet2").mkdir(exist_ok=True)
        done = expengine("mcp", "--root", str(tmp / "fleet2"), "--store-name", "nosuch")
        return 5, done.returncode, "a folder was made" if list((tmp / "fleet2").iterdir()) else ""

    (tmp / "cfg" / "config.toml").mkdir(parents=True)
    return [
        ("--store at a folder that is not a store", not_a_store),
        ('--store ""', code(2, "--store", "", "stats")),
        ("--store /proc/self", code(2, "--store", "/proc/self", "stats")),
        ("stats on a missing path", missing),
        ("config.toml that is a folder", code(2, "--store", str(tmp / "cfg"), "stats")),
        ("--set decay.theta_dormant=nan", code(2, "--store", str(store), "--set", "decay.theta_dormant=nan", "stats")),
        (
            "--set decay.theta_dormant=1e999",
            code(2, "--store", str(store), "--set", "decay.theta_dormant=1e999", "stats"),
        ),
        ("--set query.min_similarity=5", code(2, "--store", str(store), "--set", "query.min_similarity=5", "stats")),
        ("serve --grace -5", code(2, "--store", str(store), "serve", "--grace", "-5")),
        ("serve --max-body-mb -1", code(2, "--store", str(store), "serve", "--max-body-mb", "-1")),
        ("serve --http '[::1]:99999'", code(2, "--store", str(store), "serve", "--http", "[::1]:99999")),
        ("a session to forget, queried and compacted twice", prepared),
        ("feedback X --helpful --harmful", code(2, "--store", str(store), "feedback", "x", "--helpful", "--harmful")),
        ("units --status bogus", code(2, "--store", str(store), "units", "--status", "bogus")),
        ("restore a snapshot cut in half", damaged(0, lambda b: b[: len(b) // 2])),
        ("restore a garbled snapshot", damaged(0, lambda b: b"garbage" * 99)),
        ("forget with a damaged snapshot: no byte left elsewhere", forget_everywhere),
        ("serve on a port in use", port_in_use),
        ("serve --root with two stores sharing a token", shared_token),
        ("mcp --root R --store-name nosuch", mcp_nosuch),
        ("fleet ingest: bad lines first and in the middle, every good line kept", fleet_bad_lines),
    ]


def _snapshots(store: Path) -> list[Path]:
    return sorted(meta.parent for meta in (store / "snapshots").glob("*/snapshot.json"))


def _damageable(snapshot: Path) -> Path:
    """The file to damage: the snapshot's own chunk (no other snapshot lists it), or an older snapshot's `.xz`."""
    from expengine.lifecycle.snapshot import PACKED_DB, own_chunks

    return snapshot / PACKED_DB if (snapshot / PACKED_DB).exists() else own_chunks(snapshot)[0]


def run_cases(tmp: Path) -> dict[str, Any]:
    tmp.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, run in cases(tmp):
        started = time.perf_counter()
        expected, got, trouble = run()
        ok = expected == got and not trouble
        ms = round((time.perf_counter() - started) * 1000, 1)
        rows.append(
            {
                "group": "command line",
                "case": name,
                "expected": expected,
                "status": got,
                "ok": ok,
                "ms": ms,
                "trouble": trouble,
            }
        )
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    return {"cases": rows, "children_peak_rss_mb": peak}


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-hostile-cli-") as tmp:
        result = run_cases(Path(tmp))
    for row in result["cases"]:
        print(
            f"{'ok ' if row['ok'] else 'BAD'} {row['case']}: exit {row['status']} (expected {row['expected']}) "
            f"{row['trouble']} [{row['ms']} ms]"
        )
    print(f"peak RSS of a child: {result['children_peak_rss_mb']} MB")
