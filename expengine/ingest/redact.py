"""Redact secrets and personal data before anything is stored or embedded."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("PRIVATE_KEY", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S)),
    ("API_KEY", re.compile(r"\b(?:sk|pk|rk)-(?:proj-|live-|test-)?[A-Za-z0-9_\-]{16,}\b")),
    ("API_KEY", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("API_KEY", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b")),
    ("API_KEY", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
    ("API_KEY", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("TOKEN", re.compile(r"\b[Bb]earer\s+[A-Za-z0-9._\-+/=]{16,}")),
    ("TOKEN", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\b")),
    (
        "SECRET",
        re.compile(
            r"(?i)\b((?:password|passwd|pwd|passcode|secret|api[_-]?key|access[_-]?token|auth[_-]?token|token)"
            r"\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&\"']+)"
        ),
    ),
    ("EMAIL", re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")),
    ("CARD", re.compile(r"\b(?:\d[ -]?){12,18}\d\b")),
    ("PHONE", re.compile(r"(?<![\w-])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}(?![\w-])")),
    ("PHONE", re.compile(r"(?<![\w-])\+\d{1,3}[\s.-]?\d{2,4}(?:[\s.-]?\d{2,4}){2,4}(?![\w-])")),
]


def _luhn_ok(digits: str) -> bool:
    total, parity = 0, len(digits) % 2
    for i, ch in enumerate(digits):
        d = int(ch)
        if i % 2 == parity:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


@dataclass
class Redactor:
    """Replaces each match with `[REDACTED:KIND]` and counts what it replaced."""

    enabled: bool = True
    counts: dict[str, int] = field(default_factory=dict)

    def __call__(self, text: str | None) -> tuple[str | None, int]:
        if not self.enabled or not text:
            return text, 0
        replaced = 0
        for label, pattern in _PATTERNS:

            def sub(match: re.Match[str], label: str = label) -> str:
                nonlocal replaced
                if label == "CARD":
                    digits = re.sub(r"\D", "", match.group(0))
                    if not (13 <= len(digits) <= 19 and _luhn_ok(digits)):
                        return match.group(0)
                replaced += 1
                self.counts[label] = self.counts.get(label, 0) + 1
                if label == "SECRET":
                    return f"{match.group(1)}[REDACTED:{label}]"
                return f"[REDACTED:{label}]"

            text = pattern.sub(sub, text)
        return text, replaced
