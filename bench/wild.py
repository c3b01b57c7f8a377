"""Real logs from the wild: does `expengine ingest PATH` (default `--format auto`) keep what coding agents
really write, and what does the memory then answer?

    python bench/wild.py [--data DIR] [--only SUBSTRING] [--no-compact] [--out PATH]

`--data` (default ../shared/data/wild) holds one folder per tool. Each log file is ingested by a child
process of its own into its folder's store, so its peak memory (ru_maxrss, the encoder included) is its
own. Reported per file: lines by type, lines that yield records, are skipped or rejected, content lines
(user, assistant, tool calls and results) that yield records, redactions by kind, seconds, peak MB.
Then each store is compacted once and asked "how do I run the tests", "how do I build it" and its
most frequent error; the first lines of each prompt block are shown. Targets (issue "real logs"):
>= 95% of content lines stored, <= 1% of lines rejected, 0 ids/timestamps/paths redacted, < 300 MB
peak for a 3 MB session.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_DATA = REPO / ".." / "shared" / "data" / "wild"
SUFFIXES = (".jsonl", ".json", ".traj", ".md")  # .md: Aider histories and Gemini CLI /chat share exports
QUESTIONS = ("how do I run the tests", "how do I build it")
OVERRIDES = {"llm.mode": "template"}


def line_type(obj: Any) -> str:
    """A line's type as its tool names it (`progress`, `response_item:function_call`, `assistant:tool_use`)."""
    if not isinstance(obj, dict):
        return type(obj).__name__
    kind = str(obj.get("type") or obj.get("kind") or "object")
    if obj.get("isMeta"):  # text the client injected (hook output, command caveats), not a user's words
        return f"{kind}:meta"
    payload = obj.get("payload")
    if isinstance(payload, dict) and payload.get("type"):
        return f"{kind}:{payload['type']}"
    content = (obj.get("message") or {}).get("content") if isinstance(obj.get("message"), dict) else None
    if isinstance(content, list):
        blocks = sorted({str(b.get("type")) for b in content if isinstance(b, dict)})
        return f"{kind}:{','.join(blocks)}"
    return kind


def is_content(kind: str) -> bool:
    """A line that says something: a user's or assistant's words, a tool call or its result (thinking and
    injected instructions are skipped by design, so not counted here)."""
    if kind == "gemini":  # a Gemini CLI JSONL session's model turn
        return True
    if kind.startswith(("user", "assistant")) and not kind.endswith(":meta"):
        return "thinking" not in kind or any(b in kind for b in ("text", "tool_use", "tool_result"))
    return kind in (
        "response_item:message",
        "response_item:function_call",
        "response_item:function_call_output",
        "response_item:custom_tool_call",
        "response_item:custom_tool_call_output",
    )


def file_lines(path: Path) -> list[str]:
    """Each line's type; a file that is one JSON document counts as one line of type `document`."""
    types = []
    with open(path, "rb") as fh:
        for raw in fh:
            if raw.strip():
                try:
                    types.append(line_type(json.loads(raw)))
                except (json.JSONDecodeError, RecursionError):
                    return ["document"]
    return types


def read_outcomes(path: Path) -> dict[str, Any]:
    """Per line: did it yield records, was it skipped (by type) or rejected; as `ingest` reads it."""
    from expengine.ingest.readers import read_items

    outcome: dict[int, str] = {}
    skipped: Counter[str] = Counter()
    for item in read_items(str(path), fmt="auto", max_line_bytes=1_000_000, agent=None, now=dt.datetime(2026, 1, 1)):
        if item.skipped:
            skipped[item.skipped] += 1
            # Codex says each message twice (response_item, event_msg): stored from the line that said it first
            outcome.setdefault(item.line, "stored" if item.skipped == "repeated message" else item.skipped)
        elif item.error:
            outcome[item.line] = "rejected"
        else:
            outcome[item.line] = "stored"
    return {"outcome": outcome, "skipped": dict(skipped)}


def secrets_in(path: str) -> set[str]:
    """The secrets (keys, tokens, passwords; not cards or phones) redaction finds in the file's raw text."""
    from expengine.ingest.redact import _KINDS

    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for v in value.values():
                yield from strings(v)
        elif isinstance(value, list):
            for v in value:
                yield from strings(v)

    raw = Path(path).read_text(encoding="utf-8", errors="replace")
    try:
        texts = list(strings(json.loads(raw)))
    except json.JSONDecodeError:
        try:
            texts = [t for line in raw.splitlines() if line.strip() for t in strings(json.loads(line))]
        except json.JSONDecodeError:
            texts = [raw]  # Markdown (Aider, a Gemini CLI export)
    found = set()
    for kind in _KINDS:
        if kind.label in ("CARD", "CN_MOBILE", "PHONE", "EMAIL", "IBAN", "CN_ID", "SSN"):
            continue
        for text in texts:
            for match in kind.pattern.finditer(text):
                value = match.group(kind.group)
                if len(value) >= 12 and (kind.valid is None or kind.valid(value)):
                    found.add(value)
    return found


