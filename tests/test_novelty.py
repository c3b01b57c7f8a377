"""A prompt says each thing once inside its lines too: a statement the lines above already say is left
out of a line ("…" where it stood), its tokens go to the next hit, and the hit keeps its whole text."""

from __future__ import annotations

import datetime as dt

from expengine.query.hits import Hit, ScoreParts
from expengine.query.novelty import ELLIPSIS, untold, words
from expengine.query.render import HEADER, render_prompt
from expengine.textutil import approx_tokens

JOB = "Losing their job was tough but it gave them the push to start the dance studio"


def _note(n: int, text: str) -> Hit:
    return Hit(
        id=f"n{n}",
        type="unit",
        text=text,
        score=1.0 - n / 100,
        parts=ScoreParts(similarity=1.0, weight=0.5, recency=0.0, utility=0.0),
        source_ids=[f"t{n}"],
        kind="note",
        state="active",
        agent="conv",
        category="fact",
        ts=dt.datetime(2023, 4, n + 1),
    )


def test_a_statement_said_above_is_left_out_of_the_line():
    told = words(f"- [16 March 2023] Jon: {JOB}; Gina's success inspires Jon")
    assert untold(f"Jon is determined to make this studio work; {JOB}", told) == (
        f"Jon is determined to make this studio work; {ELLIPSIS}"
    )
    # a sentence, under its speaker's label, as well as a note's clause
    said = f"Jon: {JOB}. Investors said no to the studio twice."
    assert untold(said, told) == f"Jon: {ELLIPSIS} Investors said no to the studio twice."
    # nothing said above, or everything, or too little left (a remnant reads like every other): as it was
    assert untold("Jon bought a red car; it was cheap", told) == "Jon bought a red car; it was cheap"
    assert untold(f"{JOB}; Gina's success inspires Jon", told) == f"{JOB}; Gina's success inspires Jon"
    assert untold(f"Jon: Wow, thanks! {JOB}.", told) == f"Jon: Wow, thanks! {JOB}."
    # one statement alone is never cut (it is the line), nor one of a single word
    assert untold(JOB, told) == JOB
    assert untold(f"Jon went home. {JOB}", set()) == f"Jon went home. {JOB}"


def test_the_freed_tokens_go_to_the_next_hit():
    hits = [
        _note(1, f"Jon opened a dance studio; {JOB}"),
        _note(2, f"Jon met two investors on Friday; {JOB}"),
        _note(3, "Gina's online clothing store sold out of scarves in its first week"),
    ]
    whole, _ = render_prompt(hits, budget=None, once=False)
    budget = approx_tokens(whole) - 5  # all three fit only when the repeated clause is left out
    cut, kept = render_prompt(hits, budget=budget, once=False)
    assert [h.id for h in kept] == ["n1", "n2"]
    prompt, kept = render_prompt(hits, budget=budget)
    assert [h.id for h in kept] == ["n1", "n2", "n3"], prompt
    assert prompt.count("Losing their job") == 1 and f"Jon met two investors on Friday; {ELLIPSIS}" in prompt
    assert kept[1].text == f"Jon met two investors on Friday; {JOB}"  # the hit keeps its whole text
    assert approx_tokens(prompt) <= budget


def test_queries_say_a_repeated_statement_once_and_can_turn_it_off(make_engine, write_jsonl):
    events = [
        {
            "id": f"r{n}",
            "ts": f"2026-04-0{n + 1}T10:00:00Z",
            "kind": "message",
            "role": "user",
            "agent": "companion",
            "session": f"s{n}",
            "content": text,
        }
        for n, text in enumerate(
            (
                "The user adopted a dog named Biscuit. The user walks Biscuit every morning at seven.",
                "The user walks Biscuit every morning at seven. Biscuit is scared of thunderstorms.",
            )
        )
    ]
    path = write_jsonl("dog.jsonl", events)
    on = make_engine(overrides={"llm.mode": "template"})
    on.ingest([path], fmt="native")
    prompt = on.query("when does the user walk Biscuit", k=2, touch=False, budget=200).prompt
    assert prompt.count("walks Biscuit every morning") == 1 and ELLIPSIS in prompt, prompt
    on.close()
    off = make_engine(overrides={"llm.mode": "template", "query.say_once": "false"})
    prompt = off.query("when does the user walk Biscuit", k=2, touch=False, budget=200).prompt
    assert prompt.count("walks Biscuit every morning") == 2 and ELLIPSIS not in prompt, prompt


