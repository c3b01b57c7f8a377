"""Where should `query.min_similarity` be for the multilingual encoder? bench/relevance.py in Chinese.

    python bench/relevance_memorybank.py [--data PATH] [--users N] [--k 5] [--cycles 3] [--out PATH]

Each MemoryBank user's Chinese conversation goes into its own store (`embedder.model = "auto"`, so the
multilingual model, as bench/memorybank.py builds it). Two kinds of questions are asked with the floor
off (`query.min_similarity = 0`, `touch=False`), right after ingest and again after `--cycles`
compactions, and each answer's `best_similarity` is kept:
- the user's own questions, scored by agreement@k as bench/memorybank.py scores them: the top k hits
  cite the turn the parallel English store (MiniLM) ranks first for the English question;
- every other user's questions: about people and days this store has never seen, so the right answer
  is "nothing relevant" (some are generic, "我喜欢听什么类型的音乐？", and another user may have talked
  about music: those count against the floor all the same).
A floor answers "nothing relevant" exactly when `best_similarity < floor`, so one pass gives every
floor: the borrowed share it silences, the own questions it silences, and the points of agreement it
costs (agreeing questions it silences). Each answer's `lexical_evidence` (query/lexical.py) is kept
too, so the same pass gives every `query.min_lexical` at the default cosine floor (the `lexical_*`
tables: a question is silenced when it is under either).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CYCLE_SPACING, RESULTS, machine, table, write_json  # noqa: E402
from memorybank import DEFAULT_DATA, parallel_events, top_ids  # noqa: E402
from relevance import FLOORS  # noqa: E402

# the floor off; lexical evidence computed (a floor of 0 judges nothing, so it only reports it)
OFF = {"llm.mode": "template", "query.min_similarity": "0", "query.min_lexical": "0.0001"}
# `query.min_lexical` values reported, each with the encoder's default cosine floor
LEXICAL = [0.0, 0.02, 0.03, 0.04, 0.05, 0.08, 0.1, 0.12]


def _asked(engine: Any, questions: list[str], silver: list[list[str]], k: int) -> list[dict[str, Any]]:
    rows = []
    for question, best in zip(questions, silver):
        result = engine.query(question, k=k, touch=False)
        found = {i for h in result.hits for i in h.source_ids}
        rows.append(
            {
                "best_similarity": result.best_similarity,
                "lexical_evidence": result.lexical_evidence,
                "agrees": bool(best) and best[0] in found,
            }
        )
    return rows


def _borrowed(engine: Any, questions: list[str]) -> list[dict[str, Any]]:
    rows = []
    for question in questions:
        result = engine.query(question, k=1, touch=False)
        rows.append({"best_similarity": result.best_similarity, "lexical_evidence": result.lexical_evidence})
    return rows


def measure(users: list[dict[str, Any]], index: int, args: argparse.Namespace) -> dict[str, Any]:
    from expengine import Engine
    from expengine.store.db import utcnow

    user = users[index]
    others = [q for n, u in enumerate(users) if n != index for q in u["questions_cn"]]
    events = parallel_events(user)
    out: dict[str, Any] = {"user": user["cn_name"]}
    with tempfile.TemporaryDirectory(prefix=f"relevance-mb{index}-") as tmp:
        logs = {}
        for lang in ("en", "cn"):
            logs[lang] = Path(tmp) / f"{lang}.jsonl"
            logs[lang].write_text("\n".join(json.dumps(e, ensure_ascii=False) for e in events[lang]), encoding="utf-8")
        with Engine(store=Path(tmp) / "en", overrides={**OFF, "embedder.model": "minilm"}) as english:
            english.ingest([str(logs["en"])])
            silver = [top_ids(english, q, 1) for q in user["questions_en"]]
        with Engine(store=Path(tmp) / "cn", overrides=OFF) as engine:
            engine.ingest([str(logs["cn"])])
            out["encoder"] = engine.store.embeddings.name
            out["before"] = {"own": _asked(engine, user["questions_cn"], silver, args.k)}
            out["before"]["irrelevant"] = _borrowed(engine, others)
            start = utcnow()
            for n in range(args.cycles):
                engine.compact(now=start + CYCLE_SPACING * (n + 1))
            out["after"] = {"own": _asked(engine, user["questions_cn"], silver, args.k)}
            out["after"]["irrelevant"] = _borrowed(engine, others)
    return out


def summarise(stage: list[dict[str, Any]], *, floor: float | None = None) -> list[dict[str, Any]]:
    """A row per cosine floor (FLOORS), or with `floor` one per `query.min_lexical` (LEXICAL)."""
    own = [r for s in stage for r in s["own"]]
    irrelevant = [r for s in stage for r in s["irrelevant"]]

    def silenced(row: dict[str, Any], cosine: float, lexical: float) -> bool:
        value, evidence = row["best_similarity"], row["lexical_evidence"]
        return value is None or value < cosine or (evidence is not None and evidence < lexical)

    grid = [(f, 0.0) for f in FLOORS] if floor is None else [(floor, lexical) for lexical in LEXICAL]
    return [
        {
            "floor": cosine,
            "min_lexical": lexical,
            "irrelevant_share": round(sum(silenced(r, cosine, lexical) for r in irrelevant) / len(irrelevant), 3),
            "own_silenced_share": round(sum(silenced(r, cosine, lexical) for r in own) / len(own), 3),
            "agreement": round(sum(r["agrees"] for r in own) / len(own), 3),
            "agreement_cost_points": round(
                100 * sum(r["agrees"] and silenced(r, cosine, lexical) for r in own) / len(own), 2
            ),
        }
        for cosine, lexical in grid
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--users", type=int, default=None, help="only the first N users (at least 2)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=3, help="compactions before the second measure")
    parser.add_argument("--out", type=Path, default=RESULTS / "relevance_memorybank.json")
    args = parser.parse_args(argv)
    users = json.loads(args.data.read_text(encoding="utf-8"))["users"][: args.users]
    if len(users) < 2:
        raise SystemExit("borrowing questions takes at least two users (--users 2 or more)")
    stores = []
    for index in range(len(users)):
        stores.append(measure(users, index, args))
        print(f"user {index}: done", file=sys.stderr)
    from expengine.config import Config

    default_floor = Config().query.similarity_floor(stores[0]["encoder"])
    report = {
        "benchmark": "relevance_memorybank",
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "encoder": stores[0]["encoder"],
        "questions": sum(len(s["before"]["own"]) for s in stores),
        "irrelevant": sum(len(s["before"]["irrelevant"]) for s in stores),
        "before": summarise([s["before"] for s in stores]),
        "after": summarise([s["after"] for s in stores]),
        "lexical_before": summarise([s["before"] for s in stores], floor=default_floor),
        "lexical_after": summarise([s["after"] for s in stores], floor=default_floor),
        "stores": stores,
    }
    write_json(args.out, report)
    for stage in ("before", "after", "lexical_before", "lexical_after"):
        print(f"\n{stage} compaction ({report['encoder']}, {machine()}):\n")
        rows = [
            [
                r["floor"] if not stage.startswith("lexical") else r["min_lexical"],
                f"{100 * r['irrelevant_share']:.0f}%",
                f"{100 * r['own_silenced_share']:.1f}%",
                r["agreement"],
                r["agreement_cost_points"],
            ]
            for r in report[stage]
        ]
        first = "min_lexical (at the default floor)" if stage.startswith("lexical") else "min_similarity"
        headers = [first, "borrowed 'nothing relevant'", "own silenced", "agreement@k", "cost (points)"]
        print(table(headers, rows))
    print(f"results: {args.out}")
    return report


if __name__ == "__main__":
    main()
