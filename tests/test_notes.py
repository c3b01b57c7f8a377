"""Notes on real conversation text (LoCoMo conv-26, MemoryBank): subjects, dates, chatter, merging,
superseding, which turns sleep, and how a sleeping turn is still found."""

from __future__ import annotations

import datetime as dt

import pytest

from expengine.lifecycle.notes.dates import resolve
from expengine.lifecycle.notes.statements import turn_notes
from expengine.lifecycle.notes.subjects import Person

MAY_8 = dt.date(2023, 5, 8)  # conv-26 session 1
NAMES = {"caroline", "melanie", "mel", "car"}


def notes_of(line: str, day: dt.date = MAY_8, names: set[str] = NAMES) -> list[str]:
    speaker = line.split(":")[0]
    other = "Melanie" if speaker == "Caroline" else "Caroline"
    return [s.text for s in turn_notes(line, person=Person(speaker, other), day=day, names=names).statements]


# --- relative dates ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "day", "expected", "fact_day"),
    [
        ("yesterday", MAY_8, "on 7 May 2023", dt.date(2023, 5, 7)),
        ("last week", MAY_8, "the week before 8 May 2023", None),
        ("next month", MAY_8, "in June 2023", None),
        ("last Saturday", dt.date(2023, 5, 25), "the Saturday before 25 May 2023", dt.date(2023, 5, 20)),
        # month and year boundaries
        ("yesterday", dt.date(2024, 3, 1), "on 29 February 2024", dt.date(2024, 2, 29)),
        ("tomorrow", dt.date(2023, 12, 31), "on 1 January 2024", dt.date(2024, 1, 1)),
        ("next month", dt.date(2023, 12, 15), "in January 2024", None),
        ("last month", dt.date(2023, 1, 10), "in December 2022", None),
        ("last year", dt.date(2023, 1, 1), "in 2022", None),
        ("three years ago", MAY_8, "in 2020", None),
        ("tomorrow's grand opening", dt.date(2023, 6, 19), "20 June 2023's grand opening", dt.date(2023, 6, 20)),
        ("two weekends ago", dt.date(2023, 7, 17), "2 weekends before 17 July 2023", None),
        ("昨天", dt.date(2023, 1, 1), "2022年12月31日", dt.date(2022, 12, 31)),
        ("上周", MAY_8, "2023年5月8日的前一周", None),
        ("下个月", dt.date(2023, 12, 10), "2024年1月", None),
    ],
)
def test_relative_times_resolve_against_the_turns_day(text, day, expected, fact_day):
    resolved = resolve(text, day)
    assert resolved.text == expected and resolved.day == fact_day


# --- subjects, chatter, statements -------------------------------------------------------------------
def test_first_person_becomes_the_speaker_and_the_date_is_resolved():
    # "and it was so powerful" only evaluates: the note states the fact, the sleeping turn keeps the rest
    assert notes_of("Caroline: I went to a LGBTQ support group yesterday and it was so powerful.") == [
        "Caroline went to a LGBTQ support group on 7 May 2023"
    ]


def test_second_person_becomes_the_addressee_when_two_speak():
    line = "Caroline: Wow, Mel, I'm so stoked for you that art is helping you express yourself and bring you joy!"
    assert notes_of(line) == [
        "Caroline is stoked for Melanie that art is helping them express themself and bring them joy"
    ]
    # with no addressee a "you" cannot be named: the sentence is unresolved and the turn is not covered
    alone = turn_notes(line, person=Person("Caroline", None), day=MAY_8, names=NAMES)
    assert alone.unresolved and not alone.covered


def test_chatter_only_turn_makes_no_note():
    for line in (
        "Caroline: Hey Mel! Good to see you! How have you been?",
        "Melanie: Wow, that's cool, Caroline! What happened that was so awesome? Did you hear any inspiring stories?",
    ):
        found = turn_notes(line, person=Person(line.split(":")[0], "Caroline"), day=MAY_8, names=NAMES)
        assert found.statements == [] and found.unresolved == [] and found.chatter


