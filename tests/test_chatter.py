"""Chatter detection on real lines (tau-bench airline runs, LoCoMo conversations) and its cycle step."""

from __future__ import annotations

import datetime as dt
import json

from expengine.lifecycle.chatter import CHATTER_WORDS, Message, detect, shapes_of

# Sentences that recur across many tau-bench runs (each run is one session).
STOCK = [
    ("assistant", "I can help you with that. Could you please provide your user ID?"),
    ("user", "Thank you for your help! That's all I needed. ###STOP###"),
]
CHATTER = [  # real lines that say nothing specific
    "Thanks, you too! ###STOP###",
    "You're welcome! Talk to you soon. Safe travels!",
    "###STOP###",
    "Caroline: Hey Mel! Good to see you! How have you been?",
    "Melanie: Bye Caroline. I'm here for you. Take care of yourself.",
]
CONTENT = [  # real requests and factual turns: never chatter
    "Hi! I'd like to change my flight reservation, please.",
    "I'd like to upgrade to economy class, please.",
    "My user id is mia_li_3668 and the reservation is NO6JO3.",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: Thanks, Caroline! That's really sweet. Is this your own painting?",
    "Flight HAT136: departs 19:00 EST, arrives 22:30 EST, economy $124.",
]


def _store(sessions: int = 12) -> list[Message]:
    messages = []
    for n in range(sessions):
        session = f"run-{n}"
        messages += [Message(f"{session}/{i}", session, text) for i, (_, text) in enumerate(STOCK)]
        messages.append(Message(f"{session}/req", session, f"Please cancel reservation ABC{n:03d}. Thank you!"))
    for i, text in enumerate(CHATTER + CONTENT):
        messages.append(Message(f"line-{i}", f"run-{i % sessions}", text))
    return messages


def test_chatter_words_are_data_per_language():
    assert "thanks" in CHATTER_WORDS["en"] and all(isinstance(v, frozenset) for v in CHATTER_WORDS.values())


def test_stock_requests_and_sign_offs_are_boilerplate_but_ids_and_requests_are_not():
    found = {v.id: v.rule for v in detect(_store(), min_sessions=5, session_share=0.05)}
    assert found["run-0/0"] == "boilerplate" and found["run-3/1"] == "boilerplate"
    # the same shape with a different reservation id in every run is a real request
    assert not any(i.endswith("/req") for i in found)
    lines = {f"line-{i}": text for i, text in enumerate(CHATTER + CONTENT)}
    flagged = {lines[i] for i in found if i in lines}
    assert flagged == set(CHATTER)


def test_a_sentence_in_few_sessions_is_not_boilerplate():
    found = detect(_store(sessions=3), min_sessions=5, session_share=0.05)
    assert not any(v.id.endswith("/0") for v in found)  # the id request repeats in 3 sessions only


def test_compaction_puts_chatter_to_sleep_and_reports_hot_tokens(make_engine, write_jsonl):
    engine = make_engine()
    start = dt.datetime(2026, 1, 1)
    events = []
    for n in range(6):
        for i, (role, text) in enumerate(
            [*STOCK, ("user", f"I need to cancel reservation XY{n}Q7 for my trip to Denver.")]
        ):
            events.append(
                {
                    "id": f"r{n}-{i}",
                    "ts": (start + dt.timedelta(minutes=10 * n + i)).isoformat(),
                    "kind": "message",
                    "session": f"run-{n}",
                    "role": role,
                    "content": text,
                }
            )
    engine.ingest([write_jsonl("runs.jsonl", events)])
    before = engine.stats()
    assert before.hot_tokens == before.raw_tokens > 0 and before.hot_share == 1.0
    report = engine.compact(refine=True, now=start + dt.timedelta(days=1))
    assert report.steps["chatter"]["dormant"] == 12
    states = dict(engine.store.con.execute("SELECT id, state FROM records").fetchall())
    categories = dict(engine.store.con.execute("SELECT id, category FROM records").fetchall())
    assert states["r0-0"] == states["r5-1"] == "dormant" and categories["r0-0"] == "chatter"
    assert categories["r3-2"] != "chatter"
    units = engine.store.con.execute("SELECT text FROM units").fetchall()
    assert not any("STOP" in text or "user ID" in text for (text,) in units)
    after = engine.stats()
    assert after.hot_tokens < before.hot_tokens and after.hot_share == report.after.hot_share
    assert engine.history()[-1]["hot_share"] == after.hot_share


