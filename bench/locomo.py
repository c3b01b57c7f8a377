"""LoCoMo retrieval benchmark: does the store shrink without forgetting what the questions need?

    python bench/locomo.py [--data PATH] [--conversations N] [--questions N] [--sessions N]
                           [--cycles 3] [--budget 1000] [--k 100] [--no-ablation] [--threads 1] [--llm]
                           [--only conv-42 conv-43] [--sweep 250 500 1000]
                           [--set KEY=VALUE] [--out PATH]

Each conversation goes into its own fresh store. Every turn becomes a native `message` record:
id `<sample_id>:<dia_id>`, ts = the session's date-time plus one second per turn (keeps the order),
session `<sample_id>:session_N`, role `user`, content `Speaker: text`, and when the turn shared an
image, its BLIP caption appended as ` (shared image: <caption>)` (the caption is what LoCoMo's own
text-only baselines see, and some answers are only in it).

Every question of categories 1-4 (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; 5 is
adversarial and has no answer) is asked with `Engine.query(touch=False, budget=1000, expand=True)`:
the prompt block the agent would see, cut at 1,000 tokens by `textutil.approx_tokens` (words plus
punctuation marks, header included). Measured on the hits that fit:
- evidence recall: share of the gold evidence turns among the hits' `source_ids` (a memory's own id
  and the near-duplicates merged into it; a unit's sources, a note's turns among them) plus the
  evidence lines shown under units. Malformed gold ids are normalised ("D8:6; D9:17" → two ids, "D:11:26" → D11:26); ids
  naming no turn of the conversation ("D", "D10:19" in conv-42) are dropped, and a question left
  with none counts only for answer-token recall;
- evidence recall (shown): the same, counting only turns whose text is in the prompt (a memory hit,
  its merged near-duplicates, the evidence lines under units) and not the other sources of a unit: a
  note rewrites its turn, so this counts turns only;
- answer-token recall: share of the gold answer's lowercase words present in the prompt text;
- hot text / raw text: tokens a default query can return (active memories' and active units' text,
  notes included, `Engine.stats().hot_tokens`) against the tokens of every turn stored.
After compaction, 20 random notes (seeded) are printed with the turn each came from and checked for
what makes a note unusable (no subject, chatter; a wrong date is read off the printout), and each
conversation's compaction time (3 cycles, the notes step apart) is reported.
`--sweep` asks every question again at each budget given, before and after compaction (answer-token,
single-hop and evidence recall per budget, for all conversations and each one).
The baseline ranks the same stored turns with BM25 (rank_bm25 BM25Okapi over lowercase words) and
fills the same budget with the same renderer. Then the store is compacted `--cycles` times (full
cycle with refinement, one nightly clock tick apart) and measured again. The ablation replays the
cycles from the post-ingest snapshot with only some steps (decay; + goal cleanup; + pruning and
merging); the full cycle (+ refinement, + purge) is the "after" row.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    CYCLE_SPACING,
    SHARED_DATA,
    Stopwatch,
    add_cycle_options,
    after_cycles,
    audit_units,
    engine_overrides,
    finish_args,
    load_embedder,
    machine,
    publish,
    render_audit,
    run_cycles,
    store_size,
    table,
    torch_threads,
    words,
)

DEFAULT_DATA = SHARED_DATA / "locomo" / "locomo_dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SESSION_KEY = re.compile(r"session_(\d+)")
EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")
# The step-by-step ablation: each variant replays all cycles from the post-ingest snapshot.
ABLATIONS = (
    ("decay", ("decay",)),
    ("+ goal cleanup", ("decay", "goal_cleanup")),
    ("+ pruning and merging", ("decay", "goal_cleanup", "prune_clusters")),
)
AFTER_LABEL = "+ refinement (full compaction)"


@dataclass
class Turn:
    record_id: str
    dia_id: str
    ts: dt.datetime
    session: str
    content: str


@dataclass
class Question:
    text: str
    answer: str
    category: int
    evidence: list[str]
    malformed: list[str] = field(default_factory=list)


def parse_session_time(text: str) -> dt.datetime:
    """'1:56 pm on 8 May, 2023' → datetime(2023, 5, 8, 13, 56) (naive, read as UTC)."""
    try:
        return dt.datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y")
    except ValueError as exc:
        raise ValueError(
            f"unexpected LoCoMo session date-time {text!r} (expected e.g. '1:56 pm on 8 May, 2023')"
        ) from exc


def conversation_turns(sample: dict[str, Any], *, max_sessions: int | None = None) -> list[Turn]:
    conversation, sample_id = sample["conversation"], sample["sample_id"]
    numbers = sorted(int(m.group(1)) for key in conversation if (m := SESSION_KEY.fullmatch(key)))
    turns = []
    for number in numbers[:max_sessions]:
        start = parse_session_time(conversation[f"session_{number}_date_time"])
        for offset, turn in enumerate(conversation[f"session_{number}"]):
            content = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                content += f" (shared image: {turn['blip_caption']})"
            turns.append(
                Turn(
                    record_id=f"{sample_id}:{turn['dia_id']}",
                    dia_id=turn["dia_id"],
                    ts=start + dt.timedelta(seconds=offset),
                    session=f"{sample_id}:session_{number}",
                    content=content,
                )
            )
    return turns


def native_events(turns: list[Turn], agent: str) -> list[dict[str, Any]]:
    return [
        {
            "id": t.record_id,
            "ts": t.ts.isoformat(),
            "kind": "message",
            "agent": agent,
            "session": t.session,
            "role": "user",
            "content": t.content,
        }
        for t in turns
    ]


def normalise_evidence(raw: list[Any], known: set[str]) -> tuple[list[str], list[str]]:
    """Gold evidence ids as turn ids of this conversation, and the pieces that name no turn."""
    ids, malformed = [], []
    for entry in raw:
        for piece in re.split(r"[;,\s]+", str(entry)):
            if not piece:
                continue
            match = EVIDENCE_ID.search(piece)
            dia_id = f"D{match.group(1)}:{match.group(2)}" if match else None
            if dia_id in known:
                ids.append(dia_id)
            else:
                malformed.append(piece)
    return list(dict.fromkeys(ids)), malformed


def conversation_questions(
    sample: dict[str, Any], known: set[str], *, limit: int | None = None, truncated: bool = False
) -> list[Question]:
    """Questions of categories 1-4; on a truncated conversation, only those whose evidence is all kept."""
    questions = []
    for qa in sample["qa"]:
        if qa.get("category") not in CATEGORIES or qa.get("answer") is None:
            continue
        evidence, malformed = normalise_evidence(qa.get("evidence") or [], known)
        if truncated and (malformed or not evidence):
            continue
        questions.append(
            Question(
                text=qa["question"],
                answer=str(qa["answer"]),
                category=qa["category"],
                evidence=evidence,
                malformed=malformed,
            )
        )
    return questions[:limit]


# --- scoring one prompt -------------------------------------------------------------------------------
def score_prompt(question: Question, prompt: str, found: set[str], shown: set[str], sample_id: str) -> dict[str, Any]:
    prefix = sample_id + ":"
    found_dia = {i[len(prefix) :] for i in found if i.startswith(prefix)}
    shown_dia = {i[len(prefix) :] for i in shown if i.startswith(prefix)}
    gold = question.evidence
    answer_words = list(dict.fromkeys(words(question.answer)))
    prompt_words = set(words(prompt))
    return {
        "category": question.category,
        "evidence_recall": sum(g in found_dia for g in gold) / len(gold) if gold else None,
        "evidence_recall_shown": sum(g in shown_dia for g in gold) / len(gold) if gold else None,
        "answer_recall": sum(w in prompt_words for w in answer_words) / len(answer_words) if answer_words else None,
    }


def measure_engine(
    engine: Any,
    questions: list[Question],
    sample_id: str,
    *,
    budget: int,
    k: int,
    user: str | None = None,
    now: dt.datetime | None = None,
) -> list[dict[str, Any]]:
    """Ask every question without reinforcing anything (for `user`, when a store holds several), at
    `now` (default the wall clock); score the hits that fit in the budget."""
    from expengine.textutil import approx_tokens

    scores = []
    for question in questions:
        result = engine.query(question.text, k=k, touch=False, budget=budget, expand=True, user=user, now=now)
        found: set[str] = set()
        shown: set[str] = set()
        for hit in result.hits:
            found.update(hit.source_ids)
            if hit.type == "memory":
                shown.update(hit.source_ids)
            for evidence in hit.expanded:
                found.add(evidence.id)
                shown.add(evidence.id)
        row = score_prompt(question, result.prompt, found, shown, sample_id)
        row.update(
            tokens=approx_tokens(result.prompt),
            units=sum(h.type == "unit" for h in result.hits),
            memories=sum(h.type == "memory" for h in result.hits),
            ms=result.took_ms,
        )
        scores.append(row)
    return scores


def measure_bm25(engine: Any, questions: list[Question], sample_id: str, *, budget: int) -> list[dict[str, Any]]:
    """BM25 over the stored turns, rendered and cut exactly like a query answer."""
    from common import bm25_answers

    from expengine.textutil import approx_tokens

    scores = []
    answers = bm25_answers(engine, [q.text for q in questions], budget=budget, depth=200)
    for question, (prompt, kept) in zip(questions, answers):
        ids = {h.id for h in kept}
        row = score_prompt(question, prompt, ids, ids, sample_id)
        row.update(tokens=approx_tokens(prompt), units=0, memories=len(kept))
        scores.append(row)
    return scores


# --- one conversation -----------------------------------------------------------------------------------
def run_steps(engine: Any, steps: tuple[str, ...], cycles: int, start: dt.datetime, label: str) -> None:
    """Replay `cycles` cycles with only `steps` (Engine per-step methods), then refresh the text index
    as a full compaction does at its end."""
    from expengine.store.index import MEMORIES

    for n in range(cycles):
        run_id = f"bench-{re.sub(r'[^a-z]+', '-', label).strip('-')}-{n + 1}"
        for step in steps:
            getattr(engine, step)(dry_run=False, run_id=run_id, now=start + CYCLE_SPACING * (n + 1))
    engine.store.index.refresh_text_index(MEMORIES)


def run_conversation(
    sample: dict[str, Any], *, embedder: Any, args: argparse.Namespace, watch: Stopwatch
) -> dict[str, Any]:
    from expengine import Engine
    from expengine.clock import utcnow

    sample_id = sample["sample_id"]
    turns = conversation_turns(sample, max_sessions=args.sessions)
    known = {t.dia_id for t in turns}
    questions = conversation_questions(sample, known, limit=args.questions, truncated=args.sessions is not None)
    overrides = engine_overrides(args)
    out: dict[str, Any] = {
        "sample_id": sample_id,
        "turns": len(turns),
        "questions": len(questions),
        "malformed_evidence": sorted({m for q in questions for m in q.malformed}),
        "methods": {},
        "sizes": {},
    }
    with tempfile.TemporaryDirectory(prefix=f"locomo-{sample_id}-") as tmp:
        log = Path(tmp) / f"{sample_id}.jsonl"
        log.write_text("\n".join(json.dumps(e) for e in native_events(turns, sample_id)) + "\n", encoding="utf-8")
        with Engine(store=Path(tmp) / "store", embedder=embedder, overrides=overrides) as engine:
            with watch.section("ingest"):
                result = engine.ingest([str(log), *map(str, args.also)], fmt="native")
            out["stored"] = result.stored
            with watch.section("baseline (BM25)"):
                out["methods"]["BM25 over raw turns"] = measure_bm25(engine, questions, sample_id, budget=args.budget)
            start = utcnow()  # the turns keep their own dates; the cycles and queries run on this clock
            measure = functools.partial(measure_engine, engine, questions, sample_id, k=args.k)
            with watch.section("queries"):
                out["methods"]["expengine before compaction"] = measure(budget=args.budget, now=start)
            out["sizes"]["expengine before compaction"] = store_size(engine)
            with watch.section("queries"):
                out["sweep"] = {f"before {b}": measure(budget=b, now=start) for b in args.sweep}
            now = after_cycles(start, args.cycles)
            if not args.no_ablation:
                with watch.section("ablation cycles"):
                    baseline_snapshot = engine.snapshot(reason="locomo benchmark: after ingest").id
                for label, steps in ABLATIONS:
                    with watch.section("ablation cycles"):
                        engine.restore(baseline_snapshot)
                        run_steps(engine, steps, args.cycles, start, label)
                    with watch.section("queries"):
                        out["methods"][label] = measure(budget=args.budget, now=now)
                    out["sizes"][label] = store_size(engine)
                with watch.section("ablation cycles"):
                    engine.restore(baseline_snapshot)
            with watch.section("compaction"):
                out["cycles"] = run_cycles(engine, args.cycles, start=start)
            with watch.section("queries"):
                out["methods"][AFTER_LABEL] = measure(budget=args.budget, now=now)
                out["sweep"].update((f"after {b}", measure(budget=b, now=now)) for b in args.sweep)
            out["sizes"][AFTER_LABEL] = store_size(engine)
            out["active_units"] = [{k: u[k] for k in ("id", "category", "text")} for u in engine.units(status="active")]
            out["notes"] = note_sample(engine)
            out["compaction_seconds"] = round(sum(c["seconds"] for c in out["cycles"]), 1)
            out["notes_seconds"] = round(sum(c["step_seconds"].get("notes") or 0 for c in out["cycles"]), 1)
    return out


def note_sample(engine: Any) -> list[dict[str, Any]]:
    """Every active note with its subject, day and the turns it came from (for the audit)."""
    notes = engine.units(kind="note", status="active")
    turns = dict(
        (i, (text, ts))
        for i, text, ts in engine.store.con.execute(
            "SELECT id, text, ts FROM records WHERE id IN (SELECT unnest(?))",
            [sorted({i for n in notes for i in n["source_ids"]})],
        ).fetchall()
    )
    return [
        {
            "id": n["id"],
            "subject": n["subject"],
            "as_of": n["as_of"].date().isoformat() if n["as_of"] else None,
            "text": n["text"],
            "sources": [
                {"id": i, "said_on": turns[i][1].date().isoformat(), "text": turns[i][0]}
                for i in n["source_ids"]
                if i in turns
            ],
        }
        for n in notes
    ]


_PRONOUN_SUBJECT = re.compile(r"(?i)^(?:it|this|that|they|he|she|there|here)\b")


def audit_notes(notes: list[dict[str, Any]], n: int = 20, seed: int = 7) -> dict[str, Any]:
    """n random notes (seeded), each checked for what makes a note unusable: no subject (the subject's
    name is missing or a bare pronoun opens it) and chatter (by `common.CHATTER`). A wrong date can only
    be judged by reading: each line shows the note's day beside the day its turn was said."""
    import random

    from common import CHATTER

    picked = random.Random(seed).sample(notes, min(n, len(notes)))
    for note in picked:
        problems = []
        if note["subject"] not in note["text"] or _PRONOUN_SUBJECT.match(note["text"]):
            problems.append("no subject")
        if CHATTER.search(note["text"]) and len(words(note["text"])) <= 6:
            problems.append("chatter")
        note["problems"] = problems
    return {
        "notes": len(notes),
        "sampled": len(picked),
        "unusable": sum(bool(p["problems"]) for p in picked),
        "sample": picked,
    }


