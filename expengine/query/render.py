"""Turn ranked hits into a compact action guide for a system prompt, within a token budget."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..textutil import approx_tokens

if TYPE_CHECKING:
    from .search import Evidence, Hit

HEADER = "Relevant experience (from past runs; verify before relying on it):"
MAX_LINE_CHARS = 400


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_LINE_CHARS else flat[: MAX_LINE_CHARS - 1].rstrip() + "…"


def hit_line(hit: "Hit") -> str:
    if hit.type == "unit":
        label = hit.kind
    else:
        label = ", ".join(x for x in (hit.kind, hit.ts.date().isoformat() if hit.ts else None) if x)
    return f"- [{label}] {_clip(hit.text)}"


def evidence_line(evidence: "Evidence") -> str:
    return f"  - evidence ({evidence.state}): {_clip(evidence.text)}"


def render_prompt(hits: list["Hit"], *, budget: int | None) -> tuple[str, list["Hit"]]:
    """The prompt text and the hits it holds.

    Hits are added in rank order until the next one would pass `budget` tokens
    (`textutil.approx_tokens` of the whole text, header included); then adding stops. A unit's
    evidence lines follow it only while they fit, and `hit.expanded` keeps just those shown.
    """
    lines = [HEADER]
    used = approx_tokens(HEADER)
    kept: list["Hit"] = []
    for hit in hits:
        line = hit_line(hit)
        cost = approx_tokens(line)
        if budget is not None and used + cost > budget:
            break
        lines.append(line)
        used += cost
        shown = []
        for evidence in hit.expanded:
            extra = evidence_line(evidence)
            extra_cost = approx_tokens(extra)
            if budget is None or used + extra_cost <= budget:
                lines.append(extra)
                used += extra_cost
                shown.append(evidence)
        hit.expanded = shown
        kept.append(hit)
    return ("\n".join(lines) if kept else ""), kept
