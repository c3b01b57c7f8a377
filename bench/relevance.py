"""Where should `query.min_similarity` be? Irrelevant queries against the recall cost, on LoCoMo.

    python bench/relevance.py [--data PATH] [--conversations N] [--questions N] [--irrelevant 50]
                              [--cycles 3] [--budget 1000] [--k 100] [--set KEY=VALUE] [--out PATH]

Each conversation goes into its own store (as bench/locomo.py builds it) and is compacted `--cycles`
times. Then two kinds of questions are asked with the floor off (`query.min_similarity = 0`,
`touch=False`), and each answer's `best_similarity` (the best cosine similarity of any candidate) is
kept:
- its own questions (categories 1-4), scored as bench/locomo.py scores them: evidence recall and
  answer-token recall of the prompt;
- `--irrelevant` questions of the next conversation (the last one borrows from the first): about
  people and events this store has never seen, so the right answer is "nothing relevant".
One pass is enough for every floor: a floor answers "nothing relevant" exactly when
`best_similarity < floor`, so its recall cost is the recall of the own questions it silences, and its
irrelevant share the borrowed questions it silences. The table gives both for floors 0.20-0.60.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    add_cycle_options,
    engine_overrides,
    finish_args,
    load_embedder,
    machine,
    run_cycles,
    table,
    write_json,
)
from locomo import (  # noqa: E402
    DEFAULT_DATA,
    conversation_questions,
    conversation_turns,
    native_events,
    score_prompt,
)

FLOORS = [round(0.20 + 0.02 * n, 2) for n in range(21)]


def _asked(engine: Any, text: str, *, k: int, budget: int) -> Any:
    return engine.query(text, k=k, touch=False, budget=budget, expand=True)


def measure(sample: dict[str, Any], borrowed: list[str], *, embedder: Any, args: argparse.Namespace) -> dict[str, Any]:
    from expengine import Engine
    from expengine.clock import utcnow

    sample_id = sample["sample_id"]
    turns = conversation_turns(sample)
    questions = conversation_questions(sample, {t.dia_id for t in turns}, limit=args.questions)
    overrides = {**engine_overrides(args), "query.min_similarity": "0"}
    own, irrelevant = [], []
    with tempfile.TemporaryDirectory(prefix=f"relevance-{sample_id}-") as tmp:
        log = Path(tmp) / f"{sample_id}.jsonl"
        log.write_text("\n".join(json.dumps(e) for e in native_events(turns, sample_id)) + "\n", encoding="utf-8")
        with Engine(store=Path(tmp) / "store", embedder=embedder, overrides=overrides) as engine:
            engine.ingest([str(log)], fmt="native")
            run_cycles(engine, args.cycles, start=utcnow())
            for question in questions:
                result = _asked(engine, question.text, k=args.k, budget=args.budget)
                found = {i for h in result.hits for i in h.source_ids} | {e.id for h in result.hits for e in h.expanded}
                shown = {i for h in result.hits if h.type == "memory" for i in h.source_ids} | {
                    e.id for h in result.hits for e in h.expanded
                }
                row = score_prompt(question, result.prompt, found, shown, sample_id)
                own.append({**row, "best_similarity": result.best_similarity})
            for text in borrowed:
                irrelevant.append(_asked(engine, text, k=args.k, budget=args.budget).best_similarity)
    return {"sample_id": sample_id, "own": own, "irrelevant": irrelevant}


def _share(values: list[float | None], floor: float) -> float:
    return sum(v is None or v < floor for v in values) / len(values) if values else 0.0


def _cost(rows: list[dict[str, Any]], key: str, floor: float) -> float:
    """Points of mean recall lost when the questions under `floor` answer nothing."""
    scored = [r for r in rows if r[key] is not None]
    if not scored:
        return 0.0
    return 100 * sum(r[key] for r in scored if (r["best_similarity"] or 0.0) < floor) / len(scored)


def summarise(conversations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    own = [r for c in conversations for r in c["own"]]
    irrelevant = [v for c in conversations for v in c["irrelevant"]]
    return [
        {
            "floor": floor,
            "irrelevant_share": round(_share(irrelevant, floor), 3),
            "own_silenced_share": round(_share([r["best_similarity"] for r in own], floor), 3),
            "evidence_recall_cost_points": round(_cost(own, "evidence_recall", floor), 2),
            "answer_recall_cost_points": round(_cost(own, "answer_recall", floor), 2),
        }
        for floor in FLOORS
    ]


def render(report: dict[str, Any]) -> str:
    rows = [
        [
            r["floor"],
            f"{100 * r['irrelevant_share']:.0f}%",
            f"{100 * r['own_silenced_share']:.1f}%",
            r["evidence_recall_cost_points"],
            r["answer_recall_cost_points"],
        ]
        for r in report["floors"]
    ]
    return (
        f"`{report['settings']['command']}` ({report['questions']} own questions, "
        f"{report['irrelevant']} borrowed ones, {machine()})\n\n"
        + table(
            [
                "min_similarity",
                "borrowed answered 'nothing relevant'",
                "own questions silenced",
                "evidence recall cost (points)",
                "answer-token recall cost (points)",
            ],
            rows,
        )
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON (default: %(default)s)")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--questions", type=int, default=None, help="only the first N own questions each")
    parser.add_argument("--irrelevant", type=int, default=50, help="borrowed questions per store (default: 50)")
    add_cycle_options(parser, name="relevance", k_default=100, k_help="hits asked for (default: %(default)s)")
    return finish_args(parser, argv, script="relevance.py")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if not args.data.exists():
        raise SystemExit(f"LoCoMo data not found: {args.data} (pass --data PATH)")
    samples = json.loads(args.data.read_text(encoding="utf-8"))[: args.conversations]
    if len(samples) < 2:
        raise SystemExit("borrowing questions takes at least two conversations (--conversations 2 or more)")
    embedder = load_embedder()
    conversations = []
    for n, sample in enumerate(samples):
        donor = samples[(n + 1) % len(samples)]
        borrowed = [q["question"] for q in donor["qa"] if q.get("category") in (1, 2, 3, 4)][: args.irrelevant]
        started = dt.datetime.now()
        conversations.append(measure(sample, borrowed, embedder=embedder, args=args))
        print(f"{sample['sample_id']}: {(dt.datetime.now() - started).total_seconds():.0f} s", file=sys.stderr)
    report = {
        "benchmark": "relevance",
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "questions": sum(len(c["own"]) for c in conversations),
        "irrelevant": sum(len(c["irrelevant"]) for c in conversations),
        "floors": summarise(conversations),
        "conversations": conversations,
    }
    write_json(args.out, report)
    print(render(report))
    print(f"results: {args.out}")
    return report


if __name__ == "__main__":
    main()
