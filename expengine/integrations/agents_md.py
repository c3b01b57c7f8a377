"""A project's rules in the file its agent already reads (AGENTS.md for Codex, CLAUDE.md for Claude
Code), in one delimited section that expengine owns; the rest of the file is never touched.

The section holds no date: rendering the same rules again gives the same bytes, so a second export
with nothing new leaves the file unchanged (and its modification time too)."""

from __future__ import annotations

from pathlib import Path

from .files import Change

BEGIN = "<!-- expengine:begin -->"
END = "<!-- expengine:end -->"


def section(project: str, lines: list[str]) -> str:
    body = lines or ["- nothing learned yet"]
    return "\n".join(
        [
            BEGIN,
            f"## What expengine learned in {project}",
            "",
            "Rules from earlier sessions, with their evidence; `expengine show ID` gives a rule's sources.",
            "",
            *body,
            END,
        ]
    )


def merged(text: str, block: str) -> str:
    """`text` with its expengine section replaced by `block`, or `block` appended after a blank line."""
    start = text.find(BEGIN)
    end = text.find(END, start) if start >= 0 else -1
    if start >= 0 and end >= 0:
        return text[:start] + block + text[end + len(END) :]
    if not text:
        return block + "\n"
    return text + ("\n" if text.endswith("\n") else "\n\n") + block + "\n"


def export(path: Path, project: str, lines: list[str]) -> Change:
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    return Change(path, merged(current, section(project, lines)))
