"""One agent, many users: do users' memories stay apart in one store, and what does sharing cost?

    python bench/users.py locomo [--conversations N] [--questions N] [--cycles 3] [--skip-separate]
    python bench/users.py sample
    python bench/users.py memorybank [--users N] [--cycles 3]
    python bench/users.py p95 [--size 10000] [--queries 100] [--workdir DIR]

- locomo: the LoCoMo conversations in ONE store (agent `locomo`, each conversation a user: both
  speakers are that user's world), compacted `--cycles` times; every category 1-4 question asked
  with `user=` its conversation (`bench/locomo.py`'s asking and scoring: k 100, budget 1,000,
  expand). Leaks: prompt lines from another user (a line holding six words in a row that only
  another conversation's turns hold; `personal_lines`: that only one other user's records hold),
  and hits or evidence lines whose record or unit is another user's. Against five separate stores compacted the same way: evidence and answer-token recall.
  Then erasure: `forget(users=[first conversation])`; every word that only that conversation said
  (5+ letters, none the software itself writes: expengine's own source words) is looked for, as a
  word, in every file of the store folder (snapshots' xz databases and Parquet chunks unpacked) and
  in every text column of the store's database; the other conversations' recall is measured again.
- sample: the support-bot sample log in one store, compacted once; each user's own questions
  ("which seat do I prefer", "what did I book"...) with `user=`: lines and hits of another user's
  personal records.
- memorybank: the MemoryBank users' Chinese conversations in one store (multilingual model) against
  one store each: agreement@5 with the silver turn (the English store's top hit for the English
  question, one store per user), right after ingest and after `--cycles` compactions; leaks as above.
- p95: `bench/query.py`'s compacted copies of the sample logs at `--size` memories (the sample's
  users in each copy); p50/p95 of `Engine.query(k=5, touch=False)` on a warm engine, each query
  with and without `user=` (a user drawn per query), in alternating order.
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CYCLE_SPACING, REPO, TEMPLATE_ONLY, load_embedder, run_cycles  # noqa: E402
from locomo import (  # noqa: E402
    DEFAULT_DATA,
    conversation_questions,
    conversation_turns,
    mean,
    measure_engine,
    native_events,
)

SHINGLE = 6  # words in a row that make a prompt line another user's
WORD = re.compile(r"\w+")
ALPHA = re.compile(r"[^\W\d_]{5,}")


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def shingles(text: str, n: int = SHINGLE) -> set[tuple[str, ...]]:
    w = _words(text)
    if len(w) < n:
        return {tuple(w)} if len(w) >= 3 else set()
    return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}


class Owners:
    """Which user said what: per user, the runs of words (shingles) and the words of their records;
    the shared records' too."""

    def __init__(self, texts: dict[str | None, list[str]]):
        self.said = {user: set().union(*(shingles(t) for t in ts)) if ts else set() for user, ts in texts.items()}
        self.words = {user: {w for t in ts for w in _words(t)} for user, ts in texts.items()}

    def foreign_lines(self, prompt: str, user: str, *, personal: bool = False) -> list[str]:
        """Prompt lines quoting another user: `SHINGLE` words in a row that only that user's records hold,
        among them a word only they said (a common phrase, "it's cool to see how", is no one's). Of
        another user, that is: not the asker nor a shared record; `personal`: of one other user only,
        no second user's records holding that run or that word (a phrase several people's requests
        share, "I ordered travel adapters last week", is nobody's personal data)."""
        own = self.said.get(user, set()) | self.said.get(None, set())
        own_words = self.words.get(user, set()) | self.words.get(None, set())
        out = []
        for line in prompt.splitlines()[1:]:  # the header is the renderer's
            found = shingles(line.replace("…", " "))
            for other, theirs in self.said.items():
                if other in (user, None):
                    continue
                if personal:
                    rest = [u for u in self.said if u != other]
                    runs = theirs - set().union(*(self.said[u] for u in rest))
                    theirs_only = self.words[other] - set().union(*(self.words[u] for u in rest))
                else:
                    runs, theirs_only = theirs - own, self.words[other] - own_words
                if any(set(run) & theirs_only for run in found & runs):
                    out.append(line)
                    break
        return out