def render_note_audit(audit: dict[str, Any]) -> str:
    lines = [
        f"Note audit: {audit['unusable']} of {audit['sampled']} random notes flagged unusable "
        f"({audit['notes']} active notes); each line: note ← its first turn (the day it was said)."
    ]
    for note in audit["sample"]:
        source = note["sources"][0] if note["sources"] else {"said_on": "?", "text": ""}
        flag = f" **{', '.join(note['problems'])}**" if note["problems"] else ""
        lines.append(
            f"- [{note['as_of']}] {' '.join(note['text'].split())[:200]}{flag} ← "
            f"({source['said_on']}) {' '.join(source['text'].split())[:160]}"
        )
    return "\n".join(lines)


# --- aggregation and report ---------------------------------------------------------------------------------
def mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(sum(kept) / len(kept), 4) if kept else None


def aggregate(conversations: list[dict[str, Any]]) -> dict[str, Any]:
    """Question-weighted means per method, per category and overall; sizes summed over conversations."""
    methods = list(conversations[0]["methods"]) if conversations else []
    summary: dict[str, Any] = {}
    for method in methods:
        rows = [r for c in conversations for r in c["methods"][method]]
        groups = {
            "overall": rows,
            **{f"{n} {CATEGORIES[n]}": [r for r in rows if r["category"] == n] for n in CATEGORIES},
        }
        entry: dict[str, Any] = {}
        for name, group in groups.items():
            entry[name] = {
                "questions": len(group),
                "evidence_recall": mean([r["evidence_recall"] for r in group]),
                "evidence_recall_shown": mean([r["evidence_recall_shown"] for r in group]),
                "answer_recall": mean([r["answer_recall"] for r in group]),
                "prompt_tokens": mean([r["tokens"] for r in group]),
                "unit_hits": mean([r["units"] for r in group]),
            }
        sizes = [c["sizes"].get(method) for c in conversations]
        if all(sizes):
            raw = sum(s["raw"] for s in sizes)
            kept = sum(s["active_plus_units"] for s in sizes)
            hot, raw_tokens = sum(s["hot_tokens"] for s in sizes), sum(s["raw_tokens"] for s in sizes)
            entry["size"] = {
                "raw": raw,
                "active": sum(s["active"] for s in sizes),
                "units": sum(s["units"] for s in sizes),
                "active_plus_units": kept,
                "share_of_raw": round(kept / raw, 4) if raw else None,
                "hot_tokens": hot,
                "raw_tokens": raw_tokens,
                "hot_share": round(hot / raw_tokens, 4) if raw_tokens else None,
            }
        summary[method] = entry
    return summary