def ingest_one(path: str, store: str) -> None:
    """Child process: ingest one file, print its result, this process's peak memory and how many of the
    secrets in the file any stored record still holds (the target: none)."""
    from expengine import Engine

    started = time.perf_counter()
    with Engine(store=Path(store), overrides=OVERRIDES) as engine:
        result = engine.ingest([path])
        secrets = secrets_in(path)
        columns = "concat_ws(' ', content, text, tool_args, tool_result, tool_error, goal_description, meta)"
        stored = [
            s
            for s in secrets
            if engine.store.con.execute(f"SELECT count(*) FROM records WHERE contains({columns}, ?)", [s]).fetchone()[0]
        ]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                **result.to_dict(),
                "wall_s": round(time.perf_counter() - started, 2),
                "peak_mb": round(peak_mb),
                "secrets_in_file": len(secrets),
                "secrets_stored": len(stored),
            }
        )
    )


def ask(store: str) -> None:
    """Child process: compact once, then ask the questions and the store's most frequent error."""
    from expengine import Engine

    with Engine(store=Path(store), overrides=OVERRIDES) as engine:
        engine.compact(refine=True)
        rows = engine.store.con.execute(
            "SELECT substr(tool_error, 1, 200) FROM records WHERE tool_error IS NOT NULL"
        ).fetchall()
        errors = Counter(r[0].splitlines()[0][:120] for r in rows if r[0] and r[0].strip())
        questions = list(QUESTIONS) + ([errors.most_common(1)[0][0]] if errors else [])
        answers = {q: engine.query(q, touch=False).prompt.strip().splitlines()[:6] for q in questions}
    print(json.dumps(answers))


def child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False, cwd=REPO, env=None
    )
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(data: Path, only: str | None, compact: bool) -> dict[str, Any]:
    report: dict[str, Any] = {"data": str(data), "files": [], "stores": {}}
    groups = sorted({p.relative_to(data).parts[0] for p in data.rglob("*") if p.is_file() and p.suffix in SUFFIXES})
    with tempfile.TemporaryDirectory(prefix="wild-") as tmp:
        for group in groups:
            store = Path(tmp) / group
            files = sorted(p for p in (data / group).rglob("*") if p.is_file() and p.suffix in SUFFIXES)
            files = [p for p in files if not only or only in str(p)]
            for path in files:
                types = file_lines(path)
                read = read_outcomes(path)
                outcome = read["outcome"]
                # instructions the tool injects are read and skipped by design: not content
                injected = ("instructions", "developer message", "meta")
                content = [
                    n for n, kind in enumerate(types, start=1) if is_content(kind) and outcome.get(n) not in injected
                ]
                result = child("--ingest-one", str(path), "--store", str(store))
                row = {
                    "file": str(path.relative_to(data)),
                    "bytes": path.stat().st_size,
                    "lines": len(types),
                    "types": dict(Counter(types).most_common()),
                    "stored_lines": sum(1 for v in outcome.values() if v == "stored"),  # a repeated message counts
                    "skipped": read["skipped"],
                    "rejected": result.get("rejected"),
                    "content_lines": len(content),
                    "content_stored": sum(1 for n in content if outcome.get(n) == "stored"),
                    "records": result.get("stored"),
                    "redacted": result.get("redacted_by_kind"),
                    "seconds": result.get("seconds"),
                    "peak_mb": result.get("peak_mb"),
                    "secrets_in_file": result.get("secrets_in_file"),
                    "secrets_stored": result.get("secrets_stored"),
                    "warnings": result.get("file_warnings"),
                    "error": result.get("error"),
                }
                row["content_share"] = round(row["content_stored"] / len(content), 3) if content else None
                row["rejected_share"] = round((row["rejected"] or 0) / max(1, len(types)), 4)
                report["files"].append(row)
                print(json.dumps(row), flush=True)
            if compact and files:
                report["stores"][group] = child("--ask", str(store))
                print(json.dumps({group: report["stores"][group]}, ensure_ascii=False), flush=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--only", help="only files whose path holds this")
    parser.add_argument("--no-compact", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--ingest-one", help=argparse.SUPPRESS)
    parser.add_argument("--ask", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ingest_one:
        ingest_one(args.ingest_one, args.store)
        return
    if args.ask:
        ask(args.ask)
        return
    if not args.data.is_dir():
        raise SystemExit(f"no folder {args.data}: pass --data DIR")
    report = run(args.data.resolve(), args.only, not args.no_compact)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