def foreign_hits(engine: Any, result: Any, user: str) -> int:
    """Hits and evidence lines whose record or unit belongs to another user (or a shared unit quoting one)."""
    from expengine.store.users import visible, visible_unit

    con = engine.store.con
    records = {h.id for h in result.hits if h.type == "memory"} | {e.id for h in result.hits for e in h.expanded}
    users = dict(
        con.execute("SELECT id, user FROM records WHERE id IN (SELECT unnest(?))", [sorted(records)]).fetchall()
    )
    units = {
        i: (u, q)
        for i, u, q in con.execute(
            "SELECT id, user, quotes FROM units WHERE id IN (SELECT unnest(?))",
            [[h.id for h in result.hits if h.type == "unit"]],
        ).fetchall()
    }
    bad = sum(not visible(users.get(i), user) for i in records)
    return bad + sum(not visible_unit(*units[h.id], user) for h in result.hits if h.type == "unit" and h.id in units)


def leaks(engine: Any, owners: Owners, asked: list[tuple[str, str]], k: int = 5, budget: int | None = None) -> dict:
    lines = personal = total = hits = 0
    examples: list[str] = []
    for user, text in asked:
        result = engine.query(text, k=k, touch=False, budget=budget, expand=True, user=user)
        total += max(0, len(result.prompt.splitlines()) - 1)
        found = owners.foreign_lines(result.prompt, user)
        lines += len(found)
        personal += len(owners.foreign_lines(result.prompt, user, personal=True))
        hits += foreign_hits(engine, result, user)
        examples += [f"{user}: {text} -> {line}" for line in found[: 3 - len(examples)]]
    return {
        "queries": len(asked),
        "prompt_lines": total,
        "foreign_lines": lines,
        "foreign_share": round(lines / total, 6) if total else 0.0,
        "personal_lines": personal,
        "personal_share": round(personal / total, 6) if total else 0.0,
        "foreign_hits": hits,
        "examples": examples,
    }


def recall(scores: list[dict]) -> dict:
    return {
        "evidence_recall": round(mean([s["evidence_recall"] for s in scores]) or 0, 4),
        "answer_recall": round(mean([s["answer_recall"] for s in scores]) or 0, 4),
        "questions": len(scores),
    }


