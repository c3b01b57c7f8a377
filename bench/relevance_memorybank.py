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
too, so the same pass gives every `query.min_lexical` at the default cosine floor: alone (the
`lexical_*` tables: a question is silenced when it is under either), and with the cosine low too (the
`combined_*` tables: silenced under the floor, or under `min_lexical` with a best cosine at most
`query.lexical_max_similarity`), that one also tuned on half the users and read on the other half.

Since borrowed questions are often generic, each share is also given for the absent-only set: the
borrowed questions whose topic terms (bench/memorybank_topics.json, written by hand from the questions
alone: the title, place, activity or dish each asks about) occur nowhere in this user's Chinese
conversation; a question about a date or a mood has no terms and is never absent.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CYCLE_SPACING, RESULTS, machine, table, write_json  # noqa: E402
from memorybank import DEFAULT_DATA, parallel_events, top_ids  # noqa: E402
from relevance import FLOORS  # noqa: E402

# the floor off; lexical evidence computed for every answer (a floor of 0 judges nothing, so it only
# reports it)
OFF = {
    "llm.mode": "template",
    "query.min_similarity": "0",
    "query.min_lexical": "0.0001",
    "query.lexical_max_similarity": "1",
}
# `query.min_lexical` values reported, each with the encoder's default cosine floor
LEXICAL = [0.0, 0.02, 0.03, 0.04, 0.05, 0.08, 0.1, 0.12, 0.14, 0.16, 0.2]
# `query.lexical_max_similarity` values reported with each of LEXICAL (the combined decision)
CEILINGS = [0.26, 0.28, 0.3, 0.32, 0.34, 0.36, 0.38, 0.4]
TOPICS = Path(__file__).resolve().parent / "memorybank_topics.json"


def question_key(question: str) -> str:
    """A question's key in TOPICS and in the results: the data's questions are not copied into the repo."""
    return hashlib.sha1(question.encode("utf-8")).hexdigest()[:12]


def _asked(engine: Any, questions: list[str], silver: list[list[str]], k: int) -> list[dict[str, Any]]:
    rows = []
    for question, best in zip(questions, silver):
        result = engine.query(question, k=k, touch=False)
        found = {i for h in result.hits for i in h.source_ids}
        rows.append(
            {
                "question_key": question_key(question),
                "best_similarity": result.best_similarity,
                "lexical_evidence": result.lexical_evidence,
                "agrees": bool(best) and best[0] in found,
            }
        )
    return rows


def mark_absent(
    users: list[dict[str, Any]], stores: list[dict[str, Any]], topics: dict[str, list[str]] | None = None
) -> None:
    """Each borrowed answer's `absent`: its question names a thing (has topic terms in TOPICS) and none
    of them occurs in the store's user's Chinese conversation. Judged on the data, not the engine."""
    if topics is None:
        topics = json.loads(TOPICS.read_text(encoding="utf-8"))["topics"]
    for user, store in zip(users, stores):
        said = "\n".join(t[f] for day in user["cn"]["history"].values() for t in day for f in ("query", "response"))
        for stage in ("before", "after"):
            for row in store[stage]["irrelevant"]:
                terms = topics[row["question_key"]]
                row["absent"] = bool(terms) and not any(term in said for term in terms)


def _borrowed(engine: Any, questions: list[tuple[int, str]]) -> list[dict[str, Any]]:
    rows = []
    for origin, question in questions:
        result = engine.query(question, k=1, touch=False)
        rows.append(
            {
                "question_key": question_key(question),
                "from": origin,
                "best_similarity": result.best_similarity,
                "lexical_evidence": result.lexical_evidence,
            }
        )
    return rows


def measure(users: list[dict[str, Any]], index: int, args: argparse.Namespace) -> dict[str, Any]:
    from expengine import Engine
    from expengine.clock import utcnow

    user = users[index]
    others = [(n, q) for n, u in enumerate(users) if n != index for q in u["questions_cn"]]

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


def silenced(row: dict[str, Any], cosine: float, lexical: float = 0.0, ceiling: float = 1.0) -> bool:
    """What the engine answers "nothing relevant" at these settings (query/search.py)."""
    value, evidence = row["best_similarity"], row["lexical_evidence"]
    if value is None or value < cosine:
        return True
    return evidence is not None and evidence < lexical and value <= ceiling


