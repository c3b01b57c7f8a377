"""Redact secrets and personal data before anything is stored or embedded.

Each kind is a pattern, optionally the group that holds the secret (the key or phrase around it stays, so the
text still reads "my password is [REDACTED:PASSWORD]"), and optionally a check that keeps look-alikes: card
numbers pass Luhn, IBANs mod-97, Chinese identity numbers ISO 7064 MOD 11-2. A replacement never matches again,
so redacting twice changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

_NOT_DONE = r"(?!\[REDACTED)"  # a value already replaced is not replaced again
_QUOTED_OR_WORD = r"(\"[^\"]*\"|'[^']*'|[^\s,;&\"'}\]]+)"
_SECRET_WORDS = (
    r"password|passwd|pwd|passcode|passphrase|secret|secret[_-]?key|secret[_-]?access[_-]?key|client[_-]?secret|"
    r"api[_-]?key|apikey|access[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token|token|private[_-]?key|"
    r"credentials?"
)
# A key names a secret when one of the words is the whole key or a `_`/`-` separated part of it (db_password,
# AWS_SECRET_ACCESS_KEY), not when it is inside a longer word (max_tokens, passwordless).
_SECRET_KEY = re.compile(rf"(?i)^(?:[\w.-]*[_.-])?(?:{_SECRET_WORDS})(?:[_.-][\w.-]*)?$")
_PASSWORD_KEY = re.compile(r"(?i)pass|pwd|secret")


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


def _card_ok(text: str) -> bool:
    """13-19 digits passing Luhn; 13 digits starting with 1 are a millisecond timestamp (2001-2033), no card
    number starts so."""
    digits = re.sub(r"\D", "", text)
    return 13 <= len(digits) <= 19 and not (len(digits) == 13 and digits[0] == "1") and _luhn_ok(digits)


def _iban_ok(text: str) -> bool:
    """ISO 13616: move the first four characters to the end, letters to numbers, the result mod 97 is 1."""
    compact = text.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34:
        return False
    digits = "".join(str(int(ch, 36)) for ch in compact[4:] + compact[:4])
    return int(digits) % 97 == 1


def _cn_id_ok(text: str) -> bool:
    """GB 11643: the 18th character is the ISO 7064 MOD 11-2 check of the first 17 digits."""
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    total = sum(int(ch) * w for ch, w in zip(text[:17], weights))
    return "10X98765432"[total % 11] == text[17].upper()


def _aws_secret_ok(text: str) -> bool:
    """40 base64 characters with upper, lower and digits (a git SHA is lowercase hex; a path has many slashes)."""
    return (
        any(c.isupper() for c in text)
        and any(c.islower() for c in text)
        and any(c.isdigit() for c in text)
        and text.count("/") <= 3
    )


@dataclass(frozen=True)
class _Kind:
    label: str
    pattern: re.Pattern[str]
    group: int = 0  # the group that is the secret; 0: the whole match
    valid: Callable[[str], bool] | None = None
    # the pattern runs only when the lowercased text holds one of these (a cheap filter: most text has no "://");
    # DIGIT stands for any digit, ASCII or not, since `\d` matches them all ("４１１１…" is a card number too)
    needs: tuple[str, ...] = ()
    # texts the pattern is written to catch; tests run each through the whole redact path, prefilter included
    examples: tuple[str, ...] = ()

    def may_match(self, lowered: str, has_digit: bool) -> bool:
        """The prefilter: False only when the pattern cannot match (it is a speed-up, never a decision)."""
        if not self.needs:
            return True
        return any(n in lowered for n in self.needs if n != DIGIT) or (DIGIT in self.needs and has_digit)


# a number inside an id, a path or a longer number is part of it, not a card or a phone: ASCII letters,
# digits and `_ - / . :` around it (a UUID's group, a session id in a file name, a timestamp)
_NOT_IN_ID = r"(?<![A-Za-z0-9_\-/.:])"
_NOT_IN_ID_AFTER = r"(?![A-Za-z0-9_\-/]|\.\d)"
# a value that is code, not a literal: a call, a dotted name, a list or object, a keyword, a camelCase or
# ENV_NAME variable, a shell expansion (`api_key: anthropic_api_key()`, `env.OPENAI_API_KEY =
# env.ANTHROPIC_API_KEY`, `apiKey = await prompt(…)`, `token: csrfToken`, `TOKEN="${REVIEW_TOKEN:-}"`)
_CODE = re.compile(
    r"^(?:\[|\{|\(|\$\{|(?:await|new|None|null|undefined|true|false|True|False|self|this|process|os|env)\b"
    r"|[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+|[A-Za-z_$][\w$]*\(|[A-Z][A-Z0-9]*_[A-Z0-9_]+$"
    r"|[a-z]+(?:[A-Z][a-z]+)+$|[A-Z][a-z]+(?:[A-Z][a-z]+)+\)|[\"']?\$\{?[A-Za-z_])"
)
# keys whose numbers are times (a 13-digit millisecond timestamp passes Luhn one time in ten)
_TIME_KEY = re.compile(r"(?i)(?:^|_)(?:ts|time|timestamp|date)$|(?:At|Ms|_at|_ms)$|^(?:created|updated|started|ended)")

DIGIT = "<digit>"
_DIGITS = (DIGIT,)
_ANY_DIGIT = re.compile(r"\d")
_KEY_WORDS = ("pass", "pwd", "secret", "key", "token", "credential")

# Order matters: specific kinds first, so a key inside `password=...` is labelled by its own kind.
_KINDS: list[_Kind] = [
    _Kind(
        "PRIVATE_KEY",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
        needs=("-----begin",),
        examples=("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAqPEM\n-----END RSA PRIVATE KEY-----",),
    ),
    _Kind(
        "URL_PASSWORD",
        re.compile(rf"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@?#\"'<>{{}}]+:{_NOT_DONE}([^\s/@?#\"'<>{{}}]+)@"),
        1,
        needs=("://",),
        examples=("postgres://admin:UrlPa55word@db.internal:5432/app",),
    ),
    _Kind(
        "JWT",
        re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}"),
        needs=("eyj",),
        examples=("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",),
    ),
    _Kind(
        "API_KEY",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
        needs=("gh", "github_pat_"),
        examples=(
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "github_pat_11ABCDEFG012345678WXYZ_" + "aB3" * 19 + "xY",  # 22 + _ + 59, as GitHub issues them
        ),
    ),
    _Kind(
        "API_KEY",
        re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
        needs=("xox",),
        examples=("xoxb-2048-4096-AbCdEfGhIjKlMnOp",),
    ),
    _Kind(
        "API_KEY",
        re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"),
        needs=("_live_", "_test_"),
        examples=("sk_live_4eC39HqLyjWDarjtT1zdp7dc",),
    ),
    _Kind(
        "API_KEY",
        re.compile(r"\b(?:sk|pk|rk)-(?:proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"),
        needs=("sk-", "pk-", "rk-"),
        examples=("sk-proj-Abc123Def456Ghi789Jkl012",),
    ),
    _Kind(
        "API_KEY",
        re.compile(r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"),
        needs=("aiza",),
        examples=("AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",),
    ),
    _Kind(
        "API_KEY",
        re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
        needs=("akia", "asia"),
        examples=("AKIAIOSFODNN7EXAMPLQ",),
    ),
    _Kind(
        "TOKEN",
        re.compile(rf"\b[Bb]earer\s+{_NOT_DONE}([A-Za-z0-9._\-+/=]{{16,}})"),
        1,
        needs=("bearer",),
        examples=("Authorization: Bearer Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1",),
    ),
    # key = value, key: value, "key": "value" (JSON in text); a prefix is fine (db_password=, AWS_SECRET_ACCESS_KEY:)
    # because `_` is not in the look-behind
    _Kind(
        "SECRET",
        re.compile(rf"(?i)(?<![A-Za-z0-9])(?:{_SECRET_WORDS})[\"']?\s*[=:]\s*{_NOT_DONE}{_QUOTED_OR_WORD}"),
        1,
        valid=lambda value: not _CODE.match(value),
        needs=_KEY_WORDS,
        examples=(
            "db_password=S3cr3tPassW0rd!",
            '"api_key": "abc123secretvalue"',
        ),
    ),
    # a password stated in a sentence: "my password is hunter2.", "the passcode was 4417", "密码是abc123"
    _Kind(
        "PASSWORD",
        re.compile(
            rf"(?i)\b(?:pass(?:word|code|phrase)|passwd|pwd)s?\s+(?:is|was|to|will be|should be)\s*:?\s+{_NOT_DONE}"
            r"(\"[^\"]*\"|'[^']*'|\S+?)(?=[.,;!?)]*(?:\s|$))"
        ),
        1,
        needs=("pass", "pwd"),
        examples=(
            "my password is Tr0ub4dor&3.",
            "the passcode was 884213",
        ),
    ),
    _Kind(
        "PASSWORD",
        re.compile(rf"(?:密码|密碼|口令)\s*(?:是|为|為|:|：)\s*{_NOT_DONE}([^\s，。；！,;!]+)"),
        1,
        needs=("密码", "密碼", "口令"),
        examples=("我的密码是abc12345，别告诉别人",),
    ),
    _Kind(
        "AWS_SECRET",
        re.compile(r"(?<![A-Za-z0-9/+=_])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=_])"),
        valid=_aws_secret_ok,
        needs=_DIGITS,
        examples=("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKQY",),
    ),
    _Kind(
        "EMAIL",
        re.compile(
            r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b(?!:[\w.-]+/|/)"
        ),  # not a git remote, not a path
        needs=("@",),
        examples=("jane.doe@example.org",),
    ),
    _Kind(
        "IBAN",
        re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b"),
        valid=_iban_ok,
        needs=_DIGITS,
        examples=(
            "GB82 WEST 1234 5698 7654 32",
            "DE89370400440532013000",
        ),
    ),
    _Kind(
        "SSN",
        re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])"),
        needs=("-",),
        examples=("SSN 123-45-6789 on file",),
    ),
    _Kind(
        "CN_ID",
        re.compile(
            r"(?<![0-9A-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx](?![0-9A-Za-z])"
        ),
        valid=_cn_id_ok,
        needs=_DIGITS,
        examples=("身份证号11010519491231002X已登记",),
    ),
    _Kind(
        "CARD",
        re.compile(rf"{_NOT_IN_ID}(?:\d[ -]?){{12,18}}\d{_NOT_IN_ID_AFTER}"),
        valid=_card_ok,
        needs=_DIGITS,
        examples=(
            "card 4111 1111 1111 1111 exp 12/27",
            "card ４１１１ １１１１ １１１１ １１１１ (full-width digits)",
        ),
    ),
    _Kind(
        "CN_MOBILE",
        re.compile(rf"(?<![+]){_NOT_IN_ID}(?:(?:\+|00)86[\s-]?)?1[3-9]\d(?:[\s-]?\d{{4}}){{2}}{_NOT_IN_ID_AFTER}"),
        needs=_DIGITS,
        examples=("我的手机号是13812345678，请回电",),
    ),
    _Kind(
        "PHONE",
        re.compile(r"(?<![\w-])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}(?![\w-])"),
        needs=_DIGITS,
        examples=("call (415) 555-0132",),
    ),
    _Kind(
        "PHONE",
        re.compile(r"(?<![\w-])\+\d{1,3}[\s.-]?\d{2,4}(?:[\s.-]?\d{2,4}){2,4}(?![\w-])"),
        needs=("+",),
        examples=("+44 20 7946 0958",),
    ),
]


# personal data is not remembered: a card or phone number is matched by its shape wherever it is repeated
_PERSONAL = frozenset({"CARD", "CN_MOBILE", "PHONE", "EMAIL", "IBAN", "CN_ID", "SSN"})
SEEN_MIN, SEEN_MAX = 12, 1000  # a remembered secret's shortest length; how many one Redactor remembers


@dataclass
class Redactor:
    """Replaces each secret with `[REDACTED:KIND]` and counts what it replaced. A key or token found
    once by its cue (`Bearer X`, `api_key=X`) is also replaced where the same text, or a later one,
    repeats it bare ("…, it should be X"): `seen`, up to SEEN_MAX values."""

    enabled: bool = True
    counts: dict[str, int] = field(default_factory=dict)
    seen: dict[str, str] = field(default_factory=dict, repr=False)

    def __call__(self, text: str | None) -> tuple[str | None, int]:
        if not self.enabled or not text:
            return text, 0
        replaced, lowered, has_digit = 0, text.lower(), _ANY_DIGIT.search(text) is not None
        for kind in _KINDS:
            if not kind.may_match(lowered, has_digit):
                continue

            def sub(match: re.Match[str], kind: _Kind = kind) -> str:
                nonlocal replaced
                found = match.group(kind.group)
                if kind.valid is not None:
                    found = _valid_prefix(found, kind.valid)
                    if not found:
                        return match.group(0)
                replaced += 1
                self.counts[kind.label] = self.counts.get(kind.label, 0) + 1
                if kind.label not in _PERSONAL and len(found) >= SEEN_MIN and len(self.seen) < SEEN_MAX:
                    self.seen[found] = kind.label
                whole, start = match.group(0), match.start(kind.group) - match.start()
                return whole[:start] + f"[REDACTED:{kind.label}]" + whole[start + len(found) :]

            text = kind.pattern.sub(sub, text)
        for found, label in self.seen.items():
            if found in text:
                replaced += text.count(found)
                self.counts[label] = self.counts.get(label, 0) + text.count(found)
                text = text.replace(found, f"[REDACTED:{label}]")
        return text, replaced

    def value(self, value: Any) -> tuple[Any, int]:
        """Redact any JSON value at any depth: strings by pattern; a string or number under a secret-named key
        (`password`, `api_key`, `aws_secret_access_key`, …) whole; long integers as their digits (a card number)."""
        if not self.enabled:
            return value, 0
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            total = 0
            for key, item in value.items():
                if isinstance(key, str) and isinstance(item, int) and _TIME_KEY.search(key):
                    out[key] = item
                    continue
                if isinstance(key, str) and _SECRET_KEY.match(key) and _secret_like(key, item):
                    if not (isinstance(item, str) and item.startswith("[REDACTED:")):
                        out[key] = "[REDACTED:SECRET]"
                        self.counts["SECRET"] = self.counts.get("SECRET", 0) + 1
                        total += 1
                        continue
                out[key], n = self.value(item)
                total += n
            return out, total
        if isinstance(value, list):
            items = [self.value(item) for item in value]
            return [v for v, _ in items], sum(n for _, n in items)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**8:
            text, n = self(str(value))
            return (text if n else value), n
        return value, 0


def _secret_like(key: str, value: Any) -> bool:
    """A non-empty string under a secret-named key; a number only under a password-like one (not token_count)."""
    if isinstance(value, str):
        return value != ""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and bool(_PASSWORD_KEY.search(key))


def _valid_prefix(found: str, valid: Callable[[str], bool]) -> str:
    """The longest valid prefix in whole space-separated groups: the IBAN pattern may over-match a trailing word
    ("DE89 3704 0044 0532 0130 00 ABCD"). Empty when none is valid."""
    parts = found.split(" ")
    for end in range(len(parts), 0, -1):
        head = " ".join(parts[:end])
        if valid(head):
            return head
    return ""