def test_a_turn_with_two_facts_yields_two_notes():
    assert notes_of(
        "Caroline: I chose them 'cause they help LGBTQ+ folks with adoption. Their inclusivity and support really spoke to me.",
        day=dt.date(2023, 5, 25),
    ) == [
        "Caroline chose them 'cause they help LGBTQ+ folks with adoption",
        "Their inclusivity and support spoke to Caroline",
    ]


def test_a_turn_opening_with_a_pronoun_is_noted_under_its_speakers_name():
    found = turn_notes(
        "Caroline: It taught me self-acceptance and how to find support. It also showed me that tough times don't last - hope and love exist.",
        person=Person("Caroline", "Melanie"),
        day=dt.date(2023, 7, 15),
        names=NAMES,
    )
    assert [s.text for s in found.statements] == [
        "Caroline: It taught Caroline self-acceptance and how to find support; "
        "it also showed Caroline that tough times don't last - hope and love exist"
    ]
    assert found.covered and not found.unresolved


GINA, JON = Person("Gina", "Jon"), Person("Jon", "Gina")
CONV_30 = {"gina", "jon"}
JUNE_19 = dt.date(2023, 6, 19)  # conv-30, the day before Jon's studio opens


@pytest.mark.parametrize(
    ("line", "person", "expected"),
    [
        # clauses that only evaluate go ("which is pretty exciting"); hedges go ("kinda")
        (
            "Caroline: Gonna continue my edu and check out career options, which is pretty exciting!",
            Person("Caroline", "Melanie"),
            ["Gonna continue Caroline's edu and check out career options"],
        ),
        # a sentence opening with a verb is the speaker's; a caption goes with the turn's statements
        (
            "Gina: Thanks! Got the tattoo a few years ago, it stands for freedom - dancing without worrying what "
            "people think. A reminder to follow my passions and express myself. (shared image: a photo of a tattoo)",
            GINA,
            [
                "Gina: Got tattoo a few years before 19 June 2023, it stands for freedom - dancing without "
                "worrying what people think",
                "Reminder to follow Gina's passions and express themself",
            ],
        ),
        # a remark with a time is a statement; a continuation of a remark keeps its facts
        (
            "Jon: The official opening night is tomorrow. I'm working hard to make everything just right.",
            JON,
            ["Jon: Official opening night is on 20 June 2023", "Jon is working hard to make everything right"],
        ),
        (
            "Gina: Thanks! I'm excited and kinda nervous. Gonna be a big change. It's part-time position in the "
            "fashion department of an international company.",
            GINA,
            [
                "Gina is excited and nervous",
                "Gina: Gonna be big change; it's part-time position in fashion department of international company",
            ],
        ),
        # a remark beside a statement of the speaker's goes with it; alone, it is the turn's note
        (
            "Melanie: Thanks, Caroline! The colors really blend nicely. I painted that lake sunrise last year!",
            Person("Melanie", "Caroline"),
            ["Melanie painted that lake sunrise in 2022"],
        ),
        ("Gina: It's Shia Labeouf!", GINA, ["Gina: It's Shia Labeouf"]),
        # a contracted stop word ("it's", "they're") states nothing: its evaluating clause goes
        (
            "Caroline: Our loved ones give us strength to tackle any challenge - it's amazing!",
            Person("Caroline", "Melanie"),
            ["Caroline's loved ones give Caroline and others strength to tackle any challenge"],
        ),
        # a continuation cut off its opening clause starts with the name it kept, as said
        (
            "Caroline: Now the hard work starts to turn my dream into a reality. It's a lot to take in, but I'm "
            "feeling hopeful and optimistic.",
            Person("Caroline", "Melanie"),
            ["Now hard work starts to turn Caroline's dream into reality; Caroline is feeling hopeful and optimistic"],
        ),
    ],
)
def test_notes_keep_the_facts_and_leave_the_rest_to_the_sleeping_turn(line, person, expected):
    names = CONV_30 if person.me in ("Gina", "Jon") else NAMES
    found = turn_notes(line, person=person, day=JUNE_19 if names is CONV_30 else MAY_8, names=names)
    assert [s.text for s in found.statements] == expected and found.covered


