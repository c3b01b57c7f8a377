"""MemoryBank agreement: do Chinese questions find the same turns as their English translations?

    python bench/memorybank.py [--data PATH] [--users N] [--k 5]

MemoryBank (MIT) holds 10-day conversations in Chinese (`cn`) and a parallel English translation
(`en`). Each language goes into its own fresh store, with the same record id for parallel turns
(`<date>:<n>:query|response`; days whose turn counts differ are left out). For each probing
question, the English store's top hit (right after ingest) is the silver evidence; agreement@k is the
share of the Chinese questions whose top k hits cite it (a hit's `source_ids`: a turn itself, or the
turns a note came from). Measured right after ingest and after `--cycles` compactions (one nightly
clock tick apart) of both stores: against that silver, and against the compacted English store's top
hit (the turns it cites), with the hot text share (`Engine.stats().hot_share`: active
memories' and active units' tokens against every stored turn's) of both stores. Run for MiniLM on
the Chinese store and for the default (`embedder.model = "auto"`: the multilingual model).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CYCLE_SPACING, SHARED_DATA  # noqa: E402

DEFAULT_DATA = SHARED_DATA / "memorybank" / "memorybank_dev.json"


def parallel_events(user: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Native message records per language, same ids for parallel turns."""
    out: dict[str, list[dict[str, Any]]] = {"cn": [], "en": []}
    for date, cn_turns in user["cn"]["history"].items():
        en_turns = user["en"]["history"].get(date)
        if en_turns is None or len(en_turns) != len(cn_turns):
            continue
        for n, pair in enumerate(zip(cn_turns, en_turns)):
            for field, role in (("query", "user"), ("response", "assistant")):
                for lang, turn in zip(("cn", "en"), pair):
                    out[lang].append(
                        {
                            "id": f"{date}:{n}:{field}",
                            "ts": f"{date}T12:{n:02d}:0{int(role == 'assistant')}",
                            "kind": "message",
                            "role": role,
                            "agent": "companion",
                            "content": turn[field],
                        }
                    )
    return out


def top_ids(engine: Any, question: str, k: int) -> list[str]:
    return [h.id for h in engine.query(question, k=k, touch=False).hits]


def cited(engine: Any, question: str, k: int) -> set[str]:
    """The turns the top k hits stand for: a memory's own id and merged ids, a note's sources."""
    return {i for h in engine.query(question, k=k, touch=False).hits for i in h.source_ids}


def compact(engine: Any, cycles: int) -> float:
    from expengine.clock import utcnow

    started, start = time.perf_counter(), utcnow()
    for n in range(cycles):
        engine.compact(now=start + CYCLE_SPACING * (n + 1))
    return time.perf_counter() - started


def run(data: Path, users: int | None, k: int, cn_model: str, cycles: int, encoder: str = "auto") -> dict[str, Any]:
    from expengine.engine import Engine

    agree, agree_after, agree_both, texts, seconds, compact_s = [], [], [], 0, 0.0, 0.0
    hot = {"en": [0, 0], "cn": [0, 0]}
    for index, user in enumerate(json.loads(data.read_text(encoding="utf-8"))["users"][:users]):
        events = parallel_events(user)
        with tempfile.TemporaryDirectory() as tmp:
            stores = {}
            for lang in ("en", "cn"):
                log = Path(tmp) / f"{lang}.jsonl"
                log.write_text("\n".join(json.dumps(e, ensure_ascii=False) for e in events[lang]), encoding="utf-8")
                overrides = (
                    {"embedder.model": cn_model}
                    if lang == "cn"
                    else {"embedder.model": "minilm", "embedder.encoder": encoder}
                )
                engine = Engine(store=Path(tmp) / lang, overrides={**overrides, "llm.mode": "template"})
                started = time.perf_counter()
                engine.ingest([str(log)])
                if lang == "cn":
                    seconds += time.perf_counter() - started
                    texts += len(events[lang])
                stores[lang] = engine
            questions = list(zip(user["questions_en"], user["questions_cn"]))
            silver = [top_ids(stores["en"], q_en, 1) for q_en, _ in questions]
            agree += [bool(s) and s[0] in cited(stores["cn"], q_cn, k) for s, (_, q_cn) in zip(silver, questions)]
            for lang, engine in stores.items():
                took = compact(engine, cycles)
                compact_s += took if lang == "cn" else 0.0
                stats = engine.stats()
                hot[lang][0] += stats.hot_tokens
                hot[lang][1] += stats.raw_tokens
            agree_after += [bool(s) and s[0] in cited(stores["cn"], q_cn, k) for s, (_, q_cn) in zip(silver, questions)]
            # both stores compacted: the English top hit's turns against the Chinese top k's
            agree_both += [
                bool(cited(stores["en"], q_en, 1) & cited(stores["cn"], q_cn, k)) for q_en, q_cn in questions
            ]
            for engine in stores.values():
                engine.close()
        print(
            f"user {index}: agreement so far {sum(agree) / len(agree):.3f}, after compaction "
            f"{sum(agree_after) / len(agree_after):.3f}",
            file=sys.stderr,
        )
    return {
        "cn_model": cn_model,
        f"agreement@{k}": round(sum(agree) / len(agree), 3),
        f"agreement@{k} after {cycles} cycles": round(sum(agree_after) / len(agree_after), 3),
        f"agreement@{k} after {cycles} cycles, both stores compacted": round(sum(agree_both) / len(agree_both), 3),
        "hot_share_cn": round(hot["cn"][0] / hot["cn"][1], 4),
        "hot_share_en": round(hot["en"][0] / hot["en"][1], 4),
        "questions": len(agree),
        "cn_ingest_records_per_s": round(texts / seconds, 1),
        "cn_compaction_s_per_user": round(compact_s / max(index + 1, 1), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--users", type=int, default=None)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=3, help="compactions before the second measure")
    args = parser.parse_args()
    rows = [run(args.data, args.users, args.k, model, args.cycles) for model in ("minilm", "auto")]
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
