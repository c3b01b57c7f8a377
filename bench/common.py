"""Helpers shared by the retrieval benchmarks (`locomo.py`, `tau.py`): paths, the nightly clock,
compaction cycles, store sizes, word tokens and plain-text tables."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
# beside the repository (/work/shared/data for /work/main); EXPENGINE_SHARED_DATA for a worktree elsewhere
SHARED_DATA = Path(os.environ.get("EXPENGINE_SHARED_DATA") or REPO.parent / "shared" / "data")
RESULTS = REPO / "bench" / "results"
# A compaction runs nightly from cron; cycles are this far apart on the clock passed to `compact`,
# so each one is due to re-cluster (cluster.interval_hours is 24 h by default).
CYCLE_SPACING = dt.timedelta(hours=25)
# Refinement words units from templates unless --llm is given: the 135M model adds minutes per
# cycle on two cores and only rewords what the deterministic miner already grounded.
TEMPLATE_ONLY = {"llm.mode": "template"}

_WORD = re.compile(r"\w+")


def words(text: Any) -> list[str]:
    """Lowercase word tokens (letters, digits, underscore), the unit of answer-token recall."""
    return _WORD.findall(str(text).lower())


def english_logs(folder: Path) -> list[Path]:
    """The English native logs of a folder like sample_logs/: the Chinese and mixed ones (zh_*) are measured
    by bench/memorybank.py and tests/test_chinese.py, and would change these benches' English figures."""
    return sorted(p for p in folder.glob("*.jsonl") if not p.name.startswith("zh_"))


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def engine_overrides(args: Any) -> dict[str, str]:
    """Config overrides for every store a benchmark opens: templates unless --llm, then each --set KEY=VALUE."""
    overrides = {"llm.mode": "model"} if args.llm else dict(TEMPLATE_ONLY)
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set needs KEY=VALUE, got {item!r} (e.g. --set query.gamma=0)")
        overrides[key.strip()] = value.strip()
    return overrides