# --- LoCoMo ----------------------------------------------------------------------------------------------
def locomo(args: argparse.Namespace) -> dict:
    from expengine import Engine
    from expengine.store.db import utcnow

    samples = json.loads(args.data.read_text(encoding="utf-8"))[: args.conversations]
    embedder = load_embedder()
    overrides = dict(TEMPLATE_ONLY)
    convs = []
    for sample in samples:
        turns = conversation_turns(sample)
        questions = conversation_questions(sample, {t.dia_id for t in turns}, limit=args.questions)
        events = [{**e, "agent": "locomo", "user": sample["sample_id"]} for e in native_events(turns, "locomo")]
        convs.append((sample["sample_id"], turns, questions, events))
    owners = Owners({sid: [t.content for t in turns] for sid, turns, _, _ in convs})
    out: dict[str, Any] = {"conversations": len(convs), "questions": sum(len(q) for _, _, q, _ in convs)}
    with tempfile.TemporaryDirectory(prefix="users-locomo-") as tmp:
        separate: dict[str, list] = {}
        started = time.perf_counter()
        for sid, _, questions, events in convs:
            log = Path(tmp) / f"{sid}.jsonl"
            log.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
            if args.skip_separate:
                continue
            with Engine(store=Path(tmp) / f"alone-{sid}", embedder=embedder, overrides=overrides) as engine:
                engine.ingest([str(log)], fmt="native")
                run_cycles(engine, args.cycles, start=utcnow())
                separate[sid] = measure_engine(engine, questions, sid, budget=1000, k=100)
        out["separate_seconds"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        store = Path(tmp) / "together"
        with Engine(store=store, embedder=embedder, overrides=overrides) as engine:
            engine.ingest([str(Path(tmp) / f"{sid}.jsonl") for sid, *_ in convs], fmt="native")
            run_cycles(engine, args.cycles, start=utcnow())
            together = {
                sid: measure_engine(engine, questions, sid, budget=1000, k=100, user=sid)
                for sid, _, questions, _ in convs
            }
            asked = [(sid, q.text) for sid, _, questions, _ in convs for q in questions]
            out["leaks"] = leaks(engine, owners, asked, k=100, budget=1000)
            out["together_seconds"] = round(time.perf_counter() - started, 1)
            out["separate"] = recall([s for v in separate.values() for s in v]) if separate else None
            out["together"] = recall([s for v in together.values() for s in v])
            gone = convs[0][0]
            out["erasure"] = erase(engine, store, gone, convs, together)
    return out


def unpacked(path: Path) -> bytes:
    """A file's bytes as a grep for a person's words must read them: a snapshot's xz-packed database
    unpacked, a snapshot's zstd Parquet chunk with its values as text."""
    if path.suffix == ".xz":
        return lzma.decompress(path.read_bytes())
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return path.read_bytes() + str(pq.read_table(path).to_pylist()).encode()
    return path.read_bytes()


def erase(engine: Any, store: Path, gone: str, convs: list, before: dict[str, list]) -> dict:
    """`forget(users=[gone])`, then look for the words only `gone` said, in the files and the tables."""
    # what the store wrote for the other users (notes turn "I shine" into "Joanna shines") is theirs too
    written = " ".join(
        str(text)
        for table in ("records", "units")
        for (text,) in engine.store.con.execute(
            f"SELECT text FROM {table} WHERE user IS NOT NULL AND user <> ?", [gone]
        ).fetchall()
    )
    planned = engine.forget(users=[gone], dry_run=True)
    done = engine.forget(users=[gone])
    theirs = {w for t in convs[0][1] for w in ALPHA.findall(t.content.lower())}
    others = (
        {  # what the other users said, or were asked about (their questions are in the query log)
            w
            for _, turns, questions, _ in convs[1:]
            for text in [t.content for t in turns] + [q.text for q in questions]
            for w in ALPHA.findall(text.lower())
        }
        | set(ALPHA.findall(written.lower()))
    )
    # not the words the software itself writes (report keys, config and schema names: "notes", "window")
    system = {
        w
        for path in (REPO / "expengine").rglob("*.*")
        if path.suffix in (".py", ".html")
        for w in ALPHA.findall(path.read_text(encoding="utf-8").lower())
    }
    unique = sorted(theirs - others - system)
    in_files: dict[str, int] = {}
    left: set[str] = set()
    for path in store.rglob("*"):
        if path.is_file():
            data = unpacked(path).lower()
            found = {w for w in unique if re.search(rb"\b" + w.encode() + rb"\b", data)}
            if found:
                in_files[str(path.relative_to(store))] = len(found)
                left |= found
    con = engine.store.con
    in_tables = 0
    for table, column in con.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE data_type = 'VARCHAR'"
    ).fetchall():
        texts = set(_words(" ".join(str(v) for (v,) in con.execute(f'SELECT "{column}" FROM "{table}"').fetchall())))
        in_tables += len(texts & set(unique))
        left |= texts & set(unique)
    after = {sid: measure_engine(engine, q, sid, budget=1000, k=100, user=sid) for sid, _, q, _ in convs[1:]}
    return {
        "user": gone,
        "planned_records": planned.records,
        "records": done.records,
        "units_deleted": done.units_deleted,
        "query_log": done.query_log,
        "snapshots": done.snapshots,
        "unique_words": len(unique),
        "words_in_files": in_files,
        "words_in_tables": in_tables,
        "words_left": sorted(left)[:20],
        "others_before": recall([s for sid, v in before.items() if sid != gone for s in v]),
        "others_after": recall([s for v in after.values() for s in v]),
    }