@pytest.mark.parametrize(
    ("line", "day", "expected"),
    [
        # conv-26 D15:16 and D10:8: "It was so fun and lively!", "It was awesome!" say how it was
        (
            'Melanie: "Summer Sounds"- The playing an awesome pop song that got everyone dancing and singing. '
            "It was so fun and lively!",
            dt.date(2023, 8, 28),
            ['Melanie: "Summer Sounds"- The playing awesome pop song that got everyone dancing and singing'],
        ),
        # an interjection opens no reaction: "Oh yeah, we went to the beach recently." states a fact
        (
            "Melanie: Wow, fantastic, Caroline! Bet the atmosphere was incredible. Oh yeah, we went to the beach "
            "recently. It was awesome! The kids had such a blast.",
            dt.date(2023, 7, 20),
            ["Melanie and others went to beach recently"],
        ),
        # a clause that names something is no evaluation: "it's part-time position in …" stays
        ("Caroline: The pic I'm sending is stunning, it's from the Pride parade.", MAY_8, None),
    ],
)
def test_a_clause_that_only_says_how_it_was_is_left_to_the_sleeping_turn(line, day, expected):
    found = turn_notes(line, person=Person(line.split(":")[0], "Caroline"), day=day, names=NAMES)
    texts = [s.text for s in found.statements]
    if expected is None:
        assert any("Pride parade" in t for t in texts)
    else:
        assert texts == expected and found.covered


@pytest.mark.parametrize(
    ("line", "person", "names", "expected"),
    [
        # the companion sample: "the user: Tastes like soap" said nothing of cilantro
        (
            "cilantro is the worst. tastes like soap",
            Person("the user", None),
            set(),
            ["the user: Cilantro is worst; tastes like soap"],
        ),
        # LoCoMo turns of the same shape (conv-42 D10:9, conv-26 D7:20)
        (
            "Joanna: Not much is new other than the screenplay. Been working on some projects and testing out "
            "dairy-free dessert recipes for friends and fam.",
            Person("Joanna", "Nate"),
            {"joanna", "nate"},
            [
                "Joanna: Not much is new other than screenplay; been working on some projects and testing out "
                "dairy-free dessert recipes for friends and fam"
            ],
        ),
        (
            "Melanie: Thanks, Caroline! These are for running. Been running longer since our last chat.",
            Person("Melanie", "Caroline"),
            NAMES,
            ["Melanie: These are for running; been running longer since Melanie's last chat"],
        ),
        # a demonstrative opening is no reaction when the next sentence goes on about what it names
        (
            "Caroline: That new cafe downtown is great. Has the best oat lattes.",
            Person("Caroline", "Melanie"),
            NAMES,
            ["Caroline: That new cafe downtown is great; has best oat lattes"],
        ),
        # an imperative or a question after a remark is no sentence about it
        (
            "Nate: Ugh, that's so frustrating. But don't get discouraged, just keep going.",
            Person("Nate", "Joanna"),
            {"joanna", "nate"},
            ["Nate: Don't get discouraged, keep going"],
        ),
    ],
)
def test_a_note_keeps_the_clause_that_names_what_it_is_about(line, person, names, expected):
    assert [s.text for s in turn_notes(line, person=person, day=MAY_8, names=names).statements] == expected


def test_a_caption_alone_is_the_turns_note():
    found = turn_notes(
        "Melanie: Yeah, Caroline. Totally agree. (shared image: a photo of a painting of a sunset over a lake)",
        person=Person("Melanie", "Caroline"),
        day=MAY_8,
        names=NAMES,
    )
    assert [s.text for s in found.statements] == ["Melanie shared photo of painting of sunset over lake"]


