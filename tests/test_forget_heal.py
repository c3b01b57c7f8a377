"""A `forget` killed after its deletion committed, before its scrub: the next open scrubs, so no file keeps
the text (a rerun of the same forget finds nothing left to delete and could not do it)."""

from __future__ import annotations

import pytest
from test_forget import MARKER, OTHERS, SECRET, files_holding

from expengine.errors import NotFoundError


class Killed(BaseException):
    """Stands in for SIGKILL at the chosen moment (nothing after it runs in the process)."""


def test_a_forget_killed_before_its_scrub_is_scrubbed_on_next_open(make_engine, write_jsonl, monkeypatch, tmp_path):
    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", OTHERS + SECRET)])
    engine.close()
    store = tmp_path / "store"
    assert files_holding(store, MARKER)  # the test can fail

    def killed(*args, **kwargs):
        raise Killed

    monkeypatch.setattr("expengine.lifecycle.purge.scrub_index", killed)  # the first step after the commit
    with pytest.raises(Killed):
        make_engine(store=store).forget(sessions=["private"])
    monkeypatch.undo()
    assert files_holding(store, MARKER)  # committed, not yet scrubbed: the old bytes are still there
    reopened = make_engine(store=store)
    with pytest.raises(NotFoundError):  # what the rerun of that forget sees
        reopened.forget(ids=[SECRET[0]["id"]])
    reopened.close()
    assert files_holding(store, MARKER) == []
    assert reopened.stats().raw == len(OTHERS)
