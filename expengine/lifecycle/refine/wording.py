"""The words units are made of, in the language of their sources.

A rule mined from Chinese logs reads as Chinese ("当 book_train 报错“余票不足”时：调用 search_trains(…)，
然后重新调用 book_train。"), not as an English template around Chinese quotes. The language is the
one most of the sources' words are in (CJK characters counted one word each, as in ingest's script
counts), so a Chinese log with English tool names and JSON keys is still Chinese. Tool names,
arguments and quotes stay as the sources spell them: grounding checks them against the sources.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from ...textutil import count_scripts

# share of the sources' words in CJK from which units are worded in Chinese
CHINESE_SHARE = 0.5
# share of one language from which a cluster's or an intent's own words decide over the agent's
CLEAR_SHARE = 0.8
# fewer words than this say too little about the language: the agent's language decides
MIN_WORDS = 20


@dataclass(frozen=True)
class Wording:
    """One language's phrasebook: format strings filled by the templates, the intent rules and lessons."""

    language: str
    then: str
    before_latin: str  # after `then`, before a step that starts with a tool name
    quote: str
    list_separator: str
    clause_separator: str
    # templates.rule_draft and recovery.RecoveryPath
    call: str
    first_then_call: str
    note: str
    rerun: str
    bare_rerun: str
    immediate_rerun: str
    respelled: str
    when_fails: str
    no_fix: str
    to_use: str
    returns: str
    succeeds: str
    for_example: str
    error_seen: str
    recovered: str
    failed_again: str
    user_corrected: str
    standing_instruction: str
    follow_correction: str
    times: str
    # render_text
    rule_sentence: str
    sentence_end: str
    sentence_gap: str  # between a rule's sentences: a space in English, none in Chinese
    expected: str
    pitfall: str
    seen: str
    succeeded_of: str
    evidence: str
    # intents.py
    requests_like: str
    request_separator: str
    from_user: str
    from_agent: str
    from_result: str
    greetings: tuple[str, ...]
    # lessons.py
    did_call: str
    did_call_with: str
    did_repeat: str
    did_order: str
    were_corrected: str
    do_call: str
    do_call_with: str
    do_repeat: str
    do_order: str
    get_it_right: str
    do_not: str
    contrast_evidence: str
    procedure_done: str
    no_path: str
    failed_runs_called: str

    def quoted(self, text: str) -> str:
        return self.quote.format(text=text)

    def joined(self, parts: Iterable[str]) -> str:
        """Steps in order: 'a, then b'; '甲，然后乙', with a space before a step that starts with a
        tool name ('，然后 book_train(…)')."""
        text = ""
        for part in filter(None, parts):
            if text:
                text += self.then + (self.before_latin if part[:1].isascii() else "")
            text += part
        return text


ENGLISH = Wording(
    language="en",
    then=", then ",
    before_latin="",
    quote="'{text}'",
    list_separator=", ",
    clause_separator="; ",
    call="call {call}",
    first_then_call="first {steps}, then call {call}",
    note="note {note!r}",
    rerun="rerun {tool}",
    bare_rerun="rerun",
    immediate_rerun="an immediate rerun",
    respelled=" (respelled where needed, e.g. {examples})",
    when_fails="When {tool} fails with {error}",
    no_fix="stop: no fix for this {tool} error has worked yet",
    to_use="To {human} ({tool})",
    returns="{tool} returns {keys}",
    succeeds="{tool} succeeds",
    for_example=", e.g. {example}",
    error_seen="error {error} ({count}x)",
    recovered=" ⇒ {path} ({recovered}/{count} recovered)",
    failed_again="; failed again after: {path} ({count}x)",
    user_corrected="the user corrected: {quoted}",
    standing_instruction="Standing instruction from the user",
    follow_correction="follow the user's correction {quoted}",
    times=" ({count}x)",
    rule_sentence="{condition}: {action}.",
    sentence_end=".",
    sentence_gap=" ",
    expected="Expected: {text}.",
    pitfall="Pitfall: {text}.",
    seen="seen {count} times",
    succeeded_of=", {successes}/{trials} succeeded",
    evidence="({text})",
    requests_like="For requests like {quotes}",
    request_separator=" / ",
    from_user="from the user",
    from_agent="chosen by the agent",
    from_result="from {tool} result",
    greetings=("hi", "hello", "hey", "there", "hi there"),
    did_call="called {tool}",
    did_call_with="called {tool} with {name}={value}",
    did_repeat="called {tool} more than once",
    did_order="called {first} before {second}",
    were_corrected="were corrected by the user",
    do_call="call {tool}",
    do_call_with="call {tool} with {name}={value}",
    do_repeat="call {tool} more than once",
    do_order="call {first} before {second}",
    get_it_right="get the request right before the user has to correct it",
    do_not="do not {act}",
    contrast_evidence=(
        "runs that {phrase} succeeded {with_ok} of {with_n}; runs that did not succeeded {without_ok} of "
        "{without_n} (Fisher's exact p = {p})"
    ),
    procedure_done="{tool} succeeds and the request is done",
    no_path="no path has succeeded yet for these requests (0 of {runs} runs)",
    failed_runs_called="the failed runs called {tools}",
)