def test_chinese_first_person_becomes_the_speaker_and_dates_resolve():
    found = turn_notes(
        "张曼婷：你好啊，昨天我去了绿禾公园，看到了一朵开得特别美的樱花！",
        person=Person("张曼婷", "小智"),
        day=dt.date(2023, 5, 1),
        names=set(),
    )
    assert [s.text for s in found.statements] == ["2023年4月30日张曼婷去了绿禾公园，看到了一朵开得美的樱花。"]
    assert found.statements[0].day == dt.date(2023, 4, 30) and found.covered
    # MemoryBank turns have roles, not names: a statement before the question is kept, the question is not
    role = turn_notes(
        "我很喜欢绘画、弹钢琴和品茶，你觉得有什么好的书可以推荐给我吗？",
        person=Person("用户", "助手"),
        day=dt.date(2023, 4, 27),
        names=set(),
    )
    assert [s.text for s in role.statements] == ["用户很喜欢绘画、弹钢琴和品茶。"] and role.covered


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # a remark (no 我) goes with the turn's statement of its speaker; alone, it is the turn's note
        ("这些也是非常优秀和经典的作品。我也喜欢阅读和思考。", ["助手也喜欢阅读和思考。"]),
        (
            "学习新技能是一个非常好的锻炼方式，可以帮助人们不断提升自己的能力和竞争力。",
            ["助手：学习新技能是一个好的锻炼方式，可以帮助人们不断提升自己的能力和竞争力。"],
        ),
        # "听你这么说" only reacts
        ("真棒！听你这么说，我也好想去公园散步呢！", ["助手也好想去公园散步呢。"]),
        # a title is worth a note even in a remark
        ("可以看看《小王子》，这本书很有趣。", ["助手：可以看看《小王子》，这本书很有趣。"]),
    ],
)
def test_chinese_remarks_go_with_the_speakers_statement(line, expected):
    found = turn_notes(line, person=Person("助手", "用户"), day=dt.date(2023, 4, 27), names=set())
    assert [s.text for s in found.statements] == expected and found.covered


# --- in a store: sleeping, merging, superseding, finding ---------------------------------------------
def _turn(dia: str, ts: str, session: str, content: str) -> dict:
    return {
        "id": f"conv-26:{dia}",
        "ts": ts,
        "kind": "message",
        "agent": "conv-26",
        "session": session,
        "role": "user",
        "content": content,
    }


