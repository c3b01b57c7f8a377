"""Prompt redundancy: how much of a prompt block repeats another line of the same prompt?

    python bench/redundancy.py [--conversations N] [--skip C ...] [--questions N] [--cycles 3]
                               [--budget 1000] [--k 100] [--no-locomo] [--no-samples] [--out PATH]
                               [--pairs]

A prompt line is a hit line or an evidence line (the header and the day headings apart), its text
without the "- [label] " or "evidence (state): " prefix and without a collapsed line's "(said N
times, …)" tail. A line is redundant when its text's cosine similarity (the store's own encoder) to
another line of the same prompt is at least 0.9 (`decay.merge_similarity`, the near-duplicate
threshold). Measured on
- the English sample logs (sample_logs/, one store) with the 50 questions of `SAMPLE_QUESTIONS`
  (the support bot's users, weather, refunds, orders, bookings; the companion's cilantro, dog, job;
  the coding assistant's tests and commits), asked as an agent would (k 5, no budget), and with k 20
  at the `--budget`;
- LoCoMo (bench/locomo.py's conversations and questions, one store each), k `--k` at the `--budget`,
before compaction and after `--cycles` cycles. Nothing is reinforced (`touch=False`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    REPO,
    RESULTS,
    after_cycles,
    english_logs,
    load_embedder,
    machine,
    run_cycles,
    table,
    write_json,
)
from locomo import DEFAULT_DATA, conversation_questions, conversation_turns, native_events  # noqa: E402

NEAR = 0.9
SAMPLE_QUESTIONS = [
    # support bot: refunds, orders, weather, bookings, its users
    "the user asks for a refund for a cancelled flight",
    "how do I process a refund request?",
    "a user was charged twice for a flight",
    "refund approved?",
    "order status: the package has not arrived yet",
    "where is order W8874292?",
    "the user's package still says processing",
    "what is the weather in Chicago tomorrow?",
    "is it going to rain in Denver this weekend?",
    "weather request for Boston",
    "get_weather returned 429 rate limited",
    "weather API returns 401 Unauthorized",
    "do I need an umbrella in Tokyo on Monday?",
    "book a flight from DEN to NRT",
    "the user wants a one-way flight SEA to AUS",
    "which seat does the user prefer?",
    "does the user want an aisle or a window seat?",
    "book_flight failed, what to do?",
    "payment declined when booking",
    "send the itinerary to the user",
    "create a support ticket for a billing problem",
    "what does user u-101 need?",
    "the user prefers morning departures",
    "search_flights returned no results",
    "the user asks to be called back about a double charge",
    # companion: food, pets, work, mood, reminders
    "does the user like cilantro?",
    "suggest a recipe for dinner",
    "what food does the user hate?",
    "is the user allergic to anything?",
    "what is the name of the user's dog?",
    "how is Biscuit doing?",
    "what does the user do for work?",
    "the user is tired after a night shift",
    "what are the user's hobbies?",
    "remind the user about something",
    "how is the user's family?",
    "the user feels stressed",
    "recipes without peanuts",
    "what did the user say about soap?",
    "plan a weekend activity for the user",
    # coding assistant: tests, git, packages
    "the data-pipeline tests are failing",
    "how should tests be run?",
    "commit and push the change",
    "is it safe to run migrations on staging?",
    "why is the data-pipeline suite so slow?",
    "ModuleNotFoundError for yaml",
    "which pip package provides sklearn?",
    "tests fail in billing-service after pulling main",
    "test_stock_never_negative is failing",
    "the user's rules for git commits",
]
_LABEL = re.compile(r"^\s*-\s+(?:\[[^\]]*\]|evidence \([^)]*\):)?\s*")
_SAID = re.compile(r"\s*\(said \d+ times[^)]*\)$")
assert len(SAMPLE_QUESTIONS) == 50, len(SAMPLE_QUESTIONS)


def line_texts(prompt: str) -> list[str]:
    """The prompt's hit and evidence lines, each without its label and collapse tail."""
    lines = prompt.splitlines()[1:]
    return [_SAID.sub("", _LABEL.sub("", line)).strip() for line in lines if line.lstrip().startswith("- ")]


def redundant_lines(texts: list[str], vectors: dict[str, np.ndarray]) -> int:
    """How many lines have a near-duplicate (cosine ≥ NEAR) elsewhere in the same prompt."""
    if len(texts) < 2:
        return 0
    matrix = np.stack([vectors[t] for t in texts])
    sims = matrix @ matrix.T
    np.fill_diagonal(sims, -1.0)
    return int((sims >= NEAR).any(axis=1).sum())


def near_pairs(texts: list[str], vectors: dict[str, np.ndarray]) -> list[tuple[float, str, str]]:
    """Each pair of lines of one prompt that are near-duplicates: (cosine, one line, the other)."""
    return [
        (round(float(vectors[a] @ vectors[b]), 3), a, b)
        for i, a in enumerate(texts)
        for b in texts[i + 1 :]
        if float(vectors[a] @ vectors[b]) >= NEAR
    ]


