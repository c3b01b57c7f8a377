"""Rules keyed by the situation, lessons from outcomes, rules that generalise across values."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from scipy.stats import fisher_exact

from expengine import Engine
from expengine.lifecycle.refine.conflicts import decide
from expengine.lifecycle.refine.intents import (
    Call,
    Run,
    build_runs,
    group_intents,
    procedure,
    shorten,
)
from expengine.lifecycle.refine.lessons import contrasts, lesson_drafts
from expengine.lifecycle.refine.mine import mine_cluster
from expengine.lifecycle.refine.recovery import generalise
from expengine.lifecycle.refine.templates import Draft, rule_draft
from expengine.lifecycle.refine.wording import CHINESE, ENGLISH

T0 = dt.datetime(2026, 3, 1, 9, 0)

CANCEL = [
    "Hi, I need to cancel my reservation please.",
    "I want to cancel my upcoming trip to Boston.",
    "Please cancel my flight booking, I can't travel anymore.",
    "Can you cancel reservation ABC123 for me?",
    "I'd like to cancel my booking and get a refund.",
    "Cancel my flight to Denver, my plans changed.",
    "I have to cancel the trip I booked last week.",
    "Hello! Please cancel my reservation for next Monday.",
]
BOOK = [
    "I want to book a flight from New York to Seattle on May 20.",
    "Can you book me a one-way flight to Chicago?",
    "I'd like to book a round trip from Boston to Miami.",
    "Please book a flight for two passengers to Denver.",
    "Book me the cheapest flight from LA to Dallas next Friday.",
]
BAGS = [
    "I need to add two checked bags to my reservation.",
    "Can I add an extra suitcase to my booking?",
    "Please add one more checked bag to my trip.",
]


# --- intents ------------------------------------------------------------------------------------------------
def test_requests_of_one_intent_group_together_and_apart_from_others(embedder):
    requests = CANCEL + BOOK + BAGS
    runs = [Run(run_id=f"r{i}", agent="airline", request=text, succeeded=True) for i, text in enumerate(requests)]
    intents = group_intents(runs, embedder.encode(requests), distance=1.5, typical=2, typical_words=6)
    label = {run.request: n for n, intent in enumerate(intents) for run in intent.runs}
    cancel_label = label[CANCEL[0]]
    assert sum(label[t] == cancel_label for t in CANCEL) >= 7  # MiniLM puts 'Cancel my flight to Denver' by bookings
    assert not any(label[t] == cancel_label for t in BOOK + BAGS)
    assert len({label[t] for t in BOOK}) == 1 and len({label[t] for t in BAGS}) == 1
    assert label[BOOK[0]] != label[BAGS[0]]
    cancel = intents[cancel_label]
    assert cancel.condition.startswith("For requests like '") and "cancel" in cancel.condition.lower()
    assert all(len(t.rstrip("…").split()) <= 6 for t in cancel.typical) and len(cancel.typical) == 2


def test_several_users_requests_are_quoted_with_slots_and_without_what_one_person_asked_about(embedder):
    said = [
        ("u-1", "I have to be in Chicago on 2026-04-21, flying out of SFO.", "SFO", "2026-04-21"),
        ("u-2", "I have to be in Tokyo on 2026-03-20, flying out of DEN.", "DEN", "2026-03-20"),
        ("u-3", "I have to be in Paris on 2026-05-11, flying out of BOS.", "BOS", "2026-05-11"),
    ]
    runs = [
        Run(
            run_id=f"r{n}",
            agent="bot",
            request=text,
            succeeded=True,
            user=user,
            given={origin.lower(): "origin", date: "date"},
        )
        for n, (user, text, origin, date) in enumerate(said)
    ]
    (intent,) = group_intents(
        runs, embedder.encode([r.request for r in runs]), distance=9.0, typical=3, typical_words=14
    )
    assert intent.typical == ["I have to be in … on <date>, flying out of <origin>."]
    for city in ("Chicago", "Tokyo", "Paris", "SFO", "2026"):
        assert city not in intent.condition
    one_user = [
        Run(run_id=f"r{n}", agent="bot", request=r.request, succeeded=True, user="u-1", given=r.given)
        for n, r in enumerate(runs)
    ]
    (own,) = group_intents(
        one_user, embedder.encode([r.request for r in runs]), distance=9.0, typical=3, typical_words=14
    )
    assert "Chicago" in own.condition  # one person's intent is theirs: quoted as they said it


def test_procedure_is_read_from_successes_with_each_values_source():
    records = []
    for n in range(3):
        s = f"s{n}"
        steps = [
            ("goal", {"content": "cancel my reservation, user id mia_li_3668"}),
            ("message", {"role": "user", "content": "cancel my reservation, user id mia_li_3668"}),
            ("tool_call", {"tool_name": "get_user_details", "tool_args": json.dumps({"user_id": "mia_li_3668"})}),
            ("tool_result", {"tool_name": "get_user_details", "tool_result": '{"reservations": ["NO6JO3"]}'}),
            ("tool_call", {"tool_name": "think", "tool_args": "{}"}),
            ("tool_call", {"tool_name": "cancel_reservation", "tool_args": json.dumps({"reservation_id": "NO6JO3"})}),
            ("tool_result", {"tool_name": "cancel_reservation", "tool_result": '{"status": "cancelled"}'}),
            ("outcome", {"outcome": "success"}),
        ]
        for i, (kind, fields) in enumerate(steps):
            records.append(
                {
                    "id": f"{s}/step{i}",
                    "agent": "a",
                    "session": s,
                    "goal_id": s,
                    "kind": kind,
                    "ts": T0 + dt.timedelta(minutes=10 * n, seconds=i),
                    **fields,
                }
            )
    runs = build_runs(records)
    assert [r.succeeded for r in runs] == [True] * 3 and runs[0].opening_id == "s0/step0"
    steps = procedure(runs)
    assert [(s.tool, s.args) for s in steps] == [
        ("get_user_details", [("user_id", "user")]),
        ("cancel_reservation", [("reservation_id", "get_user_details")]),
    ]


# --- lessons from outcomes ----------------------------------------------------------------------------------
def planted_runs() -> list[Run]:
    """20 runs: 10 looked the reservation up before cancelling (9 succeeded), 10 did not (1 succeeded)."""
    runs = []
    for n in range(20):
        checked = n < 10
        ok = n < 9 or n == 10
        calls = [Call("get_user_details", {"user_id": "u"}, {})]
        calls += [Call("get_reservation_details", {"reservation_id": "X"}, {})] if checked else []
        calls += [Call("cancel_reservation", {"reservation_id": "X"}, {})]
        runs.append(
            Run(
                run_id=f"task1/trial{n}",
                agent="a",
                request="cancel my trip",
                succeeded=ok,
                calls=calls,
                opening_id=f"task1/trial{n}/step1",
                ended=T0 + dt.timedelta(hours=n),
            )
        )
    return runs


def test_contrast_mining_finds_the_planted_difference_with_counts_and_p_value():
    found = contrasts(planted_runs(), ENGLISH, alpha=0.1, min_runs=3, max_lessons=3)
    top = found[0]
    assert top.feature in ("calls:get_reservation_details", "order:get_reservation_details<cancel_reservation")
    assert (top.with_ok, top.with_failed, top.without_ok, top.without_failed) == (9, 1, 1, 9)
    assert top.p_value == pytest.approx(fisher_exact([[9, 1], [1, 9]])[1]) and top.p_value < 0.01
    assert top.helps and len(found) == 1  # the other features split the runs the same way: nothing new
    assert "succeeded 9 of 10" in top.evidence(ENGLISH) and "succeeded 1 of 10" in top.evidence(ENGLISH)


def test_no_lesson_without_a_difference_that_beats_chance():
    runs = planted_runs()
    for run in runs:
        run.succeeded = run.run_id.endswith(("0", "2", "4", "6", "8"))  # success unrelated to the calls
    assert contrasts(runs, ENGLISH, alpha=0.1, min_runs=3, max_lessons=3) == []


def test_lesson_is_a_do_rule_with_its_evidence_runs():
    from expengine.lifecycle.refine.intents import Intent

    intent = Intent(key="intent:a:task1/trial0", agent="a", runs=planted_runs(), typical=["cancel my trip"])
    (lesson,) = lesson_drafts(intent, alpha=0.1, min_runs=3, max_lessons=3)
    assert lesson.condition == "For requests like 'cancel my trip'" and lesson.category == "lesson"
    assert lesson.action.startswith("call get_reservation_details")
    assert (lesson.successes, lesson.trials) == (9, 10) and lesson.support == 20
    assert lesson.source_ids[0] == "task1/trial0/step1"


def lesson(action: str, support: int, hour: int, feature: str = "calls:cancel_reservation") -> Draft:
    return Draft(
        kind="rule",
        category="lesson",
        source_ids=[f"r{i}" for i in range(support)],
        condition="For requests like 'cancel my trip'",
        action=action,
        subject=feature,
        as_of=T0 + dt.timedelta(hours=hour),
    )


def test_a_lesson_is_superseded_by_one_with_more_or_fresher_support():
    old = {
        "id": "u-old",
        "cluster_key": "intent:a:task1",
        "condition": "For requests like 'cancel my trip'",
        "action": "do not call cancel_reservation",
        "subject": "calls:cancel_reservation",
        "support": 6,
        "as_of": T0 + dt.timedelta(hours=5),
    }
    stronger = decide(
        lesson("call cancel_reservation", 12, 5), cluster_key="intent:a:task9", new_id="u-new", existing=[old]
    )
    assert stronger.new_active and stronger.losers == ["u-old"]
    weaker = decide(
        lesson("call cancel_reservation", 3, 1), cluster_key="intent:a:task9", new_id="u-new", existing=[old]
    )
    assert not weaker.new_active and weaker.winner == "u-old"
    other_feature = decide(
        lesson("call get_reservation_details", 3, 1, "calls:get_reservation_details"),
        cluster_key="intent:a:task9",
        new_id="u-new",
        existing=[old],
    )
    assert other_feature.new_active and other_feature.losers == []  # a different lesson, no conflict


def chat_run(task: int, trial: int, request: str, calls: list[str], reward: float) -> dict:
    traj = [{"role": "system", "content": "policy"}, {"role": "user", "content": request}]
    for n, tool in enumerate(calls):
        call_id = f"c{n}"
        traj.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": '{"reservation_id": "ZFA04Y"}'},
                    }
                ],
            }
        )
        traj.append({"role": "tool", "tool_call_id": call_id, "name": tool, "content": '{"status": "ok"}'})
    traj.append({"role": "assistant", "content": "Done."})
    return {"task_id": task, "trial": trial, "reward": reward, "traj": traj}


def test_lessons_are_written_by_refinement_and_traceable_with_trace(tmp_path, embedder):
    runs = [chat_run(1, n, CANCEL[n], ["get_reservation_details", "cancel_reservation"], 1.0) for n in range(4)]
    runs += [chat_run(2, n, CANCEL[n + 4], ["cancel_reservation"], 0.0) for n in range(4)]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs), encoding="utf-8")
    with Engine(store=tmp_path / "store", embedder=embedder, overrides={"llm.mode": "template"}) as engine:
        engine.ingest([str(path)], fmt="openai-chat")
        report = engine.refine(run_id="r1")
        assert report.intents == 1 and report.lessons >= 1
        units = {u["category"]: u for u in engine.units(status="active") if u["cluster_key"].startswith("intent:")}
        rule, learned = units["procedure"], units["lesson"]
        assert rule["action"].startswith("get_reservation_details(reservation_id")
        assert "then cancel_reservation(" in rule["action"] and "(seen 8 times, 4/8 succeeded)" in rule["text"]
        assert learned["action"].startswith("call get_reservation_details")
        assert "succeeded 4 of 4" in learned["text"] and "succeeded 0 of 4" in learned["text"]
        traced = engine.trace(learned["id"])
        assert sorted(r["id"] for r in traced["records"]) == sorted(
            f"task{t}/trial{n}/step1" for t in (1, 2) for n in range(4)
        )
        assert traced["missing_source_ids"] == [] and traced["history"][0]["action"] == "refined"
        hits = engine.query("please cancel my booking, I cannot fly", k=3, touch=False).hits
        assert any(h.type == "unit" and "cancel_reservation" in h.text for h in hits)
        assert engine.refine(run_id="r2").units_written == 0  # same runs, same outcomes: nothing rewritten


def test_a_tool_rule_gives_way_to_the_intent_procedure_that_calls_its_tool(tmp_path, embedder):
    """'To cancel reservation (cancel_reservation): call cancel_reservation(…)' restates the tool; the
    intent's procedure says when and after what. Off by config, the tool rules stay."""
    runs = [chat_run(1, n, CANCEL[n], ["get_reservation_details", "cancel_reservation"], 1.0) for n in range(4)]
    runs += [chat_run(2, n, CANCEL[n + 4], ["cancel_reservation"], 0.0) for n in range(4)]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs), encoding="utf-8")
    for retire in (True, False):
        overrides = {"llm.mode": "template", "lessons.retire_tool_rules": str(retire).lower()}
        with Engine(store=tmp_path / f"store-{retire}", embedder=embedder, overrides=overrides) as engine:
            engine.ingest([str(path)], fmt="openai-chat")
            report = engine.refine(run_id="r1")
            rules = engine.store.con.execute(
                "SELECT id, status, superseded_by, cluster_key FROM units WHERE kind = 'rule' AND condition LIKE 'To %'"
            ).fetchall()
            assert rules  # the tool clusters made tool rules
            if not retire:
                assert {status for _, status, _, _ in rules} == {"active"} and report.units_superseded == 0
                continue
            assert {status for _, status, _, _ in rules} == {"superseded"} and report.units_superseded == len(rules)
            procedure = engine.units(status="active", kind="rule")
            (winner,) = [u["id"] for u in procedure if u["category"] == "procedure"]
            assert {by for _, _, by, _ in rules} == {winner}
            history = engine.store.con.execute(
                "SELECT detail FROM history WHERE item_id = ? AND action = 'superseded'", [rules[0][0]]
            ).fetchall()
            assert history and "intent's procedure calls its tool" in history[0][0]
            hits = engine.query("please cancel my booking, I cannot fly", k=5, touch=False, kind="rule").hits
            assert hits and all(not h.text.startswith("To ") for h in hits)


