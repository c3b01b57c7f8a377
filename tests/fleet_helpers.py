"""A small fleet for the fleet tests: a root with one store per name."""

from __future__ import annotations

import json
from pathlib import Path

from test_compact import BOOKING, CHATTER, REFUND

NAMES = ("alpha", "beta", "gamma")


def make_fleet(root: Path, embedder, names=NAMES) -> dict[str, set[str]]:
    """One store per name, each with the booking, refund and chatter logs under its own agent and ids."""
    from expengine import Engine

    ids = {}
    for name in names:
        lines = fleet_lines(name)
        log = root.parent / f"{name}.jsonl"
        log.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
        with Engine(store=root / name, embedder=embedder) as engine:
            engine.ingest([str(log)])
        log.unlink()
        ids[name] = {line["id"] for line in lines}
    return ids


def fleet_lines(name: str) -> list[dict]:
    """The booking, refund and chatter events as agent `name`'s, with ids of its own."""
    return [{**e, "id": f"{name}-{e['id']}", "agent": name} for e in BOOKING + REFUND + CHATTER]
