"""Redaction both ways: planted secrets never reach the store; flight numbers, dates and amounts stay untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assess_event, shared_data
from secrets_table import MUST_KEEP, SECRETS

from expengine.ingest.redact import Redactor

TS = "2026-03-01T09:00:00Z"


@pytest.mark.parametrize("kind, text, secret", SECRETS, ids=[k for k, _, _ in SECRETS])
def test_each_secret_kind_is_redacted_once_and_stays_redacted(kind, text, secret):
    redactor = Redactor()
    out, n = redactor(text)
    assert secret not in out and n >= 1 and "[REDACTED:" in out
    assert redactor(out) == (out, 0)  # idempotent


@pytest.mark.parametrize("text", MUST_KEEP)
def test_look_alikes_are_left_alone(text):
    assert Redactor()(text) == (text, 0)


def test_no_false_positive_in_a_real_airline_log_but_its_emails():
    """Every message and tool call of the tau-bench airline runs: only the customers' e-mail addresses go."""
    runs = json.loads(shared_data("tau_bench_airline/gpt-4o-airline_tasks00-39.json").read_text(encoding="utf-8"))
    redactor = Redactor()
    for run in runs:
        redactor.value(run["traj"])
    assert set(redactor.counts) == {"EMAIL"} and redactor.counts["EMAIL"] > 50


def test_a_secret_named_key_is_redacted_whole_at_any_depth_and_counts_are_not():
    value = {
        "db": [{"password": "plainword", "AWS_SECRET_ACCESS_KEY": "abc", "user": "kim"}],
        "max_tokens": 256,
        "token_count": 5,
        "tokens": ["a"],
        "passwordless": True,
    }
    out, n = Redactor().value(value)
    assert out == {
        "db": [{"password": "[REDACTED:SECRET]", "AWS_SECRET_ACCESS_KEY": "[REDACTED:SECRET]", "user": "kim"}],
        "max_tokens": 256,
        "token_count": 5,
        "tokens": ["a"],
        "passwordless": True,
    }
    assert n == 2


def test_a_card_number_given_as_a_json_number_is_redacted():
    out, n = Redactor().value({"card": {"number": 4111111111111111}, "amount": 1234})
    assert out == {"card": {"number": "[REDACTED:CARD]"}, "amount": 1234} and n == 1


def _planted_log(path: Path) -> tuple[str, int]:
    """Every secret in message text, tool args at depth, a tool result, a tool error and meta; one reject too."""
    lines, planted = [], 0
    for n, (kind, text, _) in enumerate(SECRETS):
        lines += [
            {
                "id": f"m{n}",
                "ts": TS,
                "kind": "message",
                "role": "user",
                "content": f"note: {text}",
                "meta": {"client": {"headers": [{"x-debug": text}]}, "tags": [text]},
            },
            {
                "id": f"c{n}",
                "ts": TS,
                "kind": "tool_call",
                "tool": {"name": "deploy", "args": {"env": {"vars": [{"v": text}]}}},
            },
            {"id": f"r{n}", "ts": TS, "kind": "tool_result", "tool": {"name": "deploy", "result": {"log": [text]}}},
            {"id": f"e{n}", "ts": TS, "kind": "tool_result", "tool": {"name": "deploy", "error": f"failed: {text}"}},
        ]
        planted += 5
    rows = [json.dumps(line, ensure_ascii=False) for line in lines]
    rows.append(json.dumps({"ts": TS, "kind": "nonsense", "content": SECRETS[0][1]}))  # rejected, raw kept
    planted += 1
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return str(path), planted