# --- the support-bot sample --------------------------------------------------------------------------------
OWN_QUESTIONS = (
    "which seat do I prefer",
    "what did I book",
    "where is my order",
    "what is my meal preference",
    "which airline do I avoid",
    "what did I ask about the weather",
)


def sample(args: argparse.Namespace) -> dict:
    from expengine import Engine

    log = REPO / "sample_logs" / "support_bot.jsonl"
    with tempfile.TemporaryDirectory(prefix="users-sample-") as tmp:
        with Engine(store=Path(tmp) / "s", embedder=load_embedder(), overrides=dict(TEMPLATE_ONLY)) as engine:
            engine.ingest([str(log)])
            texts: dict[str | None, list[str]] = {}
            for user, text in engine.store.con.execute("SELECT user, text FROM records").fetchall():
                texts.setdefault(user, []).append(text)  # as stored and shown (tool JSON with sorted keys)
            owners = Owners(texts)
            users = sorted(u for u in texts if u)
            engine.compact()
            asked = [(u, q) for u in users for q in OWN_QUESTIONS]
            return {"users": len(users), **leaks(engine, owners, asked)}


# --- MemoryBank ----------------------------------------------------------------------------------------------
def memorybank(args: argparse.Namespace) -> dict:
    from memorybank import DEFAULT_DATA as MB_DATA
    from memorybank import cited, parallel_events, top_ids

    from expengine import Engine
    from expengine.store.db import utcnow

    people = json.loads(MB_DATA.read_text(encoding="utf-8"))["users"][: args.users]
    cn_over = {"embedder.model": "auto", "llm.mode": "template"}
    en_over = {"embedder.model": "minilm", "llm.mode": "template"}
    per_user = []
    for index, person in enumerate(people):
        events = parallel_events(person)
        uid = f"mb{index}"
        for lang in events:
            events[lang] = [{**e, "id": f"{uid}:{e['id']}", "user": uid} for e in events[lang]]
        per_user.append((uid, events, list(zip(person["questions_en"], person["questions_cn"]))))
    owners = Owners({uid: [e["content"] for e in ev["cn"]] for uid, ev, _ in per_user})
    out: dict[str, Any] = {"users": len(per_user), "questions": sum(len(q) for *_, q in per_user)}
    with tempfile.TemporaryDirectory(prefix="users-mb-") as tmp:
        silver: dict[str, list] = {}
        alone: dict[str, list[list[bool]]] = {"ingest": [], "compacted": []}
        for uid, events, questions in per_user:
            logs = {}
            for lang in ("en", "cn"):
                logs[lang] = Path(tmp) / f"{uid}-{lang}.jsonl"
                logs[lang].write_text("\n".join(json.dumps(e, ensure_ascii=False) for e in events[lang]), "utf-8")
            with Engine(store=Path(tmp) / f"{uid}-en", overrides=en_over) as en:
                en.ingest([str(logs["en"])])
                silver[uid] = [top_ids(en, q_en, 1) for q_en, _ in questions]
            with Engine(store=Path(tmp) / f"{uid}-cn", overrides=cn_over) as cn:
                cn.ingest([str(logs["cn"])])
                alone["ingest"].append(_agree(cn, silver[uid], questions, args.k, cited, None))
                start = utcnow()
                for n in range(args.cycles):
                    cn.compact(now=start + CYCLE_SPACING * (n + 1))
                alone["compacted"].append(_agree(cn, silver[uid], questions, args.k, cited, None))
        with Engine(store=Path(tmp) / "together", overrides=cn_over) as cn:
            cn.ingest([str(Path(tmp) / f"{uid}-cn.jsonl") for uid, *_ in per_user])
            together = {"ingest": [_agree(cn, silver[u], q, args.k, cited, u) for u, _, q in per_user]}
            start = utcnow()
            for n in range(args.cycles):
                cn.compact(now=start + CYCLE_SPACING * (n + 1))
            together["compacted"] = [_agree(cn, silver[u], q, args.k, cited, u) for u, _, q in per_user]
            out["leaks"] = leaks(cn, owners, [(u, q_cn) for u, _, qs in per_user for _, q_cn in qs], k=args.k)
    for when in ("ingest", "compacted"):
        out[f"agreement@{args.k} separate ({when})"] = _share(alone[when])
        out[f"agreement@{args.k} together ({when})"] = _share(together[when])
        out[f"differ ({when})"] = [  # the questions one store answers and the other does not
            f"{uid} {'separate' if a else 'together'}: {q_cn}"
            for (uid, _, qs), row_a, row_t in zip(per_user, alone[when], together[when])
            for (_, q_cn), a, t in zip(qs, row_a, row_t)
            if a != t
        ]
    return out


