"""Every redaction pattern through its prefilter: the cheap substring check may skip a text only when the
pattern cannot match it (a fine-grained GitHub token was stored in clear because its prefilter asked for "gh")."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from expengine.ingest.redact import _ANY_DIGIT, _KINDS, Redactor

KINDS = list(enumerate(_KINDS))
IDS = [f"{n}-{kind.label}" for n, kind in KINDS]


@pytest.mark.parametrize("n,kind", KINDS, ids=IDS)
def test_each_pattern_has_examples_its_whole_redact_path_catches(n, kind):
    assert kind.examples, f"pattern {n} ({kind.label}) declares no example"
    for example in kind.examples:
        assert kind.pattern.search(example), example
        assert kind.may_match(example.lower(), _ANY_DIGIT.search(example) is not None), example
        text, count = Redactor()(example)
        assert count >= 1 and f"[REDACTED:{kind.label}]" in text, (example, text)


@pytest.mark.parametrize("n,kind", KINDS, ids=IDS)
def test_the_prefilter_never_skips_a_text_the_pattern_matches(n, kind):
    @settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(kind.pattern, fullmatch=True))
    def check(text: str) -> None:
        secret = kind.pattern.fullmatch(text)
        # a match the pattern's own check refuses (40 letters with no digit: not an AWS secret) is not redacted
        # either way, so the prefilter may skip it
        assume(kind.valid is None or (secret is not None and kind.valid(secret.group(kind.group))))
        assert kind.may_match(text.lower(), _ANY_DIGIT.search(text) is not None), text

    check()


def test_a_fine_grained_github_token_as_github_issues_it_is_redacted():
    token = "github_pat_" + "A1b2C3d4E5f6G7h8I9j0K1" + "_" + "Zz9Yy8Xx7" * 6 + "Ww6Vv"
    assert len(token) == len("github_pat_") + 22 + 1 + 59
    text, count = Redactor()(f"export GH_TOKEN={token} # ci")
    assert token not in text and count == 1