def test_planted_secrets_are_nowhere_in_the_store_folder(make_engine, tmp_path):
    log, planted = _planted_log(tmp_path / "planted.jsonl")
    engine = make_engine()
    result = engine.ingest([log])
    assert result.rejected == 1 and result.stored == 4 * len(SECRETS)
    engine.compact(refine=False)  # a snapshot copies the store: it must hold no secret either
    tables = [t for (t,) in engine.store.con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
    rows = [row for t in tables for row in engine.store.con.execute(f'SELECT * FROM "{t}"').fetchall()]
    rows += [
        tuple(r.values())
        for name in ("memories", "units")
        if engine.store.index.table(name) is not None
        for r in engine.store.index.table(name).to_arrow().to_pylist()
    ]
    dump = "\n".join(str(cell) for row in rows for cell in row if isinstance(cell, str))  # vectors hold digits
    engine.close()
    blobs = b"".join(p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file())
    stored = [
        kind
        for kind, _, secret in SECRETS
        if secret.encode() in blobs or secret in dump or secret.replace("\n", "\\n") in dump
    ]
    assert stored == [], f"{len(stored)} of {len(SECRETS)} kinds ({planted} secrets planted) stored: {stored}"
    assert sum(result.redacted_by_kind.values()) >= planted


def test_look_alikes_survive_ingest_verbatim(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest(
        [
            write_jsonl(
                "keep.jsonl",
                [
                    {
                        "id": f"k{n}",
                        "ts": TS,
                        "kind": "tool_result",
                        "content": text,
                        "tool": {"name": "get_reservation_details", "result": {"value": text}},
                        "meta": {"value": text},
                    }
                    for n, text in enumerate(MUST_KEEP)
                ],
            )
        ]
    )
    rows = engine.store.con.execute("SELECT content, tool_result, meta, redactions FROM records ORDER BY id").fetchall()
    assert len(rows) == len(MUST_KEEP) and all(r[3] == 0 for r in rows)
    assert sorted(r[0] for r in rows) == sorted(MUST_KEEP)
    assert all(json.loads(r[1])["value"] == r[0] == json.loads(r[2])["value"] for r in rows)


# --- Chinese rules ----------------------------------------------------------------------------------------
def _assess_user_message(text: str):
    return assess_event(content=text)


@pytest.mark.parametrize(
    "text, category",
    [
        ("总是先确认订单号再退款", "safety"),
        ("永远不要把用户的密码发给别人", "safety"),
        ("绝不在周末部署", "safety"),
        ("请记住：退款必须走协议流程", "safety"),
        ("我不喜欢香菜", "preference"),
        ("我讨厌早上开会", "preference"),
        ("我对花生过敏", "preference"),
    ],
)
def test_chinese_protected_phrases_raise_importance(text, category):
    a = _assess_user_message(text)
    assert a.protected and a.category == category and a.importance >= 0.9


@pytest.mark.parametrize("text", ["今天天气不错", "我们明天去公园散步", "航班HAT030改到下午"])
def test_ordinary_chinese_is_not_protected(text):
    a = _assess_user_message(text)
    assert not a.protected and a.importance < 0.9


def test_chinese_secrets_never_stored(make_engine, write_jsonl):
    engine = make_engine()
    engine.ingest(
        [
            write_jsonl(
                "cn.jsonl",
                [
                    {
                        "id": "cn1",
                        "ts": TS,
                        "kind": "message",
                        "role": "user",
                        "content": "我的手机号是13812345678，身份证号11010519491231002X，密码是abc12345。",
                    }
                ],
            )
        ]
    )
    (content,) = engine.store.con.execute("SELECT content FROM records WHERE id = 'cn1'").fetchone()
    assert content == ("我的手机号是[REDACTED:CN_MOBILE]，身份证号[REDACTED:CN_ID]，密码是[REDACTED:PASSWORD]。")
    assert Redactor()("身份证号110105194912310021")[1] == 0  # a wrong check character is not an identity number


def test_a_secret_found_by_its_cue_is_redacted_where_it_is_repeated_bare():
    """A real session's log line: `Bearer X is not valid, it should be X` (bench/wild.py found the second X
    stored); a later text repeating X is redacted too, and an unrelated long word is not."""
    redactor = Redactor()
    text, n = redactor("user_id=Bearer dev-codemie-user is not valid, it should be dev-codemie-user. 127.0.0.1")
    assert text is not None and "dev-codemie-user" not in text and n == 2
    later, n = redactor("retrying with dev-codemie-user; authentication configuration unchanged")
    assert later == "retrying with [REDACTED:TOKEN]; authentication configuration unchanged" and n == 1
    assert redactor.counts == {"TOKEN": 3}