def test_rules_keep_their_wording():
    said = "Expected: get_weather returns the forecast for the city and the date asked"
    rules = [
        _note(1, f"For a weather request: call get_weather. {said}."),
        _note(2, f"To plan a trip: call get_weather. {said}."),
    ]
    for rule in rules:
        rule.kind = "rule"
    prompt, _ = render_prompt(rules, budget=None)
    assert prompt.count(said) == 2 and ELLIPSIS not in prompt


def test_the_last_hit_that_fits_only_in_part_shows_its_first_statements():
    hits = [
        _note(1, f"Jon opened a dance studio; {JOB}"),
        _note(2, "Gina sold out of scarves in a week; she ships to Canada now; her store has ten staff"),
    ]
    first, _ = render_prompt(hits[:1], budget=None)
    budget = approx_tokens(first) + 22  # the second line's first two statements fit, not its third
    prompt, kept = render_prompt(hits, budget=budget)
    assert [h.id for h in kept] == ["n1", "n2"] and approx_tokens(prompt) <= budget
    assert prompt.endswith(f"Gina sold out of scarves in a week; she ships to Canada now {ELLIPSIS}"), prompt
    assert kept[1].text == hits[1].text  # the hit keeps its whole text
    # fewer than a few words would fit: the line is left out, as rules and tool records always are
    _, kept = render_prompt(hits, budget=approx_tokens(first) + 8)
    assert [h.id for h in kept] == ["n1"]


def test_what_was_said_on_a_day_goes_under_that_days_heading_once():
    hits = [
        _note(4, "Gina opened an online clothing store"),
        _note(1, "Jon lost his job as a banker"),
        _note(4, "Gina's store sold out of scarves"),
    ]
    hits[2].id, hits[2].ts = "n5", dt.datetime(2024, 1, 2)
    rule = _note(9, "When the studio's card is declined: call the bank")
    rule.kind = "rule"
    prompt, kept = render_prompt([*hits, rule], budget=None)
    assert prompt.splitlines()[1:] == [
        "- [rule] When the studio's card is declined: call the bank",
        "2 April 2023:",
        "- Jon lost his job as a banker",
        "5 April:",  # the year of the heading above
        "- Gina opened an online clothing store",
        "2 January 2024:",
        "- Gina's store sold out of scarves",
    ]
    assert [h.id for h in kept] == ["n4", "n1", "n5", "n9"]  # the hits stay in rank order
    # the tokens of a date said once go to another hit: without headings, one hit fewer fits
    budget = approx_tokens(prompt)
    _, kept = render_prompt([*hits, rule], budget=budget, by_day=False)
    assert len(kept) == 3
    flat, _ = render_prompt(hits, budget=None, by_day=False)
    assert flat.splitlines()[1] == "- [5 April 2023] Gina opened an online clothing store"


def test_a_day_heading_counts_against_the_budget():
    hits = [_note(1, "Jon lost his job as a banker"), _note(2, "Jon opened a dance studio downtown")]
    prompt, _ = render_prompt(hits, budget=None)
    assert approx_tokens(prompt) == approx_tokens(HEADER) + sum(map(approx_tokens, prompt.splitlines()[1:]))
    _, kept = render_prompt(hits, budget=approx_tokens(prompt) - 1)
    assert [h.id for h in kept] == ["n1"]  # the second line fits, its day's heading does not