def targets(summary: dict[str, Any], unusable: int | None = None) -> dict[str, Any]:
    """The issue's targets, each with the measured value and whether it is met (None: not measured)."""
    before = summary.get("expengine before compaction", {}).get("overall", {})
    after = summary.get(AFTER_LABEL, {}).get("overall", {})
    temporal = [
        summary.get(m, {}).get("2 temporal", {}).get("answer_recall")
        for m in ("expengine before compaction", AFTER_LABEL)
    ]
    bm25 = summary.get("BM25 over raw turns", {}).get("overall", {})
    size = summary.get(AFTER_LABEL, {}).get("size", {})

    def ratio(key: str) -> float | None:
        return round(after[key] / before[key], 4) if after.get(key) is not None and before.get(key) else None

    gain = before.get("evidence_recall"), bm25.get("evidence_recall")
    measured = {  # name: (value, limit, the value must be at least the limit)
        "hot_text_share_of_raw": (size.get("hot_share"), 0.40, False),
        "answer_recall_vs_before": (ratio("answer_recall"), 1.00, True),
        "evidence_recall_kept": (ratio("evidence_recall"), 0.95, True),
        "temporal_answer_recall_gain": (None if None in temporal else round(temporal[1] - temporal[0], 4), 0.10, True),
        "notes_unusable_of_20": (unusable, 1, False),
        "evidence_recall_over_bm25": (None if None in gain else round(gain[0] - gain[1], 4), 0.10, True),
    }
    return {
        name: {
            "value": value,
            "target": f"{'>=' if at_least else '<='} {limit:.2f}" if isinstance(limit, float) else f"<= {limit}",
            "met": None if value is None else (value >= limit if at_least else value <= limit),
        }
        for name, (value, limit, at_least) in measured.items()
    }


