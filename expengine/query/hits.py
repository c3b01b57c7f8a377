"""What a query returns: hits with their score parts and evidence, and the result around them."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ScoreParts:
    similarity: float
    weight: float
    recency: float
    utility: float
    named_time: float = 0.0  # 1 when the hit is about a day the query names (`when.py`)


@dataclass
class Evidence:
    """A source record of a unit hit, shown under it: reachable even when dormant or archived.
    `quoted` means the unit's own line already carries its words, so it gets no line of its own.
    `text` is empty until read: `score.rank` has the texts LanceDB's searches returned, and
    `expand.attach_evidence` reads the rest for the hits shown."""

    id: str
    text: str
    state: str
    similarity: float
    quoted: bool = False


@dataclass
class Repeat:
    """A hit folded under another that says the same (`repeats.py`), or a rule with the same fix whose
    condition the line names (`like_rules.py`): still listed, by id, with its day."""

    id: str
    type: str
    ts: dt.datetime | None
    source_ids: list[str]
    kind: str = ""

    @classmethod
    def of(cls, hit: "Hit") -> "Repeat":
        return cls(id=hit.id, type=hit.type, ts=hit.ts, source_ids=list(hit.source_ids), kind=hit.kind)


@dataclass
class Hit:
    id: str
    type: str  # "unit" | "memory"
    text: str
    score: float
    parts: ScoreParts
    source_ids: list[str]
    kind: str
    state: str
    agent: str
    category: str
    ts: dt.datetime | None
    expanded: list[Evidence] = field(default_factory=list)
    reserved: bool = False  # the rule slot (`top_with_unit_slot`): the prompt keeps room for it
    repeats: list[Repeat] = field(default_factory=list)  # hits that said the same, folded into this line

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ts"] = self.ts.isoformat() if self.ts else None
        for repeat in data["repeats"]:
            repeat["ts"] = repeat["ts"].isoformat() if repeat["ts"] else None
        return data


@dataclass
class QueryResult:
    query: str
    hits: list[Hit]
    prompt: str
    candidates: int = 0
    budget: int | None = None
    took_ms: float = 0.0
    # False when no candidate reached `query.min_similarity`: then no hits and an empty prompt
    relevant: bool = True
    best_similarity: float | None = None  # the best cosine similarity of any candidate
    # where `query.min_lexical` is on for the encoder and the best cosine at most
    # `query.lexical_max_similarity`: the query's lexical evidence (lexical.py)
    lexical_evidence: float | None = None
    session: str | None = None  # who asked, for the query log (what an outcome credits)
    goal_id: str | None = None
    user: str | None = None  # whom it was asked for: only that user's and shared memories were shown

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "relevant": self.relevant,
            "hits": [h.to_dict() for h in self.hits],
            "prompt": self.prompt,
            "candidates": self.candidates,
            "best_similarity": self.best_similarity,
            "lexical_evidence": self.lexical_evidence,
            "budget": self.budget,
            "took_ms": self.took_ms,
        }