CHINESE = Wording(
    language="zh",
    then="，然后",
    before_latin=" ",
    quote="“{text}”",
    list_separator="、",
    clause_separator="；",
    call="调用 {call}",
    first_then_call="先调用 {steps}，再调用 {call}",
    note="记下“{note}”",
    rerun="重新调用 {tool}",
    bare_rerun="直接重试",
    immediate_rerun="立即重试",
    respelled="（必要时改写名称，例如 {examples}）",
    when_fails="当 {tool} 报错{error}时",
    no_fix="停止：{tool} 的这个错误还没有任何修复办法奏效",
    to_use="需要 {tool} 时",
    returns="{tool} 返回 {keys}",
    succeeds="{tool} 调用成功",
    for_example="，例如{example}",
    error_seen="错误{error}（{count} 次）",
    recovered=" ⇒ {path}（{recovered}/{count} 次恢复）",
    failed_again="；这样做之后仍然失败：{path}（{count} 次）",
    user_corrected="用户纠正过：{quoted}",
    standing_instruction="用户的长期要求",
    follow_correction="按用户的纠正去做：{quoted}",
    times="（{count} 次）",
    rule_sentence="{condition}：{action}。",
    sentence_end="。",
    sentence_gap="",
    expected="预期：{text}。",
    pitfall="注意：{text}。",
    seen="出现 {count} 次",
    succeeded_of="，成功 {successes}/{trials}",
    evidence="（{text}）",
    requests_like="遇到类似{quotes}的请求时",
    request_separator="、",
    from_user="取自用户的话",
    from_agent="由智能体决定",
    from_result="取自 {tool} 的结果",
    greetings=("你好", "您好", "嗨", "哈喽", "在吗"),
    did_call="调用了 {tool}",
    did_call_with="调用 {tool} 时传了 {name}={value}",
    did_repeat="多次调用了 {tool}",
    did_order="先调用 {first} 再调用 {second}",
    were_corrected="被用户纠正过",
    do_call="调用 {tool}",
    do_call_with="调用 {tool} 时传 {name}={value}",
    do_repeat="多次调用 {tool}",
    do_order="先调用 {first} 再调用 {second}",
    get_it_right="在用户纠正之前就把请求理解对",
    do_not="不要{act}",
    contrast_evidence=(
        "{phrase}的运行成功 {with_ok}/{with_n} 次；没有这样做的运行成功 {without_ok}/{without_n} 次"
        "（Fisher 精确检验 p = {p}）"
    ),
    procedure_done="{tool} 成功，请求完成",
    no_path="这类请求还没有成功过（{runs} 次运行中成功 0 次）",
    failed_runs_called="失败的运行调用了 {tools}",
)

WORDINGS = {w.language: w for w in (ENGLISH, CHINESE)}


def wording_for(texts: Iterable[str], fallback: Wording = ENGLISH, *, decisive: float = CHINESE_SHARE) -> Wording:
    """Chinese when a `decisive` share of the words of `texts` is CJK, English when that share is
    Latin and other scripts; `fallback` in between, or when there are fewer than `MIN_WORDS` words
    to tell by (a cluster of tool calls). An agent's language is decided at one half; a cluster's and
    an intent's only when they are clearly of one language (`CLEAR_SHARE`), else the agent's holds."""
    counts: Counter[str] = count_scripts(texts)
    total = sum(counts.values())
    if total < MIN_WORDS:
        return fallback
    share = counts["cjk"] / total
    if share >= decisive:
        return CHINESE
    return ENGLISH if share <= 1 - decisive else fallback


_RENDERED_COUNTS = re.compile(r"(\d+)/(\d+) succeeded\)$|成功 (\d+)/(\d+)）$")


def rendered_counts(text: str) -> tuple[int, int] | None:
    """(successes, trials) from the end of a rule's text as `render_text` wrote it, in either language."""
    match = _RENDERED_COUNTS.search(text)
    if match is None:
        return None
    successes, trials = (int(g) for g in match.groups() if g is not None)
    return successes, trials