def measure(engine: Any, questions: list[str], *, k: int, budget: int | None, now: dt.datetime) -> dict[str, Any]:
    prompts = [engine.query(q, k=k, touch=False, budget=budget, expand=True, now=now).prompt for q in questions]
    per_prompt = [line_texts(p) for p in prompts]
    distinct = sorted({t for texts in per_prompt for t in texts})
    vectors = dict(zip(distinct, engine.store.embeddings.encode(distinct))) if distinct else {}
    lines = sum(len(t) for t in per_prompt)
    redundant = sum(redundant_lines(t, vectors) for t in per_prompt)
    worst = max(per_prompt, key=lambda t: redundant_lines(t, vectors), default=[])
    return {
        "questions": len(questions),
        "lines": lines,
        "redundant": redundant,
        "share": round(redundant / lines, 4) if lines else None,
        "prompts_with_repeats": sum(redundant_lines(t, vectors) > 0 for t in per_prompt),
        "worst_prompt": worst,
        "pairs": sorted({pair for texts in per_prompt for pair in near_pairs(texts, vectors)}, reverse=True),
    }


def sample_logs(args: argparse.Namespace, embedder: Any) -> dict[str, Any]:
    from expengine import Engine
    from expengine.store.db import utcnow

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="redundancy-samples-") as tmp:
        with Engine(store=Path(tmp) / "store", embedder=embedder, overrides={"llm.mode": "template"}) as engine:
            engine.ingest([str(p) for p in english_logs(REPO / "sample_logs")], fmt="native")
            start = utcnow()  # the logs keep their own dates; the cycles and queries run on this clock
            for stage in ("before", "after"):
                now = start
                if stage == "after":
                    run_cycles(engine, args.cycles, start=start)
                    now = after_cycles(start, args.cycles)
                out[f"{stage}, k 5"] = measure(engine, SAMPLE_QUESTIONS, k=5, budget=None, now=now)
                out[f"{stage}, k 20, budget {args.budget}"] = measure(
                    engine, SAMPLE_QUESTIONS, k=20, budget=args.budget, now=now
                )
    return out


def locomo(args: argparse.Namespace, embedder: Any) -> dict[str, Any]:
    from expengine import Engine
    from expengine.store.db import utcnow

    samples = json.loads(args.data.read_text(encoding="utf-8"))
    samples = [s for s in samples if s["sample_id"] not in args.skip][: args.conversations]
    totals: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for sample in samples:
        turns = conversation_turns(sample)
        questions = [q.text for q in conversation_questions(sample, {t.dia_id for t in turns}, limit=args.questions)]
        with tempfile.TemporaryDirectory(prefix="redundancy-locomo-") as tmp:
            log = Path(tmp) / "conversation.jsonl"
            log.write_text("\n".join(json.dumps(e) for e in native_events(turns, sample["sample_id"])) + "\n")
            with Engine(store=Path(tmp) / "store", embedder=embedder, overrides={"llm.mode": "template"}) as engine:
                engine.ingest([str(log)], fmt="native")
                start = utcnow()
                totals["before"].append(measure(engine, questions, k=args.k, budget=args.budget, now=start))
                run_cycles(engine, args.cycles, start=start)
                after = after_cycles(start, args.cycles)
                totals["after"].append(measure(engine, questions, k=args.k, budget=args.budget, now=after))
        print(f"{sample['sample_id']}: {len(questions)} questions", file=sys.stderr)
    out = {}
    for stage, parts in totals.items():
        lines, redundant = sum(p["lines"] for p in parts), sum(p["redundant"] for p in parts)
        out[f"{stage}, k {args.k}, budget {args.budget}"] = {
            "questions": sum(p["questions"] for p in parts),
            "lines": lines,
            "redundant": redundant,
            "share": round(redundant / lines, 4) if lines else None,
            "prompts_with_repeats": sum(p["prompts_with_repeats"] for p in parts),
            "worst_prompt": max((p["worst_prompt"] for p in parts), key=len, default=[]),
        }
    out["conversations"] = [s["sample_id"] for s in samples]  # type: ignore[assignment]
    return out


def render(report: dict[str, Any]) -> str:
    rows = []
    for corpus in ("sample logs", "locomo"):
        for setting, m in report.get(corpus, {}).items():
            if isinstance(m, dict):
                rows.append([corpus, setting, m["questions"], m["lines"], m["redundant"], m["share"]])
    head = f"`{report['command']}` ({report['machine']}, {report['seconds']} s)"
    return head + "\n\n" + table(["corpus", "stage, query", "questions", "lines", "repeating lines", "share"], rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--skip", nargs="*", default=[], help="conversation ids to leave out (e.g. conv-42)")
    parser.add_argument("--questions", type=int, default=None, help="only the first N questions per conversation")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--no-locomo", action="store_true")
    parser.add_argument("--no-samples", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "redundancy.json")
    parser.add_argument("--pairs", action="store_true", help="print the sample logs' near-duplicate pairs")
    args = parser.parse_args(argv)
    started = dt.datetime.now()
    embedder = load_embedder()
    report: dict[str, Any] = {"machine": machine()}
    report["command"] = " ".join(["python bench/redundancy.py", *(sys.argv[1:] if argv is None else argv)])
    if not args.no_samples:
        report["sample logs"] = sample_logs(args, embedder)
    if not args.no_locomo:
        report["locomo"] = locomo(args, embedder)
    report["seconds"] = round((dt.datetime.now() - started).total_seconds())
    write_json(args.out, report)
    print(render(report))
    if args.pairs:
        for setting, m in report.get("sample logs", {}).items():
            for cosine, one, other in m["pairs"]:
                print(f"{setting}: {cosine}  {one!r}  ~  {other!r}")


if __name__ == "__main__":
    main()