def _agree(engine: Any, silver: list, questions: list, k: int, cited: Any, user: str | None) -> list[bool]:
    if user is None:
        return [bool(s) and s[0] in cited(engine, q_cn, k) for s, (_, q_cn) in zip(silver, questions)]
    return [
        bool(s) and s[0] in {i for h in engine.query(q_cn, k=k, touch=False, user=user).hits for i in h.source_ids}
        for s, (_, q_cn) in zip(silver, questions)
    ]


def _share(rows: list[list[bool]]) -> float:
    flat = [x for row in rows for x in row]
    return round(sum(flat) / len(flat), 4) if flat else 0.0


# --- latency -----------------------------------------------------------------------------------------------------
def p95(args: argparse.Namespace) -> dict:
    from query import base_store, build_store, query_texts

    from expengine import Engine

    embedder = load_embedder()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="users-p95-"))
    base = work / "base"
    base_info = base_store(base, REPO / "sample_logs", embedder)
    store = work / f"store-{args.size}"
    built = None
    if not store.exists():
        built = build_store(store, base, max(1, round(args.size / base_info["records"])), embedder)
    texts = query_texts(REPO / "sample_logs", DEFAULT_DATA, args.queries)
    rng = random.Random(7)
    users = [f"u-{n}" for n in range(101, 113)]
    times: dict[str, list[float]] = {"without user": [], "with user": []}
    with Engine(store=store, embedder=embedder) as engine:
        engine.warm()
        for text in texts[:10]:
            engine.query(text, k=5, touch=False)
        for n, text in enumerate(texts):
            user = rng.choice(users)
            order = [None, user] if n % 2 else [user, None]
            for who in order:
                started = time.perf_counter()
                engine.query(text, k=5, touch=False, user=who)
                times["with user" if who else "without user"].append((time.perf_counter() - started) * 1000)
    return {
        "size": args.size,
        "built": built,
        **{
            k: {"p50_ms": round(statistics.median(v), 2), "p95_ms": round(statistics.quantiles(v, n=20)[18], 2)}
            for k, v in times.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("locomo", "sample", "memorybank", "p95"))
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON")
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--questions", type=int, default=None, help="per conversation")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--skip-separate", action="store_true", help="locomo: the one store only (leaks, erasure)")
    parser.add_argument("--users", type=int, default=None, help="MemoryBank users")
    parser.add_argument("--k", type=int, default=5, help="MemoryBank agreement@k")
    parser.add_argument("--size", type=int, default=10_000, help="p95: memories in the store")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    report = {"locomo": locomo, "sample": sample, "memorybank": memorybank, "p95": p95}[args.what](args)
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