def load_embedder(store: Path | None = None) -> Any:
    """The packaged MiniLM, loaded once and shared by every store a benchmark opens, on the encoder
    `auto` gives a store: for an existing `store` (one a `--workdir` kept) the encoder its vectors were
    written with, else a new store's (int8)."""
    from expengine.models.embedder import LazyEmbedder, get_embedder
    from expengine.store.db import DB_FILE

    if store is not None and (store / DB_FILE).exists():
        from expengine import Engine

        with Engine(store=store) as engine, engine.session():
            followed = engine.embedder
        embedder = followed.model if isinstance(followed, LazyEmbedder) else followed
    else:
        embedder = get_embedder()
    embedder.encode(["warm up the model once"])
    return embedder


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Run with `threads` torch threads (0: leave torch's choice), then put the old number back.

    One thread is the benchmarks' default: on two shared cores, two threads made a one-question
    encode 25x slower (440 ms against 15 ms) and batches slower too, as the threads wait for each other.
    The ONNX encoder (the default) never loads torch and runs one thread per call: then nothing to set."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def newest_record(engine: Any) -> dt.datetime:
    """The newest record's time. Logs without times are stamped at ingest by the wall clock, so a bench
    that dates its cycles and queries from this sees the same ages on every rerun, whatever the hour."""
    return engine.store.con.execute("SELECT max(ts) FROM records").fetchone()[0]


def after_cycles(start: dt.datetime, cycles: int) -> dt.datetime:
    """The clock of the last of `cycles` cycles from `start` (`run_cycles`): what the queries after
    them pass as `now`, so recency is measured on the cycles' clock, not the hour the bench runs."""
    return start + CYCLE_SPACING * cycles


def run_cycles(engine: Any, cycles: int, *, start: dt.datetime, refine: bool = True) -> list[dict[str, Any]]:
    """`cycles` full compactions, one nightly clock tick apart; a short summary of each."""
    summaries = []
    for n in range(cycles):
        report = engine.compact(refine=refine, now=start + CYCLE_SPACING * (n + 1))
        steps = report.steps
        summaries.append(
            {
                "cycle": n + 1,
                "seconds": report.seconds,
                "active": report.after.active,
                "dormant": report.after.dormant,
                "archived": report.after.archived,
                "units": report.after.units,
                "merged": report.after.merged,
                "clustering": report.clustering,
                "step_seconds": {name: step.get("seconds") for name, step in steps.items() if isinstance(step, dict)},
                "refine": {
                    k: steps.get("refine", {}).get(k)
                    for k in (
                        "clusters_refined",
                        "units_written",
                        "llm_calls",
                        "archiving",
                        "routine_asleep",
                        "error",
                        "llm_error",
                    )
                },
            }
        )
    return summaries


def disk_sizes(store: Path, raw: int) -> dict[str, Any]:
    """The store folder on disk (snapshots included, a hard-linked file counted once, as `du` does), its
    parts, and the whole against the raw log bytes (the 8x target)."""
    from expengine.lifecycle.snapshot import disk_bytes

    total = disk_bytes([store])
    return {
        "store_bytes": total,
        "lance_bytes": disk_bytes([store / "lance"]),
        "snapshot_bytes": disk_bytes([store / "snapshots"]) if (store / "snapshots").exists() else 0,
        "duckdb_bytes": (store / "expengine.duckdb").stat().st_size,
        "times_raw": round(total / raw, 1),
    }


def store_size(engine: Any) -> dict[str, Any]:
    """What a query searches (active memories + active units) against every raw record ever stored."""
    stats = engine.stats()
    kept = stats.active + stats.units
    return {
        "raw": stats.raw,
        "active": stats.active,
        "dormant": stats.dormant,
        "archived": stats.archived,
        "units": stats.units,
        "active_plus_units": kept,
        "share_of_raw": round(kept / stats.raw, 4) if stats.raw else None,
        "active_tokens": stats.active_tokens,
        "hot_tokens": stats.hot_tokens,
        "raw_tokens": stats.raw_tokens,
        "hot_share": stats.hot_share,
    }


class Stopwatch:
    """Named wall-clock sections, summed, so a report can say which parts dominate."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._started = time.perf_counter()

    def section(self, name: str) -> "_Section":
        return _Section(self, name)

    def total(self) -> float:
        return time.perf_counter() - self._started

    def to_dict(self) -> dict[str, float]:
        return {
            **{k: round(v, 1) for k, v in sorted(self.seconds.items(), key=lambda kv: -kv[1])},
            "total": round(self.total(), 1),
        }


class _Section:
    def __init__(self, watch: Stopwatch, name: str):
        self.watch, self.name = watch, name

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.watch.seconds[self.name] = self.watch.seconds.get(self.name, 0.0) + time.perf_counter() - self.started


def bm25_answers(engine: Any, queries: list[str], *, budget: int, depth: int) -> list[tuple[str, list[Any]]]:
    """BM25 over every stored record, rendered and cut exactly like a query answer: (prompt, hits shown)."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    from expengine.query.hits import Hit, ScoreParts
    from expengine.query.render import render_prompt

    rows = engine.store.con.execute("SELECT id, text, ts, agent, category FROM records ORDER BY ts, id").fetchall()
    bm25 = BM25Okapi([words(text) or ["_"] for _, text, _, _, _ in rows])
    answers = []
    for query in queries:
        ranked = np.argsort(-bm25.get_scores(words(query)), kind="stable")
        hits = [
            Hit(
                id=rows[i][0],
                type="memory",
                text=rows[i][1],
                score=0.0,
                parts=ScoreParts(0.0, 0.0, 0.0, 0.0),
                source_ids=[rows[i][0]],
                kind="message",
                state="active",
                agent=rows[i][3],
                category=rows[i][4],
                ts=rows[i][2],
            )
            for i in ranked[:depth]
        ]
        answers.append(render_prompt(hits, budget=budget))
    return answers


def table(headers: list[str], rows: Iterable[list[Any]]) -> str:
    """A plain Markdown table (readable in a terminal and pasteable into docs)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "—" if value is None else str(value)


def update_doc_section(path: Path, name: str, body: str) -> None:
    """Replace the text between `<!-- name:start -->` and `<!-- name:end -->` in a Markdown file
    (appended when the markers are missing), so each benchmark keeps its own part of one page current."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{start}\n{body.strip()}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip() + ("\n\n" if text.strip() else "") + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def installed_bytecode(compile_it: bool) -> str:
    """Compile expengine to bytecode as installing it does (`pip install` writes every module's .pyc),
    where this environment never writes any (PYTHONDONTWRITEBYTECODE): each cold process would
    otherwise compile ~70 modules from source. Says which way the timings were taken."""
    if not compile_it:
        return "from source (as this environment runs, PYTHONDONTWRITEBYTECODE set)"
    import compileall

    compileall.compile_dir(str(REPO / "expengine"), quiet=1)
    return "from bytecode (as installed)"


def timed_process(cmd: list[str]) -> dict[str, float]:
    """Wall and CPU seconds of one child process (CPU from the children's rusage delta)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, check=False, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr[-500:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}


def names_word(prompt: str, name: str) -> bool:
    """`name` stands in `prompt` as a whole word."""
    return re.search(rf"\b{re.escape(name)}\b", prompt) is not None


def lift(
    prompts: list[str],
    steps: list[tuple[str, str]],
    tools: set[str],
    *,
    names: Callable[[str, str], bool] = names_word,
) -> dict[str, Any]:
    """Share of steps whose prompt names the tool (or program) used next, the mean share naming each
    other one, and the difference: naming everything earns nothing."""
    named_next = named_other = 0.0
    for prompt, (_, tool) in zip(prompts, steps):
        named = {t for t in tools if names(prompt, t)}
        named_next += tool in named
        named_other += len(named - {tool}) / max(len(tools) - 1, 1)
    n = max(len(steps), 1)
    return {
        "steps": len(steps),
        "names_next": round(named_next / n, 4),
        "names_other": round(named_other / n, 4),
        "lift": round((named_next - named_other) / n, 4),
    }


def publish(report: dict[str, Any], args: Any, *, section: str, text: str, echo: bool) -> dict[str, Any]:
    """Save the report as JSON (`--out`), rewrite its section of `--docs` with `text`, print it unless quiet."""
    write_json(args.out, report)
    if args.docs:
        update_doc_section(args.docs, section, text)
    if echo:
        print(text)
        print(f"results: {args.out}")
    return report


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")


def add_cycle_options(parser: Any, *, name: str, k_default: int, k_help: str) -> None:
    """The options both retrieval benchmarks share: cycles, budget, k, threads, model, overrides, output."""
    parser.add_argument("--cycles", type=int, default=3, help="compaction cycles (default: %(default)s)")
    parser.add_argument(
        "--budget", type=int, default=1000, help="prompt budget in approx_tokens (default: %(default)s)"
    )
    parser.add_argument("--k", type=int, default=k_default, help=k_help)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the embedder (0: torch's default)")
    parser.add_argument("--llm", action="store_true", help="let the local model word units (default: templates only)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config override for every store, e.g. --set query.gamma=0 (repeatable)",
    )
    parser.add_argument(
        "--out", type=Path, default=RESULTS / f"{name}.json", help="JSON results (default: %(default)s)"
    )
    parser.add_argument(
        "--docs",
        type=Path,
        default=None,
        metavar="MD",
        help=f"also write the tables into this Markdown file's {name} section (e.g. docs/benchmarks.md)",
    )


def finish_args(parser: Any, argv: list[str] | None, *, script: str) -> Any:
    args = parser.parse_args(argv)
    args.command = " ".join([f"python bench/{script}", *(sys.argv[1:] if argv is None else argv)])
    return args


@contextlib.contextmanager
def served(
    store: Path,
    overrides: dict[str, str],
    *,
    timeout: float = 600,
    serve_args: Iterable[str] = (),
    log: Path | None = None,
) -> Iterator[tuple[Any, Any]]:
    """`expengine serve --http [serve_args]` on `store` for the block: (Unix-socket client, HTTP client with
    the token). The server's JSON log goes to `log` (default: nowhere)."""
    import signal
    import subprocess

    from expengine.service.client import SOCKET_FILE, TOKEN_FILE, Client, find_server

    sets = [x for key, value in overrides.items() for x in ("--set", f"{key}={value}")]
    port = 8700 + os.getpid() % 200
    sink = open(log, "w") if log else None  # noqa: SIM115  (closed in `finally`, after the server)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "expengine",
            "--store",
            str(store),
            *sets,
            "serve",
            "--http",
            f"127.0.0.1:{port}",
            *serve_args,
        ],
        cwd=REPO,
        stderr=sink or subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        deadline = time.monotonic() + timeout
        while find_server(store) is None:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the server did not start")
            time.sleep(0.1)
        yield (
            Client(socket_path=store / SOCKET_FILE),
            Client(url=f"http://127.0.0.1:{port}", token=(store / TOKEN_FILE).read_text().strip()),
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
        if sink:
            sink.close()


CHATTER = re.compile(
    r"(?i)###STOP###|\b(thank you|thanks|you're welcome|goodbye|bye|have a (great|nice) day|take care|talk soon|"
    r"good to see you|hey|hello|hi)\b|could you (please )?provide your user id"
)


def audit_units(units: list[dict[str, Any]], n: int = 20, seed: int = 7) -> dict[str, Any]:
    """n random active units (seeded) and the share of them that is chatter (by a pattern; print and read)."""
    import random

    picked = random.Random(seed).sample(units, min(n, len(units)))
    chatter = [u for u in picked if CHATTER.search(u["text"] or "")]
    return {
        "active_units": len(units),
        "sampled": len(picked),
        "chatter": len(chatter),
        "chatter_share": round(len(chatter) / len(picked), 4) if picked else None,
        "sample": [{"id": u["id"], "category": u["category"], "text": (u["text"] or "")[:240]} for u in picked],
    }


def render_audit(audit: dict[str, Any], store: str) -> str:
    """The audit's verdict and its sample, one unit a line, for reading."""
    lines = [
        f"Unit audit ({store}): {audit['chatter']} of {audit['sampled']} random active units are chatter "
        f"({audit['active_units']} active units)."
    ]
    lines += [f"- [{u['category']}] {' '.join(u['text'].split())[:200]}" for u in audit["sample"]]
    return "\n".join(lines)