# --- generalise across values; never recommend a failed path ---------------------------------------------
def coding_session(n: int, module: str, package: str | None, *, fix_works: bool) -> list[dict]:
    """run_tests fails on a missing module; the agent installs `package` (None: reruns at once)."""
    s, base = f"s{n}", T0 + dt.timedelta(hours=n)
    install = [
        ("tool_call", "pip_install", {"tool_args": json.dumps({"package": package})}),
        ("tool_result", "pip_install", {"tool_result": f"Successfully installed {package}"}),
    ]
    rows = [
        ("tool_call", "run_tests", {"tool_args": '{"cmd": "pytest -x"}'}),
        ("tool_result", "run_tests", {"tool_error": f"ModuleNotFoundError: No module named '{module}'"}),
        *(install if package else []),
        ("tool_call", "run_tests", {"tool_args": '{"cmd": "pytest -x"}'}),
        (
            "tool_result",
            "run_tests",
            {"tool_result" if fix_works else "tool_error": "12 passed" if fix_works else f"No module named '{module}'"},
        ),
    ]
    return [
        {
            "id": f"{s}-{i}",
            "agent": "coder",
            "session": s,
            "goal_id": None,
            "ts": base + dt.timedelta(seconds=i),
            "kind": kind,
            "role": "tool",
            "content": None,
            "text": "",
            "tool_name": tool,
            "tool_args": None,
            "tool_result": None,
            "tool_error": None,
            "outcome": None,
            "feedback_signal": None,
            "category": "tool",
            **fields,
        }
        for i, (kind, tool, fields) in enumerate(rows)
    ]


