"""Mixed-language stores: the README's demo store (all of sample_logs/, English and
Chinese in one store) under each packaged embedder, asked 10 Chinese questions about the Chinese
sample logs and 10 English ones about the English logs (bench/mixed_questions.json: each with the
answer lines' words); and English LoCoMo recall before compaction under each embedder.

    python bench/mixed.py questions        # the demo store, minilm / multilingual / mixed
    python bench/mixed.py questions --cycles 1 --models minilm mixed   # compacted, as the README's demo is
    python bench/mixed.py locomo --conversations 2
    python bench/mixed.py locomo --conversations 2 --with-chinese   # each LoCoMo store holds them too

A question is answered when a hit of the top 3 contains one of its answer strings (case-insensitive).
Each store is asked twice: with `query.min_similarity = 0` (the ranking alone, which is what the
embedder decides) and with the configured floor (per encoder: MiniLM 0.455, the multilingual model
0.22; below it a query answers "nothing relevant")."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, TEMPLATE_ONLY, machine, write_json

from expengine.engine import Engine

QUESTIONS = REPO / "bench" / "mixed_questions.json"
MODELS = ("minilm", "multilingual", "mixed")
TOP = 3


def answered(hits: list[Any], answers: list[str]) -> bool:
    texts = [h.text.lower() for h in hits[:TOP]]
    return any(a.lower() in t for a in answers for t in texts)


def ask(store: Path, model: str, questions: list[dict[str, Any]], floor: float | None) -> dict[str, Any]:
    overrides: dict[str, Any] = {**TEMPLATE_ONLY, "embedder.model": model}
    if floor is not None:
        overrides["query.min_similarity"] = floor
    rows = []
    with Engine(store=store, overrides=overrides) as engine:
        for q in questions:
            result = engine.query(q["question"], k=TOP, touch=False)
            rows.append(
                {
                    "question": q["question"],
                    "answered": answered(result.hits, q["answers"]),
                    "relevant": result.relevant,
                    "best_similarity": result.best_similarity,
                    "top": [h.text[:80] for h in result.hits[:TOP]],
                }
            )
    return {"answered": sum(r["answered"] for r in rows), "of": len(rows), "rows": rows}


def questions(args: argparse.Namespace) -> dict[str, Any]:
    data = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    report: dict[str, Any] = {}
    for model in args.models:
        store = Path(tempfile.mkdtemp(prefix=f"bench-mixed-{model}-")) / "store"
        started = time.perf_counter()
        with Engine(store=store, overrides={**TEMPLATE_ONLY, "embedder.model": model}) as engine:
            ingested = engine.ingest([str(REPO / "sample_logs")])
            seconds = time.perf_counter() - started
            for _ in range(args.cycles):  # the README's demo compacts once
                engine.compact()
        entry: dict[str, Any] = {"records": ingested.stored, "ingest_s": round(seconds, 1)}
        for language in ("chinese", "english"):
            for label, floor in (("ranking (floor 0)", 0.0), ("configured floor", None)):
                entry[f"{language}, {label}"] = ask(store, model, data[language], floor)
        entry["store_mb"] = round(sum(p.stat().st_size for p in store.rglob("*") if p.is_file()) / 1e6, 1)
        report[model] = entry
        summary = {k: v["answered"] if isinstance(v, dict) else v for k, v in entry.items()}
        print(model, json.dumps(summary, ensure_ascii=False), file=sys.stderr, flush=True)
    return report


def locomo(args: argparse.Namespace) -> dict[str, Any]:
    """LoCoMo before compaction, the store configured for each model (its full-text tokenizer too)."""
    import locomo as bench

    from expengine.models.embedder import get_embedder

    out = Path(tempfile.mkdtemp(prefix="bench-mixed-locomo-"))
    conversations = ["--conversations", str(args.conversations)] if args.conversations else []
    rows = {}
    for model in args.models:
        also = ["--also", *map(str, sorted(REPO.glob("sample_logs/zh_*.jsonl")))] if args.with_chinese else []
        lc = bench.parse_args(
            ["--cycles", "0", "--no-ablation", "--out", str(out / "locomo.json"), "--set", f"embedder.model={model}"]
            + conversations
            + also
        )
        summary = bench.run(lc, embedder=get_embedder(model=model), echo=False)["summary"]
        rows[model] = {
            m: {k: e["overall"][k] for k in ("evidence_recall", "answer_recall")} for m, e in summary.items()
        }
        print(model, json.dumps(rows[model]), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("questions", "locomo"))
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--cycles", type=int, default=0, help="questions: compactions after the ingest (default 0)")
    parser.add_argument("--conversations", type=int, default=2, help="LoCoMo: only the first N (default 2)")
    parser.add_argument(
        "--with-chinese", action="store_true", help="LoCoMo: the Chinese sample logs in every store too (mixed stores)"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    name = (
        f"mixed-{args.part}"
        + ("-with-chinese" if args.with_chinese else "")
        + (f"-{args.cycles}-cycles" if args.cycles else "")
    )
    out = args.out or REPO / "bench" / "results" / f"{name}.json"
    rows = questions(args) if args.part == "questions" else locomo(args)
    report = {"command": " ".join(["python bench/mixed.py", *sys.argv[1:]]), "machine": machine(), args.part: rows}
    write_json(out, report)
    print(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
