"""Initial importance, category and protection of a record, by transparent rules."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Chinese has no spaces, so its phrases match anywhere (no \b); each is specific enough not to occur by chance.
_CN_STRONG_PREFERENCE = r"我不喜欢|我不愛|我不爱|讨厌|討厭|过敏|過敏|我更喜欢|偏好"
_CN_SAFETY = r"总是|總是|永远不要|永遠不要|绝不|絕不|绝对不要|千万不要|千萬不要|务必|必须|不要再|密码|密碼|记住|記住|协议|協議|规定"
PROTECTED_PHRASES = re.compile(
    r"(?i)\b(always|never|password|protocol|must not|do not ever|i hate|i don'?t like|i do not like|"
    rf"allergic|i prefer|i love|don'?t ever)\b|{_CN_SAFETY}|{_CN_STRONG_PREFERENCE}"
)
PREFERENCE = re.compile(
    r"(?i)\b(i hate|i don'?t like|i do not like|i prefer|i love|i like|allergic|favou?rite)\b|"
    rf"{_CN_STRONG_PREFERENCE}|我喜欢|最喜欢"
)
PERSONAL_FACT = re.compile(
    r"(?i)\b(i am|i'm|i live|i moved|my (?:name|wife|husband|son|daughter|kid|kids|mom|dad|sister|brother|"
    r"partner|dog|cat|job|birthday|home|address)|i work|i have|i've been|i was|we (?:went|moved|have))\b"
)
CHATTER = re.compile(
    r"(?i)^\s*(?:[A-Z][\w .'-]{0,30}:\s*)?(hi|hello|hey|thanks|thank you|thx|ok|okay|sure|great|cool|bye|goodbye|good morning|"
    r"good night|you'?re welcome|no problem|np|yes|no|yep|nope|got it|sounds good|awesome|nice)"
    r"[\s!.,:)]*(?:(?:there|so much|a lot|again|!)\s*)*[\s!.,:)]*$"
)

# Chinese chatter: greetings, thanks and acknowledgements with nothing else in the message
ZH_CHATTER = re.compile(
    r"^\s*(?:(?:你好|您好|嗨|哈喽|早上好|晚上好|晚安|谢谢|谢谢你|多谢|感谢|不客气|没关系|再见|拜拜|好的|好|嗯|嗯嗯|"
    r"收到|明白了|知道了|没问题|可以|行|对|是的|哈哈|太好了)[\s!！。.,，、~～)）]*)+$"
)


@dataclass(frozen=True)
class Assessment:
    importance: float
    category: str
    protected: bool


def assess(
    *,
    kind: str,
    role: str | None,
    content: str | None,
    tool_error: str | None,
    outcome: str | None,
    goal_long_term: bool | None,
    has_goal: bool,
    importance: float | None,
    category: str | None,
    confidence: float | None,
) -> Assessment:
    """Rules from the brief: errors, outcomes, feedback and protected phrases matter more; chatter less."""
    text = content or ""
    protected = bool(PROTECTED_PHRASES.search(text)) and role in (None, "user", "system")
    if tool_error:
        score, cat = 0.8, "error"
    elif kind == "outcome":
        score, cat = (0.7 if outcome == "success" else 0.8), "outcome"
    elif kind == "feedback":
        score, cat = 0.8, "feedback"
    elif kind == "goal":
        score, cat = (0.9 if goal_long_term else 0.6), "goal"
    elif protected and PREFERENCE.search(text):
        score, cat = 0.9, "preference"
    elif protected:
        score, cat = 0.9, "safety"
    elif kind == "message" and (CHATTER.match(text) or ZH_CHATTER.match(text)):
        score, cat = 0.1, "chatter"
    elif kind == "message" and role == "user" and PREFERENCE.search(text):
        score, cat = 0.7, "preference"
    elif kind == "message" and PERSONAL_FACT.search(text):
        score, cat = 0.6, "fact"
    elif kind in ("tool_call", "tool_result"):
        score, cat = 0.4, "process" if has_goal else "tool"
    elif kind == "note":
        score, cat = 0.5, "note"
    elif kind == "observation":
        score, cat = 0.4, "observation"
    else:
        score, cat = 0.3, "process" if has_goal else "conversation"
    if confidence is not None:
        score *= max(0.0, min(1.0, confidence)) * 0.5 + 0.5
    if importance is not None:
        score = importance
    if goal_long_term:
        protected = True
    return Assessment(importance=round(max(0.0, min(1.0, score)), 4), category=category or cat, protected=protected)
