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
costs (agreeing questions it silences).
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

OFF = {"llm.mode": "template", "query.min_similarity": "0"}


def _asked(engine: Any, questions: list[str], silver: list[list[str]], k: int) -> list[dict[str, Any]]:
    rows = []
    for question, best in zip(questions, silver):
        result = engine.query(question, k=k, touch=False)
        found = {i for h in result.hits for i in h.source_ids}
        rows.append({"best_similarity": result.best_similarity, "agrees": bool(best) and best[0] in found})
    return rows


def _borrowed(engine: Any, questions: list[str]) -> list[float | None]:
    return [engine.query(q, k=1, touch=False).best_similarity for q in questions]


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


def summarise(stage: list[dict[str, Any]]) -> list[dict[str, Any]]:
    own = [r for s in stage for r in s["own"]]
    irrelevant = [v for s in stage for v in s["irrelevant"]]

    def silenced(value: float | None, floor: float) -> bool:
        return value is None or value < floor

    return [
        {
            "floor": floor,
            "irrelevant_share": round(sum(silenced(v, floor) for v in irrelevant) / len(irrelevant), 3),
            "own_silenced_share": round(sum(silenced(r["best_similarity"], floor) for r in own) / len(own), 3),
            "agreement": round(sum(r["agrees"] for r in own) / len(own), 3),
            "agreement_cost_points": round(
                100 * sum(r["agrees"] and silenced(r["best_similarity"], floor) for r in own) / len(own), 2
            ),
        }
        for floor in FLOORS
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
    report = {
        "benchmark": "relevance_memorybank",
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "encoder": stores[0]["encoder"],
        "questions": sum(len(s["before"]["own"]) for s in stores),
        "irrelevant": sum(len(s["before"]["irrelevant"]) for s in stores),
        "before": summarise([s["before"] for s in stores]),
        "after": summarise([s["after"] for s in stores]),
        "stores": stores,
    }
    write_json(args.out, report)
    for stage in ("before", "after"):
        print(f"\n{stage} compaction ({report['encoder']}, {machine()}):\n")
        rows = [
            [
                r["floor"],
                f"{100 * r['irrelevant_share']:.0f}%",
                f"{100 * r['own_silenced_share']:.1f}%",
                r["agreement"],
                r["agreement_cost_points"],
            ]
            for r in report[stage]
        ]
        headers = ["min_similarity", "borrowed 'nothing relevant'", "own silenced", "agreement@k", "cost (points)"]
        print(table(headers, rows))
    print(f"results: {args.out}")
    return report


if __name__ == "__main__":
    main()