TURNS = [
    _turn("D1:1", "2023-05-08T13:56:00", "s1", "Caroline: Hey Mel! Good to see you! How have you been?"),
    _turn(
        "D1:2",
        "2023-05-08T13:56:01",
        "s1",
        "Melanie: Hey Caroline! Good to see you! I'm swamped with the kids & work. What's up with you? Anything new?",
    ),
    _turn(
        "D1:3",
        "2023-05-08T13:56:02",
        "s1",
        "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    ),
    _turn(
        "D1:4",
        "2023-05-08T13:56:03",
        "s1",
        "Melanie: Wow, that's cool, Caroline! What happened that was so awesome? Did you hear any inspiring stories?",
    ),
    _turn(
        "D1:18",
        "2023-05-08T13:56:04",
        "s1",
        "Melanie: Yep, Caroline. Taking care of ourselves is vital. I'm off to go swimming with the kids. Talk to you soon!",
    ),
    _turn("D1:19", "2023-05-08T13:56:05", "s1", "Caroline: I live in New York."),
    _turn(
        "D1:14",
        "2023-05-08T13:56:06",
        "s1",
        "Melanie: Yeah, I painted that lake sunrise last year! It's special to me.",
    ),
    _turn(
        "D1:15",
        "2023-05-08T13:56:07",
        "s1",
        "Caroline: Wow, Melanie! The colors really blend nicely. Painting looks like a great outlet for expressing yourself.",
    ),
    _turn("D2:1", "2023-05-25T13:14:00", "s2", "Melanie: I'm off to go swimming with the kids!"),
    _turn("D2:2", "2023-05-25T13:14:01", "s2", "Caroline: I moved to Boston last week."),
    _turn(
        "D2:3",
        "2023-05-25T13:14:02",
        "s2",
        "Caroline: It taught me self-acceptance and how to find support. It also showed me that tough times don't last - hope and love exist.",
    ),
    _turn("D2:4", "2023-05-25T13:14:03", "s2", "Melanie: I love the pottery class I signed up for yesterday!"),
    # conv-26 D19:12: "always" protects it at ingest, but it says nothing
    _turn(
        "D19:12", "2023-05-25T13:14:04", "s2", "Melanie: Absolutely! I'm so glad we can always be there for each other."
    ),
]


@pytest.fixture(scope="module")
def compacted(tmp_path_factory, embedder):
    """The turns above ingested and compacted once; the engine stays open for the module."""
    import json

    from expengine import Engine

    folder = tmp_path_factory.mktemp("notes")
    log = folder / "conv.jsonl"
    log.write_text("\n".join(json.dumps(t) for t in TURNS) + "\n", encoding="utf-8")
    engine = Engine(store=folder / "store", embedder=embedder, overrides={"llm.mode": "template"})
    engine.ingest([str(log)])
    report = engine.compact(now=dt.datetime(2023, 5, 26))
    yield engine, report.steps["notes"]
    engine.close()


def _state(engine, record_id: str) -> tuple[str, str]:
    return engine.store.con.execute(
        "SELECT state, state_reason FROM records WHERE id = ?", [f"conv-26:{record_id}"]
    ).fetchall()[0]


def _note_citing(engine, record_id: str, status: str = "active") -> dict:
    notes = [n for n in engine.units(kind="note", status=status) if f"conv-26:{record_id}" in n["source_ids"]]
    assert len(notes) == 1, notes
    return notes[0]


def test_chatter_turns_sleep_and_carried_turns_sleep(compacted):
    engine, report = compacted
    assert _state(engine, "D1:4") == ("dormant", "chatter: nothing informative")
    state, reason = _state(engine, "D1:3")
    assert state == "dormant" and reason == f"carried by note {_note_citing(engine, 'D1:3')['id']}"
    assert report["turns_carried"] >= 4 and report["turns_chatter"] >= 1


def test_a_protected_turn_its_notes_carry_sleeps_and_the_note_takes_its_category(compacted):
    engine, _ = compacted
    assert _state(engine, "D2:3")[0] == "dormant"  # its pronouns are noted under Caroline's name
    state, reason = _state(engine, "D2:4")  # "I love": protected, carried by its note
    note = _note_citing(engine, "D2:4")
    assert state == "dormant" and reason == f"carried by note {note['id']}"
    assert note["text"] == "Melanie loves pottery class Melanie signed up for on 24 May 2023"
    assert note["category"] == "preference"
    # a unit standing for a protected record never decays: the lesson stays in the hot store
    from expengine.store.units import SPARED_SQL

    assert (note["id"],) in engine.store.con.execute(SPARED_SQL).fetchall()


def test_a_pinned_turn_stays_active_with_only_its_dated_note(make_engine, write_jsonl):
    engine = make_engine(overrides={"llm.mode": "template"})
    engine.ingest([write_jsonl("c.jsonl", TURNS)])
    engine.pin("conv-26:D2:4")
    engine.compact(now=dt.datetime(2023, 5, 26))
    assert _state(engine, "D2:4")[0] == "active"
    assert _note_citing(engine, "D2:4")["text"].endswith("on 24 May 2023")
    assert _state(engine, "D1:3")[0] == "dormant"


def test_a_reaction_to_the_other_speakers_noted_turn_joins_its_note(compacted):
    """Caroline's turn only remarks on Melanie's painting: it becomes a source of Melanie's note, which
    keeps its wording, and sleeps carried by it (its text is the note's evidence line). That note then
    consolidates with Melanie's other note of the session (next test)."""
    engine, report = compacted
    joined = _note_citing(engine, "D1:15", status="superseded")
    assert joined["source_ids"] == ["conv-26:D1:14", "conv-26:D1:15"]
    assert joined["text"] == "Melanie painted that lake sunrise in 2022"
    note = _note_citing(engine, "D1:15")
    assert _state(engine, "D1:15") == ("dormant", f"carried by note {note['id']}")
    assert report["reactions_joined"] == 1


def test_a_speakers_notes_of_a_session_consolidate_with_the_subject_said_once(compacted):
    """Melanie's two statements of session 1 become one note that names her once and keeps every source;
    the note it absorbed is superseded by it. A restated note (swimming) and a note on a single-valued
    attribute (Caroline's home) stay apart."""
    engine, report = compacted
    note = _note_citing(engine, "D1:2")
    assert note["text"] == "Melanie is swamped with kids & work; painted that lake sunrise in 2022"
    assert note["source_ids"] == ["conv-26:D1:2", "conv-26:D1:14", "conv-26:D1:15"]
    assert note["as_of"] == dt.datetime(2023, 5, 8) and report["notes_consolidated"] == 1
    absorbed = _note_citing(engine, "D1:14", status="superseded")
    assert absorbed["superseded_by"] == note["id"]
    assert any("consolidated" in h["detail"] for h in engine.show(absorbed["id"]).to_dict()["history"])
    for turn in ("D1:2", "D1:14"):
        assert _state(engine, turn) == ("dormant", f"carried by note {note['id']}")
    assert [r["id"] for r in engine.trace(note["id"])["records"]] == [
        f"conv-26:{t}" for t in ("D1:2", "D1:14", "D1:15")
    ]
    assert _note_citing(engine, "D1:18")["source_ids"] == ["conv-26:D1:18", "conv-26:D2:1"]


def test_a_protected_phrase_in_chatter_does_not_keep_the_turn_awake(compacted):
    engine, _ = compacted
    protected = engine.store.con.execute("SELECT protected FROM records WHERE id = 'conv-26:D19:12'").fetchall()
    assert protected == [(True,)]
    assert _state(engine, "D19:12") == ("dormant", "chatter: nothing informative")


def test_a_greeting_said_to_the_other_speaker_by_name_is_chatter():
    found = turn_notes(
        "Caroline: Hey Mel, long time no chat! I had a wicked day out with the gang last weekend - we went biking "
        "and saw some pretty cool stuff.",
        person=Person("Caroline", "Melanie"),
        day=dt.date(2023, 9, 13),
        names=NAMES,
    )
    assert found.chatter == ["Hey Mel, long time no chat!"]
    assert [s.text for s in found.statements] == [
        "Caroline had wicked day out with gang the weekend before 13 September 2023 - Caroline and others "
        "went biking and saw some cool stuff"
    ]


def test_a_restated_fact_merges_into_one_note_with_both_sources_and_dates(compacted):
    engine, report = compacted
    note = _note_citing(engine, "D2:1")
    assert note["source_ids"] == ["conv-26:D1:18", "conv-26:D2:1"] and note["support"] == 2
    assert note["text"] == "Melanie is off to go swimming with kids (also said on 25 May 2023)"
    assert note["as_of"] == dt.datetime(2023, 5, 8) and report["notes_merged"] >= 1


def test_a_changed_fact_supersedes_the_old_note_and_show_says_why(compacted):
    engine, _ = compacted
    old = _note_citing(engine, "D1:19", status="superseded")
    new = _note_citing(engine, "D2:2")
    assert old["superseded_by"] == new["id"] and new["supersedes"] == old["id"]
    assert new["text"] == "Caroline moved to Boston the week before 25 May 2023" and new["attribute"] == "home"
    shown = engine.show(old["id"]).to_dict()
    assert any(
        h["action"] == "superseded" and new["id"] in h["detail"] and "home changed" in h["detail"]
        for h in shown["history"]
    )


def test_notes_are_listed_by_kind_and_traced_to_their_turns(compacted):
    engine, _ = compacted
    notes = engine.units(kind="note")
    assert notes and all(n["kind"] == "note" and n["method"] == "template" for n in notes)
    note = _note_citing(engine, "D1:3")
    traced = engine.trace(note["id"])
    assert [(r["id"], r["state"]) for r in traced["records"]] == [("conv-26:D1:3", "dormant")]
    assert traced["history"][0]["action"] == "noted"


def test_a_sleeping_turn_is_shown_as_evidence_under_its_note(compacted):
    engine, _ = compacted
    result = engine.query("When did Caroline go to the LGBTQ support group?", k=5, touch=False, expand=True)
    note = _note_citing(engine, "D1:3")
    hit = next(h for h in result.hits if h.id == note["id"])
    assert [(e.id, e.state) for e in hit.expanded] == [("conv-26:D1:3", "dormant")]
    assert "\n7 May 2023:\n- Caroline went to a LGBTQ support group on 7 May 2023" in result.prompt
    assert "  - evidence (dormant): Caroline: I went to a LGBTQ support group yesterday" in result.prompt


def test_a_notes_turns_get_evidence_lines_by_the_note_floor(compacted):
    """A note restates its turn: its evidence lines have their own floor (`query.note_evidence_floor`)."""
    engine, _ = compacted
    query = engine.store.config.query

    def lines(note_floor: float) -> list[str]:
        query.note_evidence_floor = note_floor
        prompt = engine.query("When did Caroline go to the LGBTQ support group?", k=5, touch=False).prompt
        return [line for line in prompt.splitlines() if "evidence (dormant): Caroline: I went" in line]

    try:
        assert lines(1.01) == [] and len(lines(-1.0)) == 1 and query.evidence_floor == 0.35
    finally:
        query.note_evidence_floor = 0.6


# --- the optional model ------------------------------------------------------------------------------
class _FakeModel:
    """Answers with a fixed note, as a local model would through `LLM.complete_json`."""

    def __init__(self, note: str):
        self.note, self.asked = note, 0

    def complete_json(self, system, user, schema, *, max_tokens, temperature):
        self.asked += 1
        return {"note": self.note}


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        ("On 7 May 2023 Caroline went to a LGBTQ support group and it was powerful.", True),
        (
            "On 7 May 2023 Caroline went to a support group in Boston and it was powerful.",
            False,
        ),  # Boston: from nowhere
        ("Caroline went to a support group.", False),  # lost the date and LGBTQ
    ],
)
def test_a_model_rewording_is_kept_only_when_grounded(answer, kept):
    from types import SimpleNamespace

    from expengine.config import Config
    from expengine.lifecycle.notes.reword import Rewording

    turn = "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."
    statement = turn_notes(turn, person=Person("Caroline", "Melanie"), day=MAY_8, names=NAMES).statements[0]
    template = statement.text
    reword = Rewording(_FakeModel(answer), SimpleNamespace(config=Config()), max_calls=1)  # type: ignore[arg-type]
    reword(statement, turn)
    assert statement.text == (answer if kept else template)
    assert (reword.calls, reword.rejected) == (1, 0 if kept else 1)
    reword(statement, turn)  # the budget is spent: no second call
    assert reword.calls == 1