def render_tables(summary: dict[str, Any]) -> str:
    headers = [
        "method",
        "questions",
        "evidence recall",
        "evidence recall (shown)",
        "answer-token recall",
        "prompt tokens",
        "unit hits",
        "store (active + units) / raw",
        "hot text / raw text",
    ]
    blocks = []
    groups = ["overall", *(f"{n} {CATEGORIES[n]}" for n in CATEGORIES)]
    for group in groups:
        rows = []
        for method, entry in summary.items():
            g, size = entry[group], entry.get("size")
            store = f"{size['active']} + {size['units']} / {size['raw']} = {size['share_of_raw']:.2f}" if size else "—"
            hot = f"{size['hot_tokens']} / {size['raw_tokens']} = {size['hot_share']:.2f}" if size else "—"
            rows.append(
                [
                    method,
                    g["questions"],
                    g["evidence_recall"],
                    g["evidence_recall_shown"],
                    g["answer_recall"],
                    None if g["prompt_tokens"] is None else round(g["prompt_tokens"]),
                    g["unit_hits"],
                    store,
                    hot,
                ]
            )
        title = "Overall" if group == "overall" else f"Category {group}"
        blocks.append(f"### {title}\n\n" + table(headers, rows))
    return "\n\n".join(blocks)


def sweep_summary(conversations: list[dict[str, Any]], budgets: list[int]) -> dict[str, Any]:
    """Per budget, before and after compaction: question-weighted answer-token and evidence recall, and
    the prompt's mean tokens."""
    out: dict[str, Any] = {}
    for budget in budgets:
        for stage in ("before", "after"):
            rows = [r for c in conversations for r in c["sweep"].get(f"{stage} {budget}", [])]
            out[f"{stage} {budget}"] = {
                "questions": len(rows),
                "answer_recall": mean([r["answer_recall"] for r in rows]),
                "single_hop_answer_recall": mean([r["answer_recall"] for r in rows if r["category"] == 4]),
                "evidence_recall": mean([r["evidence_recall"] for r in rows]),
                "prompt_tokens": mean([r["tokens"] for r in rows]),
            }
    return out