def test_errors_differing_only_in_a_module_name_form_one_rule_with_the_value_flowing_into_the_action():
    assert generalise("ImportError: No module named 'jwt'") == (
        "ImportError: No module named <module>",
        {"module": "jwt"},
    )
    assert generalise("cannot open 'src/app.py': flight HAT030")[0] == "cannot open <file>: flight <id>"
    modules = ["dotenv", "jwt", "requests", "yaml", "freezegun"]
    rows = [r for n, m in enumerate(modules) for r in coding_session(n, m, m, fix_works=True)]
    rows += coding_session(9, "dateutil", "python-dateutil", fix_works=True)
    errors = [r for r in rows if r["tool_error"]]
    mined = mine_cluster(errors, context=rows)
    assert len(mined.errors) == 1 and mined.errors[0].count == 6
    draft = rule_draft(mined)
    assert draft.condition == "When run_tests fails with 'ModuleNotFoundError: No module named <module>'"
    assert draft.action.startswith("call pip_install(package=<module>), then rerun run_tests")
    assert "dateutil → python-dateutil" in draft.action
    assert (draft.successes, draft.trials) == (6, 6)


def test_a_rule_never_recommends_a_path_that_failed():
    rows = [r for n in range(3) for r in coding_session(n, "jwt", None, fix_works=False)]
    rows += [r for n in range(3, 5) for r in coding_session(n, "jwt", "PyJWT", fix_works=True)]
    errors = [r for r in rows if r["tool_error"]]
    draft = rule_draft(mine_cluster(errors, context=rows))
    assert (
        draft.action
        == "call pip_install(package=<module>), then rerun run_tests (respelled where needed, e.g. jwt → PyJWT)"
    )
    assert (draft.successes, draft.trials) == (2, 2)
    assert "failed again after: an immediate rerun (3x)" in draft.pitfall
    only_failures = [r for n in range(3) for r in coding_session(n, "jwt", None, fix_works=False)]
    failed = rule_draft(mine_cluster([r for r in only_failures if r["tool_error"]], context=only_failures))
    assert failed.action.startswith("stop: no fix for this run_tests error has worked yet")
    assert "rerun" not in failed.action and "failed again after: an immediate rerun" in failed.pitfall