def test_a_speaker_who_speaks_once_is_still_named(make_engine, write_jsonl):
    """Labels name speakers as soon as the conversation has two labelled turns: Caroline speaks once."""
    engine = make_engine(overrides={"llm.mode": "template"})
    engine.ingest([write_jsonl("c.jsonl", TURNS[1:4])])
    engine.compact(now=dt.datetime(2023, 5, 9))
    texts = {n["text"] for n in engine.units(kind="note")}
    assert "Caroline went to a LGBTQ support group on 7 May 2023" in texts
    assert _state(engine, "D1:4") == ("dormant", "chatter: nothing informative")


def test_a_stop_inside_a_url_or_a_number_does_not_end_the_sentence() -> None:
    from expengine.lifecycle.notes.statements import sentences

    text = "I read it on http://e.x/a.html and it cost 2.50 dollars. Then I left! 我很好。你呢？"
    assert sentences(text) == [
        "I read it on http://e.x/a.html and it cost 2.50 dollars.",
        "Then I left!",
        "我很好。",
        "你呢？",
    ]


def test_a_question_worded_like_a_sleeping_turn_is_relevant_through_its_note(compacted, monkeypatch):
    """The relevance floor judges the turns a note stands for too: the note rewrote "I … yesterday", so
    a question in the turn's own words is closer to the turn than to the note."""
    import numpy as np

    engine, _ = compacted
    question = "I went to a support group yesterday and it was so powerful"
    note = _note_citing(engine, "D1:3")
    turn = "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."
    q, n, t = (v / np.linalg.norm(v) for v in engine.store.embedder.encode([question, note["text"], turn]))
    to_note, to_turn = float(np.dot(q, n)), float(np.dot(q, t))
    monkeypatch.setattr(engine.store.config.query, "min_similarity", {"*": 0.0})
    best_active = engine.query(question, k=5, touch=False).best_similarity or 0.0
    assert to_turn > max(to_note, best_active) + 0.02, (to_turn, to_note, best_active)
    monkeypatch.setattr(engine.store.config.query, "min_similarity", {"*": (to_turn + max(to_note, best_active)) / 2})
    result = engine.query(question, k=5, touch=False)
    assert result.relevant and note["id"] in [h.id for h in result.hits]
    monkeypatch.setattr(engine.store.config.query, "min_similarity", {"*": to_turn + 0.01})
    assert not engine.query(question, k=5, touch=False).relevant


