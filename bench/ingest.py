"""Ingest throughput against the raw encoder on the same texts (target: ingest ≥ 80% of encoder rate).

    python bench/ingest.py [--records 10000] [--source sample_logs] [--out bench/results/ingest.json]

Events are drawn from the sample logs, each made unique (so every one is really embedded: the
summary's `embedded` must equal `records`), and
ingested into a fresh temporary store; then the bare sentence-transformers encoder embeds the very
texts that ingest stored, with the same batch size. Both rates and their ratio are printed and saved.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from common import english_logs  # noqa: E402


def make_events(source: Path, n: int) -> list[dict]:
    base = [
        json.loads(line)
        for f in english_logs(source)
        for line in f.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    events = []
    for i in range(n):
        event = json.loads(json.dumps(base[i % len(base)]))
        event["id"] = f"bench-{i}"
        tag = f" [variant {i}]"
        event["content"] = f"{event.get('content') or ''}{tag}".strip()
        # every rendered text must differ, or the embedding cache would flatter ingest
        for section, field in (("tool", "error"), ("tool", "result"), ("goal", "description"), ("feedback", "text")):
            if isinstance(event.get(section), dict) and event[section].get(field) is not None:
                value = event[section][field]
                event[section][field] = (value if isinstance(value, str) else json.dumps(value)) + tag
        if isinstance(event.get("tool"), dict) and isinstance(event["tool"].get("args"), dict):
            event["tool"]["args"]["variant"] = i
        events.append(event)
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--source", type=Path, default=REPO / "sample_logs")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "ingest.json")
    args = parser.parse_args()

    from expengine import Engine
    from expengine.models.embedder import get_embedder

    embedder = get_embedder()
    embedder.encode(["warm up the model once"] * 8)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "bench.jsonl"
        log.write_text(
            "\n".join(json.dumps(e) for e in make_events(args.source, args.records)) + "\n", encoding="utf-8"
        )
        with Engine(store=Path(tmp) / "store", embedder=embedder) as engine:
            started = time.perf_counter()
            result = engine.ingest([str(log)])
            ingest_s = time.perf_counter() - started
            texts = [
                t for (t,) in engine.store.con.execute("SELECT text FROM records ORDER BY ingested_at, id").fetchall()
            ]
        started = time.perf_counter()
        for i in range(0, len(texts), 512):
            embedder.encode(texts[i : i + 512])
        encoder_s = time.perf_counter() - started
    ingest_rate, encoder_rate = result.stored / ingest_s, len(texts) / encoder_s
    report = {
        "records": args.records,
        "stored": result.stored,
        "embedded": result.embedded,
        "ingest_seconds": round(ingest_s, 2),
        "encoder_seconds": round(encoder_s, 2),
        "ingest_records_per_s": round(ingest_rate, 1),
        "encoder_texts_per_s": round(encoder_rate, 1),
        "ratio": round(ingest_rate / encoder_rate, 3),
        "target_ratio": 0.8,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }
    print(
        f"ingest:  {report['ingest_records_per_s']:8.1f} records/s ({report['stored']} in {report['ingest_seconds']} s)"
    )
    print(f"encoder: {report['encoder_texts_per_s']:8.1f} texts/s   ({len(texts)} in {report['encoder_seconds']} s)")
    print(f"ratio:   {report['ratio']:.3f} (target ≥ 0.80)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