def shares(stage: list[dict[str, Any]], cosine: float, lexical: float = 0.0, ceiling: float = 1.0) -> dict[str, Any]:
    own = [r for s in stage for r in s["own"]]
    borrowed = [r for s in stage for r in s["irrelevant"]]
    gone = [r for r in borrowed if r["absent"]]

    def share(rows: list[dict[str, Any]]) -> float:
        return round(sum(silenced(r, cosine, lexical, ceiling) for r in rows) / max(len(rows), 1), 3)

    return {
        "floor": cosine,
        "min_lexical": lexical,
        "lexical_max_similarity": ceiling,
        "irrelevant_share": share(borrowed),
        "absent_share": share(gone),
        "absent": len(gone),
        "own_silenced_share": share(own),
        "agreement": round(sum(r["agrees"] for r in own) / len(own), 3),
        "agreement_cost_points": round(
            100 * sum(r["agrees"] and silenced(r, cosine, lexical, ceiling) for r in own) / len(own), 2
        ),
    }


def summarise(stage: list[dict[str, Any]], *, floor: float | None = None, ceiling: float = 1.0) -> list[dict[str, Any]]:
    """A row per cosine floor (FLOORS), or with `floor` one per `query.min_lexical` (LEXICAL) at that
    `query.lexical_max_similarity`."""
    if floor is None:
        return [shares(stage, f) for f in FLOORS]
    return [shares(stage, floor, lexical, ceiling) for lexical in LEXICAL]