def render_sweep(sweep: dict[str, Any], conversations: list[dict[str, Any]]) -> str:
    """The budget sweep, for all the conversations run and for each one."""
    if not sweep:
        return ""
    headers = [
        "conversations",
        "budget",
        "answer-token recall before → after",
        "single-hop answer recall",
        "evidence recall",
        "prompt tokens",
    ]
    groups = [("all", sweep)] + [(c["sample_id"], c["sweep"]) for c in conversations if len(conversations) > 1]
    rows = []
    for name, entry in groups:
        for budget in sorted({int(key.split()[1]) for key in entry}):
            b, a = entry[f"before {budget}"], entry[f"after {budget}"]
            rows.append(
                [
                    name,
                    budget,
                    f"{b['answer_recall']} → {a['answer_recall']}",
                    f"{b['single_hop_answer_recall']} → {a['single_hop_answer_recall']}",
                    f"{b['evidence_recall']} → {a['evidence_recall']}",
                    f"{round(b['prompt_tokens'] or 0)} → {round(a['prompt_tokens'] or 0)}",
                ]
            )
    return "### Budget sweep (before → after compaction)\n\n" + table(headers, rows)


def render_targets(checks: dict[str, Any]) -> str:
    rows = [
        [name, check["value"], check["target"], {True: "met", False: "MISSED", None: "—"}[check["met"]]]
        for name, check in checks.items()
    ]
    return table(["target", "measured", "wanted", ""], rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON (default: %(default)s)")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--questions", type=int, default=None, help="only the first N questions per conversation")
    parser.add_argument(
        "--sessions",
        type=int,
        default=None,
        help="only the first N sessions per conversation (keeps questions whose evidence is in them)",
    )
    parser.add_argument("--no-ablation", action="store_true", help="skip the step-by-step ablation")
    parser.add_argument(
        "--only", nargs="*", default=[], metavar="ID", help="only these conversations (e.g. conv-42 conv-43)"
    )
    parser.add_argument(
        "--sweep",
        type=int,
        nargs="*",
        default=[],
        metavar="BUDGET",
        help="also measure at these budgets before and after compaction (e.g. 250 500 1000)",
    )
    parser.add_argument(
        "--also",
        type=Path,
        nargs="*",
        default=[],
        help="native logs ingested into every conversation's store too (the Chinese sample logs: a mixed store)",
    )
    add_cycle_options(
        parser, name="locomo", k_default=100, k_help="hits asked for before the budget cut (default: %(default)s)"
    )
    return finish_args(parser, argv, script="locomo.py")


