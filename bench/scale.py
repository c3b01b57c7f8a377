"""The LanceDB side of one store at scale: a memories table of N synthetic rows, built, indexed,
grown by a night's rows and searched, with seconds and peak memory per step.

    python bench/scale.py [--sizes 100000 1000000] [--night 20000] [--queries 200]
                          [--workdir DIR] [--out bench/results/scale.json]

Rows are written straight through `store.index.Index` in batches of `BATCH` (no encoder: vectors are
unit vectors drawn around 2,000 topic centres, texts are topic and filler words), so a million rows
take minutes and the bench never holds the table in memory. Steps, each timed with its own peak RSS
(sampled every 20 ms): `load` (append in batches), `train` (the first IVF-PQ, as `refresh_indexes` trains
it: `store.index.TRAIN_SAMPLE_RATE` and `TRAIN_ITERATIONS`), `text index`, `night` (append `--night` rows),
`update` (`Index.update_indexes`: the night's rows into the trained index and the text and scalar
indexes), `compact files`, and warm searches: p50/p95 of `Index.nearest` (IVF-PQ, nprobes and refine as
a query asks) and of `Index.text_search`, with the vector hits' recall@10 against an exact search
(batches of the table read again, so exact search too stays in bounded memory). `--train-default`
adds a training with lancedb's defaults (sample 256 a partition, 50 rounds) for the comparison.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, machine, table, write_json  # noqa: E402

DIM = 384
TOPICS = 2000
BATCH = 50_000
FILLER = ["refund", "window", "flight", "seat", "weather", "retry", "hotel", "allergy", "deploy", "cache"]
LIVE = "state IN ('active', 'dormant')"


class PeakRss:
    """The process's resident memory, sampled every 20 ms: the peak since the last `step`."""

    def __init__(self) -> None:
        self.peak = 0
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._done = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self._page

    def _sample(self) -> None:
        while not self._done.wait(0.02):
            self.peak = max(self.peak, self.rss())

    @contextmanager
    def step(self, steps: dict[str, Any], name: str) -> Iterator[None]:
        self.peak = self.rss()
        started = time.perf_counter()
        yield
        steps[name] = {"s": round(time.perf_counter() - started, 2), "peak_rss_mb": round(self.peak / 2**20)}
        print(f"  {name}: {steps[name]}", flush=True)


def centres() -> np.ndarray:
    rng = np.random.default_rng(0)
    c = rng.normal(size=(TOPICS, DIM)).astype(np.float32)
    return c / np.linalg.norm(c, axis=1, keepdims=True)


