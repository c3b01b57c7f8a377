"""Refinement benchmark: tau-bench airline runs (rules) and one LoCoMo conversation (facts).

No compaction clustering is run here, so refinement uses its documented fallback grouping (per
agent + tool, corrections, per speaker for patterned facts, per speaker + day for other statements).
Cycle 1 uses the model (budget --max-llm-calls); what the budget leaves is finished by a
template-only cycle 2, so every cluster gets its unit and the model / template shares are honest.

    python bench/refine.py [--tau PATH] [--locomo PATH] [--sample 0] [--max-llm-calls 20]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from expengine.engine import Engine  # noqa: E402

DEFAULT_TAU = ROOT.parent / "shared/data/tau_bench_airline/gpt-4o-airline_tasks00-39.json"
DEFAULT_LOCOMO = ROOT.parent / "shared/data/locomo/locomo_dev.json"


def locomo_events(path: Path, sample: int) -> list[dict]:
    """One LoCoMo conversation as native message records: id '<sample_id>:<dia_id>', 'Speaker: text'."""
    data = json.loads(path.read_text(encoding="utf-8"))[sample]
    conversation, events = data["conversation"], []
    n = 1
    while f"session_{n}" in conversation:
        when = dt.datetime.strptime(conversation[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        for i, turn in enumerate(conversation[f"session_{n}"]):
            events.append(
                {
                    "id": f"{data['sample_id']}:{turn['dia_id']}",
                    "ts": (when + dt.timedelta(seconds=i)).isoformat() + "Z",
                    "kind": "message",
                    "agent": "locomo",
                    "session": f"session_{n}",
                    "role": "user",
                    "content": f"{turn['speaker']}: {turn['text']}",
                }
            )
        n += 1
    return events


def run(name: str, store: Path, inputs: list[str], max_llm_calls: int, mode: str) -> dict:
    with Engine(store=store, overrides={"llm.mode": mode, "llm.max_tokens": 200}) as engine:
        started = time.perf_counter()
        ingested = engine.ingest(inputs)
        ingest_s = time.perf_counter() - started
        first = engine.refine(run_id=f"{name}-1", max_llm_calls=max_llm_calls)
        engine.config.llm.mode = "template"
        second = engine.refine(run_id=f"{name}-2")
        units = engine.units(status="active")
        all_units = engine.units()
    written = first.units_written + second.units_written
    answered = first.llm_calls - first.llm_failures
    by_method = {m: sum(1 for u in all_units if u["method"] == m) for m in ("llm", "template")}
    return {
        "dataset": name,
        "records": ingested.stored,
        "ingest_seconds": round(ingest_s, 1),
        "clusters": first.clusters_total,
        "clusters_not_concrete": first.clusters_not_concrete + second.clusters_not_concrete,
        "units_written": written,
        "units_active": len(units),
        "units_superseded": sum(1 for u in all_units if u["status"] == "superseded"),
        "units_by_method": by_method,
        "share_llm": round(by_method["llm"] / max(1, written), 3),
        "share_template": round(by_method["template"] / max(1, written), 3),
        "llm_calls": first.llm_calls,
        "llm_failures_malformed_or_timeout": first.llm_failures,
        "grounding_rejected": first.grounding_rejected,
        "share_rejected_by_grounding": round(first.grounding_rejected / max(1, answered), 3),
        "llm_error": first.llm_error,
        "clusters_left_after_cycle_1": len(first.clusters_left),
        "refine_seconds_cycle_1": first.seconds,
        "refine_seconds_cycle_2": second.seconds,
        "seconds_per_unit": round((first.seconds + second.seconds) / max(1, written), 3),
        "seconds_per_llm_unit_attempt": round(first.seconds / max(1, first.units_written), 3),
        "archived_sources": first.archiving + second.archiving,
        "rejection_reasons_sample": first.rejection_reasons[:8],
        "examples": [
            {k: u[k] for k in ("id", "kind", "method", "support", "confidence", "success_rate", "text")}
            for u in sorted(units, key=lambda u: (-u["support"], u["id"]))[:5]
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tau", type=Path, default=DEFAULT_TAU)
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--sample", type=int, default=0, help="which LoCoMo conversation")
    parser.add_argument("--max-llm-calls", type=int, default=20, help="model calls in cycle 1, per dataset")
    parser.add_argument("--mode", default="model", choices=("model", "auto", "template"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/refine.json")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(run("tau_bench_airline", Path(tmp) / "tau", [str(args.tau)], args.max_llm_calls, args.mode))
        conversation = Path(tmp) / "locomo.jsonl"
        conversation.write_text("".join(json.dumps(e) + "\n" for e in locomo_events(args.locomo, args.sample)))
        results.append(
            run(f"locomo_sample{args.sample}", Path(tmp) / "locomo", [str(conversation)], args.max_llm_calls, args.mode)
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"max_llm_calls": args.max_llm_calls, "mode": args.mode, "results": results}, indent=2, default=str)
        + "\n"
    )
    for result in results:
        print(
            f"\n== {result['dataset']}: {result['units_written']} units from {result['clusters']} clusters "
            f"(llm {result['share_llm']:.0%}, template {result['share_template']:.0%}); "
            f"{result['llm_calls']} model calls, {result['llm_failures_malformed_or_timeout']} malformed/timed out, "
            f"{result['grounding_rejected']} rejected by grounding ({result['share_rejected_by_grounding']:.0%} of "
            f"answers); {result['seconds_per_unit']} s per unit"
        )
        for example in result["examples"]:
            print(
                f"- [{example['kind']}/{example['method']}] support {example['support']}, "
                f"confidence {example['confidence']:.2f}: {example['text']}"
            )
    print(f"\nsaved {args.out}")


if __name__ == "__main__":
    main()