def held_out(stores: list[dict[str, Any]], floor: float) -> list[dict[str, Any]]:
    """The combined decision tuned on half the users (even, odd): the (ceiling, min_lexical) of the grid
    silencing the most borrowed questions of that half, before and after compaction together, for at
    most 1 point of agreement at each stage; read on the other half."""
    halves = {"even": stores[::2], "odd": stores[1::2]}

    def scored(setting: tuple[float, float], users: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [shares([u[stage] for u in users], floor, setting[1], setting[0]) for stage in ("before", "after")]

    out = []
    for train, test in (("even", "odd"), ("odd", "even")):
        fits = []
        for setting in ((c, lexical) for c in CEILINGS for lexical in LEXICAL):
            rows = scored(setting, halves[train])
            if all(r["agreement_cost_points"] <= 1 for r in rows):
                # the most silenced; of equals, the lowest settings (the widest margin to own questions)
                fits.append((sum(r["irrelevant_share"] for r in rows), -setting[0], -setting[1], setting))
        setting = max(fits)[3] if fits else (1.0, 0.0)
        trained, tested = scored(setting, halves[train]), scored(setting, halves[test])
        out.append(
            {
                "train": train,
                "lexical_max_similarity": setting[0],
                "min_lexical": setting[1],
                "trained": trained,
                "held_out": tested,
            }
        )
    return out


def logistic_halves(stores: list[dict[str, Any]], floor: float) -> list[dict[str, Any]]:
    """The other combined decision: a logistic regression on (best cosine, lexical evidence), own
    questions against borrowed ones of half the users, both stages pooled; "nothing relevant" under the
    floor or below the lowest score of that half's agreeing own questions. Read on the other half."""
    from sklearn.linear_model import LogisticRegression

    def point(row: dict[str, Any]) -> list[float]:
        evidence = row["lexical_evidence"]
        return [row["best_similarity"] or 0.0, 1.0 if evidence is None else evidence]

    halves = {"even": stores[::2], "odd": stores[1::2]}
    out = []
    for train, test in (("even", "odd"), ("odd", "even")):
        rows = [(r, 1) for u in halves[train] for st in ("before", "after") for r in u[st]["own"]]
        rows += [(r, 0) for u in halves[train] for st in ("before", "after") for r in u[st]["irrelevant"]]
        model = LogisticRegression(class_weight="balanced").fit([point(r) for r, _ in rows], [y for _, y in rows])
        scores = model.decision_function([point(r) for r, y in rows if y and r["agrees"]])
        cut = float(min(scores))

        def read(users: list[dict[str, Any]]) -> list[dict[str, Any]]:
            result = []
            for st in ("before", "after"):
                own = [r for u in users for r in u[st]["own"]]
                borrowed = [r for u in users for r in u[st]["irrelevant"]]
                gone = [r for r in borrowed if r["absent"]]

                def silent(r: dict[str, Any]) -> bool:
                    value = r["best_similarity"]
                    return value is None or value < floor or float(model.decision_function([point(r)])[0]) < cut

                result.append(
                    {
                        "irrelevant_share": round(sum(map(silent, borrowed)) / len(borrowed), 3),
                        "absent_share": round(sum(map(silent, gone)) / max(len(gone), 1), 3),
                        "agreement_cost_points": round(100 * sum(r["agrees"] and silent(r) for r in own) / len(own), 2),
                    }
                )
            return result

        weights = [round(float(w), 2) for w in model.coef_[0]]
        out.append({"train": train, "weights": weights, "trained": read(halves[train]), "held_out": read(halves[test])})
    return out


def _both_halves(half: dict[str, Any]) -> list[str]:
    """A tuned setting's shares and cost on its own half and on the held-out one, before | after."""
    return [
        " | ".join(
            f"{100 * r['irrelevant_share']:.1f}% / {100 * r['absent_share']:.1f}%, {r['agreement_cost_points']} p"
            for r in half[side]
        )
        for side in ("trained", "held_out")
    ]


def _print(report: dict[str, Any]) -> None:
    share = "borrowed / absent-only 'nothing relevant'"
    common = [share, "own silenced", "agreement@k", "cost (points)"]

    def cells(r: dict[str, Any]) -> list[Any]:
        return [
            f"{100 * r['irrelevant_share']:.1f}% / {100 * r['absent_share']:.1f}%",
            f"{100 * r['own_silenced_share']:.1f}%",
            r["agreement"],
            r["agreement_cost_points"],
        ]

    where = f"{report['encoder']}, {machine()}; {report['irrelevant']} borrowed, {report['absent']} absent-only"
    for stage in ("before", "after"):
        print(f"\n{stage} compaction, cosine floor alone ({where}):\n")
        print(table(["min_similarity", *common], [[r["floor"], *cells(r)] for r in report[stage]]))
        print(f"\n{stage} compaction, min_lexical alone at the default floor:\n")
        print(table(["min_lexical", *common], [[r["min_lexical"], *cells(r)] for r in report[f"lexical_{stage}"]]))
        print(f"\n{stage} compaction, min_lexical where the best cosine is at most lexical_max_similarity:\n")
        rows = [[r["lexical_max_similarity"], r["min_lexical"], *cells(r)] for r in report[f"combined_{stage}"]]
        print(table(["lexical_max_similarity", "min_lexical", *common], rows))
    print("\ncombined decision tuned on half the users, read on the other half (before | after):\n")
    rows = [[h["train"], h["lexical_max_similarity"], h["min_lexical"], *_both_halves(h)] for h in report["halves"]]
    print(table(["tuned on", "lexical_max_similarity", "min_lexical", "on its half", "held out"], rows))
    print("\nlogistic regression on (cosine, lexical evidence) tuned on half the users (before | after):\n")
    rows = [[h["train"], h["weights"], *_both_halves(h)] for h in report["logistic_halves"]]
    print(table(["tuned on", "weights (cosine, lexical)", "on its half", "held out"], rows))
    d = report["default"]
    print(
        f"\ndefaults (floor {d['floor']}, min_lexical {d['min_lexical']}, lexical_max_similarity {d['lexical_max_similarity']}):\n"
    )
    print(table(["stage", *common], [[stage, *cells(d[stage])] for stage in ("before", "after")]))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--users", type=int, default=None, help="only the first N users (at least 2)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=3, help="compactions before the second measure")
    parser.add_argument("--out", type=Path, default=RESULTS / "relevance_memorybank.json")
    parser.add_argument(
        "--stores", type=Path, default=None, help="re-read the answers of an earlier --out, asking nothing"
    )
    args = parser.parse_args(argv)
    users = json.loads(args.data.read_text(encoding="utf-8"))["users"][: args.users]
    if len(users) < 2:
        raise SystemExit("borrowing questions takes at least two users (--users 2 or more)")
    if args.stores:
        stores = json.loads(args.stores.read_text(encoding="utf-8"))["stores"][: len(users)]
    else:
        stores = []
        for index in range(len(users)):
            stores.append(measure(users, index, args))
            print(f"user {index}: done", file=sys.stderr)
    mark_absent(users, stores)
    from expengine.config import Config

    query, encoder = Config().query, stores[0]["encoder"]
    floor, lexical, ceiling = (
        query.similarity_floor(encoder),
        query.lexical_floor(encoder),
        query.lexical_ceiling(encoder),
    )
    stages = {stage: [s[stage] for s in stores] for stage in ("before", "after")}
    report: dict[str, Any] = {
        "benchmark": "relevance_memorybank",
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "encoder": encoder,
        "questions": sum(len(s["before"]["own"]) for s in stores),
        "irrelevant": sum(len(s["before"]["irrelevant"]) for s in stores),
        "absent": sum(r["absent"] for s in stores for r in s["before"]["irrelevant"]),
        "default": {"floor": floor, "min_lexical": lexical, "lexical_max_similarity": ceiling}
        | {stage: shares(rows, floor, lexical, ceiling) for stage, rows in stages.items()},
        "halves": held_out(stores, floor),
        "logistic_halves": logistic_halves(stores, floor),
    }
    for stage, rows in stages.items():
        report[stage] = summarise(rows)
        report[f"lexical_{stage}"] = summarise(rows, floor=floor)
        report[f"combined_{stage}"] = [r for c in CEILINGS for r in summarise(rows, floor=floor, ceiling=c)]
    report["stores"] = stores
    write_json(args.out, report)
    _print(report)
    print(f"results: {args.out}")
    return report


if __name__ == "__main__":
    main()