ENGLISH_TEMPLATE_WORDS = ("When ", "fails with", "call ", ", then", "Expected", "Pitfall", "seen ", "requests like")


def test_rules_from_chinese_sources_are_worded_in_chinese():
    from dataclasses import replace

    from expengine.lifecycle.refine.intents import Intent
    from expengine.lifecycle.refine.lessons import procedure_draft
    from expengine.lifecycle.refine.templates import render_text

    rows = [r for n, m in enumerate(("jwt", "yaml", "requests")) for r in coding_session(n, m, m, fix_works=True)]
    for r in rows:
        if r["tool_error"]:
            r["tool_error"] = f"测试失败：缺少依赖模块 {r['tool_error'].rsplit(' ', 1)[-1]}，请先安装"
    # tool calls and errors alone say too little: the agent's language (Chinese here) words the rule
    draft = rule_draft(mine_cluster([r for r in rows if r["tool_error"]], context=rows, agent_wording=CHINESE))
    assert draft.language == "zh"
    assert draft.condition == "当 run_tests 报错“测试失败：缺少依赖模块 <value>，请先安装”时"
    assert draft.action.startswith("调用 pip_install(package=<value>)，然后重新调用 run_tests")
    text = render_text(draft)
    assert text.startswith(draft.condition + "：") and "（出现 3 次，成功 3/3）" in text
    assert not any(word in text for word in ENGLISH_TEMPLATE_WORDS)

    runs = [replace(run, request="你好，帮我取消这次的行程订单") for run in planted_runs()]
    intent = Intent(
        key="intent:a:task1/trial0", agent="a", runs=runs, typical=[shorten(runs[0].request, 14)], wording=CHINESE
    )
    (lesson,) = lesson_drafts(intent, alpha=0.1, min_runs=3, max_lessons=3)
    assert lesson.condition == "遇到类似“帮我取消这次的行程订单”的请求时"
    assert lesson.action.startswith("调用 get_reservation_details") or lesson.action.startswith("先调用")
    assert "的运行成功 9/10 次；没有这样做的运行成功 1/10 次" in lesson.expected_outcome
    main = procedure_draft(intent, share=0.5, pitfalls=[lesson])
    assert main is not None and main.action.startswith("get_user_details(")
    assert "，然后 cancel_reservation(" in main.action and main.expected_outcome == "cancel_reservation 成功，请求完成"
    for unit in (lesson, main):
        assert not any(word in render_text(unit) for word in ENGLISH_TEMPLATE_WORDS)


def test_a_path_quotes_a_note_when_most_of_its_runs_noted_something_first_however_worded():
    from collections import Counter

    from expengine.lifecycle.refine.recovery import RecoveryPath

    notes = Counter({"rate limited (429); waiting 60 s before retrying.": 3, "Backing off 60 seconds.": 2})
    noted = RecoveryPath(steps=(), count=8, recovered=8, notes=notes)
    assert noted.describe(ENGLISH) == "note 'rate limited (429); waiting 60 s before retrying.'"
    assert noted.describe(CHINESE) == "记下“rate limited (429); waiting 60 s before retrying.”"
    assert RecoveryPath(steps=(), count=11, recovered=11, notes=notes).describe(ENGLISH) == ""  # 5 of 11 noted
    one_offs = Counter({f"thought number {n}": 1 for n in range(5)})  # most runs noted, each its own way
    assert RecoveryPath(steps=(), count=8, recovered=8, notes=one_offs).describe(ENGLISH) == ""