def test_judging_a_few_counted_over_all_in_chunks_agrees_with_judging_all():
    """An incremental cycle judges only its new and swept messages, counting shapes over every session's
    (kept in parts): the verdicts on those few are the ones a whole pass gives them."""
    messages = _store()
    whole = {v.id: v.rule for v in detect(messages, min_sessions=5, session_share=0.05)}
    few = messages[::4] + messages[-len(CHATTER + CONTENT) :]
    parts = [found for i in range(0, len(messages), 3) for found in shapes_of(messages[i : i + 3])]
    found = {v.id: v.rule for v in detect(few, min_sessions=5, session_share=0.05, among=parts)}
    assert found == {m.id: whole[m.id] for m in few if m.id in whole}
    assert "boilerplate" in found.values() and "no content" in found.values()


def test_each_sessions_shapes_are_kept_and_read_again_only_when_its_messages_change(
    make_engine, write_jsonl, monkeypatch
):
    """The counts come from each session's shapes kept in derived_runs: a cycle reads the text of the sessions
    whose messages changed (new, or one archived), not every session's, a few sessions at a time; a session
    whose messages are gone leaves no shapes behind."""
    from expengine.lifecycle.chatter import SHAPES, refresh_shapes

    monkeypatch.setattr("expengine.lifecycle.chatter.CHUNK", 2)
    engine = make_engine()
    store = engine.store

    def session(n: int) -> list[dict]:
        lines = [*STOCK, ("user", f"Please cancel reservation ABC{n:03d}.")]
        return [
            {
                "id": f"r{n}-{i}",
                "ts": f"2026-01-01T00:{n:02d}:0{i}",
                "kind": "message",
                "session": f"run-{n}",
                "role": role,
                "content": text,
            }
            for i, (role, text) in enumerate(lines)
        ]

    engine.ingest([write_jsonl("a.jsonl", [e for n in range(6) for e in session(n)])])
    assert refresh_shapes(store, full=False, dry_run=False)[1] == 6
    assert refresh_shapes(store, full=False, dry_run=False)[1] == 0
    engine.ingest([write_jsonl("b.jsonl", session(6))])
    assert refresh_shapes(store, full=False, dry_run=False)[1] == 1
    store.con.execute("UPDATE records SET state = 'archived' WHERE id = 'r2-0'")
    assert refresh_shapes(store, full=False, dry_run=False)[1] == 1
    stored = {
        k: json.loads(p)
        for k, p in store.con.execute("SELECT run_key, payload FROM derived_runs WHERE pass = ?", [SHAPES]).fetchall()
    }
    fresh, read = refresh_shapes(store, full=True, dry_run=True)
    assert read == 7 and {k: [f.session, sorted(f.speakers), sorted(f.shapes)] for k, f in fresh.items()} == stored
    run2 = next(shapes for key, (_, _, shapes) in stored.items() if key.endswith("\x1frun-2"))
    assert "please cancel reservation abc ###" in run2 and "i can help you with that" not in run2
    store.con.execute("DELETE FROM records WHERE session = 'run-0'")
    assert refresh_shapes(store, full=False, dry_run=False)[1] == 0
    kept = {k for (k,) in store.con.execute("SELECT run_key FROM derived_runs WHERE pass = ?", [SHAPES]).fetchall()}
    assert kept == set(stored) - {k for k in stored if k.endswith("\x1frun-0")} and len(kept) == 6