def run(args: argparse.Namespace, *, embedder: Any = None, echo: bool = True) -> dict[str, Any]:
    with torch_threads(args.threads):
        return _run(args, embedder=embedder, echo=echo)


def _run(args: argparse.Namespace, *, embedder: Any, echo: bool) -> dict[str, Any]:
    if not args.data.exists():
        raise SystemExit(f"LoCoMo data not found: {args.data} (pass --data PATH)")
    samples = [
        s for s in json.loads(args.data.read_text(encoding="utf-8")) if not args.only or s["sample_id"] in args.only
    ]
    samples = samples[: args.conversations]
    watch = Stopwatch()
    with watch.section("model load"):
        embedder = embedder or load_embedder()
    conversations = []
    for sample in samples:
        started = time.perf_counter()
        conversations.append(run_conversation(sample, embedder=embedder, args=args, watch=watch))
        if echo:
            c = conversations[-1]
            print(
                f"{c['sample_id']}: {c['turns']} turns, {c['questions']} questions, "
                f"{time.perf_counter() - started:.0f} s",
                file=sys.stderr,
            )
    summary = aggregate(conversations)
    sweep = sweep_summary(conversations, args.sweep)
    note_audit = audit_notes([n for c in conversations for n in c.pop("notes")])
    checks = targets(summary, note_audit["unusable"] if note_audit["sampled"] else None)
    audit = audit_units([u for c in conversations for u in c.pop("active_units")])
    for c in conversations:  # per-question rows stay in memory; the JSON keeps each conversation's means
        c["methods"] = {method: entry["overall"] for method, entry in aggregate([c]).items()}
        c["sweep"] = sweep_summary([c], args.sweep)
    report = {
        "benchmark": "locomo",
        "data": str(args.data),
        "machine": machine(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "summary": summary,
        "sweep": sweep,
        "targets": checks,
        "unit_audit": audit,
        "note_audit": note_audit,
        "seconds": watch.to_dict(),
        "conversations": conversations,
    }
    return publish(report, args, section="locomo", text=render_report(report), echo=echo)


def render_report(report: dict[str, Any]) -> str:
    seconds = ", ".join(f"{k} {v}" for k, v in report["seconds"].items())
    conversations = report["conversations"]
    blocks = [
        f"`{report['settings']['command']}`: {len(conversations)} conversations, "
        f"{sum(c['turns'] for c in conversations)} turns, {sum(c['questions'] for c in conversations)} questions "
        f"({report['machine']}).",
        render_tables(report["summary"]),
        render_sweep(report["sweep"], report["conversations"]),
        "### Targets\n\n" + render_targets(report["targets"]),
        render_audit(report["unit_audit"], "all conversations, after compaction"),
        render_note_audit(report["note_audit"]),
        "Compaction (3 cycles) per conversation: "
        + ", ".join(
            f"{c['sample_id']} {c['compaction_seconds']} s (notes {c['notes_seconds']} s)" for c in conversations
        )
        + ".",
        f"Seconds: {seconds}.",
    ]
    return "\n\n".join(b for b in blocks if b)


if __name__ == "__main__":
    run(parse_args())