def batch(start: int, n: int, prefix: str, topic_centres: np.ndarray) -> tuple[Any, np.ndarray]:
    """Rows `start` .. `start + n` of a synthetic table, the same every time for the same arguments."""
    from expengine.store.lance_rows import memory_rows

    rng = np.random.default_rng([start, sum(map(ord, prefix))])
    topics = rng.integers(0, TOPICS, size=n)
    vectors = topic_centres[topics] + rng.normal(scale=0.6 / DIM**0.5, size=(n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    when = dt.datetime(2026, 1, 1)
    records = [
        {
            "id": f"{prefix}{start + i:08d}",
            "agent": "bench",
            "kind": "message",
            "category": "general",
            "ts": when + dt.timedelta(seconds=start + i),
            "state": "dormant" if (start + i) % 3 == 0 else "active",
            "text": f"topic{t} {FILLER[t % 10]} {FILLER[(start + i) % 10]} note {start + i}",
        }
        for i, t in enumerate(topics)
    ]
    return memory_rows(records, vectors, DIM), vectors


def exact_top(index: Any, queries: np.ndarray, k: int) -> list[list[str]]:
    """The exact top `k` live rows by cosine for each query, reading the table in batches."""
    dataset = index.dataset("memories")
    best_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_ids = np.empty((len(queries), k), dtype=object)
    for part in dataset.to_batches(columns=["id", "vector"], filter=LIVE, batch_size=BATCH):
        flat = part.column("vector").flatten().to_numpy(zero_copy_only=False).reshape(part.num_rows, DIM)
        scores = queries @ flat.T
        ids = np.asarray(part.column("id").to_pylist(), dtype=object)
        merged_scores = np.concatenate([best_scores, scores], axis=1)
        merged_ids = np.concatenate([best_ids, np.broadcast_to(ids, scores.shape)], axis=1)
        order = np.argsort(-merged_scores, axis=1)[:, :k]
        best_scores = np.take_along_axis(merged_scores, order, axis=1)
        best_ids = np.take_along_axis(merged_ids, order, axis=1)
    return [list(row) for row in best_ids]


def run_size(size: int, night: int, queries: int, workdir: Path, train_default: bool) -> dict[str, Any]:
    from expengine.store import index as index_module
    from expengine.store.index import MEMORIES, Index, partitions

    topic_centres = centres()
    rss = PeakRss()
    index = Index(workdir / f"lance-{size}")
    steps: dict[str, Any] = {}
    print(f"{size:,} rows", flush=True)
    with rss.step(steps, "load"):
        for start in range(0, size, BATCH):
            rows, _ = batch(start, min(BATCH, size - start), "m", topic_centres)
            index.add(MEMORIES, rows, replace=False)
    if train_default:
        saved = index_module.TRAIN_SAMPLE_RATE, index_module.TRAIN_ITERATIONS
        index_module.TRAIN_SAMPLE_RATE, index_module.TRAIN_ITERATIONS = 256, 50
        with rss.step(steps, "train (lancedb defaults)"):
            index.ensure_vector_index(MEMORIES, min_rows=1, trained=None, growth=2.0)
        index_module.TRAIN_SAMPLE_RATE, index_module.TRAIN_ITERATIONS = saved
        steps["recall@10 (lancedb defaults)"] = recall(index, topic_centres, queries, size)
        index.table(MEMORIES).drop_index(next(i.name for i in index.table(MEMORIES).list_indices()))
        index._vector_indexed.clear()
    with rss.step(steps, "train"):
        index.ensure_vector_index(MEMORIES, min_rows=1, trained=None, growth=2.0)
    with rss.step(steps, "scalar + text index"):
        index.refresh_scalar_indexes(MEMORIES)
        index.refresh_text_index(MEMORIES)
    with rss.step(steps, "night append"):
        for start in range(0, night, BATCH):
            rows, _ = batch(start, min(BATCH, night - start), "n", topic_centres)
            index.add(MEMORIES, rows, replace=False)
    with rss.step(steps, "update indexes"):
        index.update_indexes(MEMORIES)
    with rss.step(steps, "compact files"):
        index.compact_files(MEMORIES)
    steps["recall@10"] = recall(index, topic_centres, queries, size)
    with rss.step(steps, "searches"):
        rng = np.random.default_rng(5)
        probe = batch(0, queries, "q", topic_centres)[1]
        vector_ms, text_ms = [], []
        index.nearest(MEMORIES, probe[0], LIVE, 10)  # warm: the index is read once
        index.text_search(MEMORIES, "topic7 refund", LIVE, 10)
        for i, v in enumerate(probe):
            started = time.perf_counter()
            index.nearest(MEMORIES, v, LIVE, 10)
            vector_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            index.text_search(MEMORIES, f"topic{rng.integers(TOPICS)} {FILLER[i % 10]}", LIVE, 10)
            text_ms.append((time.perf_counter() - started) * 1000)
    return {
        "rows": index.count(MEMORIES),
        "partitions": partitions(size),
        "steps": steps,
        "vector_search_ms": percentiles(vector_ms),
        "text_search_ms": percentiles(text_ms),
    }


def recall(index: Any, topic_centres: np.ndarray, queries: int, seed: int) -> float:
    from expengine.store.index import MEMORIES

    probe = batch(seed, min(queries, 100), "q", topic_centres)[1]
    exact = exact_top(index, probe, 10)
    found = [set(index.nearest(MEMORIES, v, LIVE, 10).column("id").to_pylist()) for v in probe]
    return round(statistics.mean(len(f & set(e)) / 10 for f, e in zip(found, exact)), 3)


def percentiles(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {"p50": round(ms[len(ms) // 2], 1), "p95": round(ms[int(len(ms) * 0.95)], 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--night", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--train-default", action="store_true")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--out", type=Path, default=RESULTS / "scale.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        runs = [run_size(n, args.night, args.queries, workdir, args.train_default) for n in args.sizes]
    report = {"machine": machine(), "load": os.getloadavg(), "argv": sys.argv[1:], "runs": runs}
    write_json(args.out, report)
    names = list(runs[0]["steps"])
    headers = ["rows", *names, "vector search p50/p95 ms", "text search p50/p95 ms"]
    print(
        table(
            headers,
            [
                [
                    f"{r['rows']:,}",
                    *[_step(r["steps"].get(n)) for n in names],
                    f"{r['vector_search_ms']['p50']} / {r['vector_search_ms']['p95']}",
                    f"{r['text_search_ms']['p50']} / {r['text_search_ms']['p95']}",
                ]
                for r in runs
            ],
        )
    )


def _step(value: Any) -> str:
    if isinstance(value, dict):
        return f"{value['s']} s, {value['peak_rss_mb']} MB"
    return str(value)


if __name__ == "__main__":
    main()
