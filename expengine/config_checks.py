"""Checking `config.toml` and `--set` values: each key's type (its default's), range and choices, and
no unknown names. Kept apart from config.py, which declares the settings."""

from __future__ import annotations

import math
from typing import Any

from .errors import InputError


def type_name(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, int):
        return "an integer"
    if isinstance(default, float):
        return "a number"
    if isinstance(default, dict):
        return "a table of numbers"
    return "a string"


# tables that also take one number: that value for every key ("*")
ONE_FOR_ALL = {"query.min_similarity", "query.min_lexical", "query.lexical_max_similarity"}


def one_for_all(key: str, value: Any) -> Any:
    """A plain number given for a table in ONE_FOR_ALL means `{"*": number}`."""
    if key in ONE_FOR_ALL and isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"*": float(value)}
    return value


def check_type(key: str, value: Any, default: Any) -> None:
    """A value must have its default's type (an integer is a number); one line naming the key otherwise."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, (int, float)):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = number and (isinstance(default, float) or isinstance(value, int))
    elif isinstance(default, dict):
        ok = isinstance(value, dict) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()
        )
    else:
        ok = isinstance(value, str)
    if not ok:
        raise InputError(f"config key {key} must be {type_name(default)}, got {type(value).__name__} {value!r}")


# Allowed ranges, inclusive; every other number must be at least 0. A factor above 1 would make memories
# grow each cycle; a count of 0 would make a step do nothing or divide by zero.
UNIT = (0.0, 1.0)
RANGES: dict[str, tuple[float | None, float | None]] = {
    "llm.n_ctx": (1, None),
    "llm.n_threads": (1, None),
    "llm.max_tokens": (1, None),
    "llm.temperature": (0, 2),
    "decay.lambda_global": UNIT,
    "decay.lambda_by_category": UNIT,
    "decay.importance_threshold": UNIT,
    "decay.goal_success_process_factor": UNIT,
    "decay.lambda_long_term": UNIT,
    "cluster.keep_ratio": UNIT,
    "cluster.merge_similarity": UNIT,
    "cluster.min_cluster_size": (1, None),
    "cluster.members_per_cluster": (1, None),
    "cluster.max_k": (1, None),
    "refine.min_support": (1, None),
    "refine.harmful_quarantine": (1, None),
    "refine.digest_quote_chars": (1, None),
    "lessons.typical_requests": (1, None),
    "lessons.typical_words": (1, None),
    "lessons.procedure_share": UNIT,
    "lessons.alpha": UNIT,
    "lessons.min_runs": (1, None),
    "credit.alpha": UNIT,
    "credit.min_runs": (1, None),
    "credit.same_situation": (-1, 1),
    "chatter.min_sessions": (1, None),
    "chatter.session_share": UNIT,
    "query.recency_base": UNIT,
    "query.k": (1, None),
    "query.candidates": (1, None),
    "query.index_retrain_growth": (1, None),
    "query.unit_slot_floor": (-1, None),
    "query.evidence_floor": (-1, None),
    "query.note_evidence_floor": (-1, None),
    "query.min_similarity": (0, 1),  # a cosine floor: above 1, nothing would ever be relevant
    "query.repeat_similarity": (-1, None),
    "ingest.max_line_bytes": (1, None),
    "ingest.max_content_chars": (1, None),
    "ingest.max_output_chars": (1000, None),
    "snapshot.retention": (1, None),
    "snapshot.max_bytes": (0, None),
    "snapshot.max_share": (0, None),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "llm.mode": ("auto", "model", "template"),
    "embedder.model": ("auto", "minilm", "multilingual", "mixed"),
    "embedder.encoder": ("auto", "onnx", "onnx-int8", "torch"),
}


def check_range(key: str, value: Any) -> None:
    """A number (or each number of a table) within RANGES, a string among CHOICES."""
    if key in CHOICES and value not in CHOICES[key]:
        raise InputError(f"config key {key} must be one of {', '.join(CHOICES[key])}, got {value!r}")
    low, high = RANGES.get(key, (0, None))
    for number in value.values() if isinstance(value, dict) else [value]:
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            return
        if not math.isfinite(number):  # TOML's nan and inf, or a float that overflows (1e999)
            raise InputError(f"config key {key} must be a finite number, got {number!r}")
        if (low is not None and number < low) or (high is not None and number > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise InputError(f"config key {key} must be {bound}, got {number!r}")


def no_unknown(unknown: set[str], known: set[str], *, where: str, as_section: bool = False) -> None:
    """An unknown (usually misspelt) name is an error, with the closest known one: a typo silently ignored
    would leave the default in force."""
    if not unknown:
        return
    import difflib

    name = sorted(unknown)[0]
    shown = f"[{name}]" if as_section else repr(name)
    close = difflib.get_close_matches(name, sorted(known), n=1)
    fix = (
        f"did you mean {f'[{close[0]}]' if as_section else repr(close[0])}?" if close else "see `expengine config show`"
    )
    raise InputError(f"unknown {where} {shown}: {fix}")


def coerce(value: Any, current: Any, key: str) -> Any:
    """Turn a CLI string like "0.5" into the type the default has."""
    if not isinstance(value, str) or isinstance(current, str):
        return value
    try:
        if isinstance(current, bool):
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if isinstance(current, int):
            return int(value)
        if isinstance(current, float):
            return float(value)
        if isinstance(current, dict):
            import json

            return json.loads(value)
    except ValueError as exc:
        raise InputError(f"config key {key} must be {type_name(current)}, got {value!r}") from exc
    return value