def test_a_consolidated_note_says_its_subject_once_but_keeps_a_group_whole():
    """conv-30, 25 April 2023: Jon's statements after his first one read without his name, but "Jon and
    others" is a different subject and stays."""
    from expengine.lifecycle.notes.consolidate import tail

    assert (
        tail("Jon is having trouble with their business project", "Jon")
        == "is having trouble with their business project"
    )
    assert tail("Jon: Finishing up choreography to perform at nearby festival", "Jon") == (
        "Finishing up choreography to perform at nearby festival"
    )
    assert tail("Jon and others'll keep pushing each other on this path", "Jon") == (
        "Jon and others'll keep pushing each other on this path"
    )


def test_a_consolidated_note_names_its_subjects_possessive_once():
    """Each statement said "Caroline's" where the turn said "my"; joined, the later ones say "their"."""
    from expengine.lifecycle.notes.subjects import their

    joined = "Caroline's group meets weekly; Caroline's mom visited; Melanie's dog is sick"
    assert their(joined, ["Caroline"]) == "Caroline's group meets weekly; their mom visited; Melanie's dog is sick"


def test_turns_without_a_session_do_not_consolidate(make_engine, write_jsonl):
    """MemoryBank's turns name no session (the agent stands for it): each statement keeps its own note."""
    said = [
        "I really enjoy painting, playing piano and tea tasting. Do you have any good book recommendations for me?",
        'I prefer artistic works, like "The Great Gatsby" which is full of charm.',
    ]
    events = [
        {
            "id": f"2023-04-27:{n}:query",
            "ts": f"2023-04-27T12:0{n}:00",
            "kind": "message",
            "role": "user",
            "agent": "companion",
            "content": text,
        }
        for n, text in enumerate(said)
    ]
    engine = make_engine(overrides={"llm.mode": "template"})
    engine.ingest([write_jsonl("mb.jsonl", events)])
    report = engine.compact(now=dt.datetime(2023, 4, 28)).steps["notes"]
    notes = engine.units(kind="note")
    assert len(notes) == 2 and all(len(n["source_ids"]) == 1 for n in notes)
    assert report["notes_consolidated"] == 0
