"""Small text helpers shared by ingest, compaction, refinement, query and the benchmarks."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Iterable

_TOKEN = re.compile(r"\w+|[^\w\s]")


def approx_tokens(text: str | None) -> int:
    """The one documented token count: words plus punctuation marks (a BPE-free, offline proxy)."""
    return len(_TOKEN.findall(text or ""))


# Han, kana and Hangul: the scripts written without spaces between words
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def normalized(text: str | None) -> str:
    """Lower case with single spaces: how two wordings are compared for sameness."""
    return " ".join((text or "").lower().split())


# One run's values, which two statements of the same thing may differ by: an id (a token with a letter
# and three digits or more: W1083185, u-107, HAT057; five digits or more; a commit's hex, 4cffacb) and a
# path (one that starts at a root, or with two slashes or more, or names a file: src/app/__init__.py).
# "429", "3/5 runs", "req/min" and a date are none.
ID = re.compile(r"\b(?=[\w-]*[^\W\d_])(?=(?:[\w-]*?\d){3})\w+(?:-\w+)*|\b\d{5,}\b|\b(?=[a-f]*\d)[0-9a-f]{7,40}\b")
PATH = re.compile(
    r"(?<![\w/.])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]+)*|\b[\w.-]+(?:/[\w.-]+){2,}/?|\b[\w.-]+/[\w-]+\.\w{1,5}\b"
)


def values_as_words(text: str) -> str:
    """`text` with each path and id replaced by one word: two texts that differ only in them read the
    same, and a path counts as one word, not one per directory."""
    return ID.sub("_id_", PATH.sub("_path_", text))


# the values one fix is written down with: a quoted text (a note), an argument's value, a number
_QUOTED_VALUE = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|“[^”\n]*”")
ARGUMENT_VALUE = re.compile(r"(\w+)=([^,()]*)")
_COUNT = re.compile(r"\d+(?:[.,]\d+)*")
ANY_VALUE = "…"


def fix_without_values(action: str | None) -> str:
    """A rule's action without its values (quoted texts, arguments' values, ids, numbers): what two
    wordings of the same fix share."""
    text = ARGUMENT_VALUE.sub(rf"\1={ANY_VALUE}", _QUOTED_VALUE.sub(ANY_VALUE, action or ""))
    return normalized(_COUNT.sub("N", ID.sub(ANY_VALUE, text)))


_HAN_RANGE = "\u3400-\u9fff"
HAN = re.compile(f"[{_HAN_RANGE}]")
# A run of Han characters, or of Latin letters: the pieces `grams` cuts
_HAN_OR_LATIN = re.compile(f"[{_HAN_RANGE}]+|[A-Za-z]+")


def grams(text: str | None) -> set[str]:
    """What lexical evidence compares (query/lexical.py): the character bigrams of each run of Han
    characters (a lone character as itself; Chinese has no spaces, and bigrams match words without a
    dictionary) and the Latin words, lower case. Digits are left out: every day of a conversation has
    a date, so "4月30号" says nothing about whose conversation it is."""
    found: set[str] = set()
    for match in _HAN_OR_LATIN.finditer(text or ""):
        run = match.group()
        if run.isascii():
            found.add(run.lower())
        else:
            found.update({run[i : i + 2] for i in range(len(run) - 1)} if len(run) > 1 else {run})
    return found


# Words per script, as a model reads them: a run of letters of one script is one word, and so is each
# CJK character (Chinese has no spaces), so English tool names and JSON keys in a Chinese log do not
# outweigh its sentences (ingest/scripts.py decides the embedder from these counts).
SCRIPTS = ("latin", "cjk", "other")
_LETTERS = re.compile(r"[^\W\d_]+")


def script_of(char: str) -> str | None:
    """latin, cjk (Han, kana, Hangul) or other for a letter; None for digits, spaces and punctuation."""
    if not char.isalpha():
        return None
    if char.isascii():
        return "latin"
    name = unicodedata.name(char, "")
    if name.startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL")):
        return "cjk"
    return "latin" if name.startswith("LATIN") else "other"


def count_scripts(texts: Iterable[str], counts: Counter[str] | None = None) -> Counter[str]:
    """Words per script (see the module's docstring), added to `counts`."""
    counts = counts if counts is not None else Counter()
    for text in texts:
        if text and text.isascii():  # most text: every word is latin, counted without a loop over words
            if words := len(_LETTERS.findall(text)):
                counts["latin"] += words
            continue
        for match in _LETTERS.finditer(text or ""):
            word = match.group()
            if word.isascii():
                counts["latin"] += 1
                continue
            previous = None
            for char in word:
                script = script_of(char)
                if script and (script == "cjk" or script != previous):
                    counts[script] += 1
                previous = script
    return counts


def shares(counts: Counter[str]) -> dict[str, float]:
    """Share of words per script, rounded to 3 places (all zero for text without letters)."""
    total = sum(counts.values())
    return {s: round(counts[s] / total, 3) if total else 0.0 for s in SCRIPTS}


# How much of an error a coding agent's query carries ("[repo] <the error's last 300 characters>"),
# and so what an error rule's key is read from: the same tail on both sides gives the same key.
ERROR_TAIL_CHARS = 300
_EXCEPTION = re.compile(
    r"(?:^|[\s(])(?:[A-Za-z_][\w]*\.)*(?P<type>[A-Z]\w*(?:Error|Exception|Exit|Failed|NotReady|Configured))(?::\s*(?P<message>.*))?$"
)
_RUN_MISSING_MODULE = re.compile(r"(?:^|\s)[\w./-]*python[\d.]*: No module named '?[\w.]+'?")
_COMMAND_NOT_FOUND = re.compile(r"(?:^|[\s:])([\w./-]+): (?:command )?not found")
# pytest's and sympy's closing summary lines, django's "FAILED (failures=1)"
_TEST_SUMMARY = re.compile(
    r"^=+ .*\b(?:failed|errors?|no tests ran|exceptions?)\b.* =+$|^FAILED \((?:failures|errors)="
    r"|^tests finished: .*\b(?:failed|exceptions?)\b"
)
_TEST_OUTCOMES = (
    ("failed", "tests failed"),
    ("failures", "tests failed"),
    ("error", "tests errored"),
    ("exception", "tests errored"),
    ("no tests ran", "no tests ran"),
)
_NO_SUCH_FILE = re.compile(r"No such file or directory|cannot access|can't open file")
_BARE_EXIT = re.compile(r"^exit (\d+)$")
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`")
_PATH = re.compile(r"(?<![\w<])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]*|\b[\w-]+\.(?:py|txt|cfg|toml|json|rst)\b")
# snake_case names (modules, tables, tests) and CONSTANT names (settings): one run's, never the error's
_SNAKE_OR_CONSTANT = re.compile(r"\b_*(?:[a-z][a-z0-9]*(?:_+[a-z0-9]+)+|[A-Z][A-Z0-9_]{3,})\b")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_NUMBER = re.compile(r"\d+(?:\.\d+)*")


def _placeholders(text: str) -> str:
    text = _HEX.sub("<address>", text)
    text = _QUOTED.sub("<name>", text)
    text = _PATH.sub("<path>", text)
    text = _SNAKE_OR_CONSTANT.sub("<name>", text)
    return " ".join(_NUMBER.sub("N", text).split())


def error_key(error: str | None) -> str:
    """An error's kind, its variable parts named, read from its tail (`ERROR_TAIL_CHARS`): the same
    for two runs whatever their paths, line numbers, addresses, test and module names, e.g.
    "ModuleNotFoundError: No module named <name>", "python -m: No module named <module>",
    "tests failed", "exit 1 with no output"; "" for no error."""
    tail = (error or "")[-ERROR_TAIL_CHARS:]
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    if not lines:
        return ""
    text = "\n".join(lines)
    if _RUN_MISSING_MODULE.search(text):
        return "python -m: No module named <module>"
    missing = _COMMAND_NOT_FOUND.search(text)
    if missing:
        return "<command>: command not found"
    for line in reversed(lines):
        if _TEST_SUMMARY.match(line):
            return next(outcome for word, outcome in _TEST_OUTCOMES if word in line)
        exception = _EXCEPTION.search(line)
        if exception:
            message = _placeholders(exception.group("message") or "")
            return f"{exception.group('type')}: {message}".rstrip(": ")[:80]
    if _NO_SUCH_FILE.search(text):
        return "No such file or directory"
    bare = _BARE_EXIT.match(lines[-1])
    if bare and len(lines) == 1:
        return f"exit {bare.group(1)} with no output"
    return " ".join(_placeholders(lines[-1]).split()[-8:])[:80]
