"""Rules keyed by the situation: runs grouped into intents by what they were asked, and the procedure
that succeeded for each intent.

A *run* is the records of one goal (or session) in time order: its request (the goal description or
first user message), its tool calls with arguments, and its outcome. Runs of one agent are grouped
by the embeddings of their requests (average-link agglomerative clustering on cosine distance): an
intent is what a new request of that kind looks like, which is all an agent knows when a request
comes in. An intent is described by its most typical requests (those nearest its centroid).

The procedure of an intent is read from its successful runs only: the tools most of them called, in
their usual order, each with the argument names they passed and where each value came from (said by
the user, or read from an earlier tool's result). A failed path is never an action (see lessons.py
for what separates the failures).

An intent whose runs are several users' is shared know-how: its condition quotes their requests with
each value the user gave a tool (a city, an order id, a date) put back as the argument's name ("Book
a flight <origin>-><destination> <date> please"), so one person's trip never reaches another's prompt.

Pure functions over record dicts and vectors; refinement feeds them and writes the units.
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...textutil import CJK
from .recovery import SCRATCHPAD_TOOLS, tool_arguments
from .wording import CHINESE, CLEAR_SHARE, ENGLISH, Wording, wording_for

MIN_VALUE_CHARS = 3  # shorter values ('1', 'no') appear everywhere by chance: provenance says nothing


@dataclass
class Call:
    tool: str
    args: dict[str, Any]
    sources: dict[str, str]  # argument name → 'user' | 'agent' | the tool whose result held the value
    failed: bool = False


@dataclass
class Run:
    """One goal's records, distilled: what was asked, what was called, how it ended."""

    run_id: str
    agent: str
    request: str
    succeeded: bool | None
    calls: list[Call] = field(default_factory=list)
    opening_id: str = ""  # the record that opens the run: a unit's evidence names one per run
    corrected: bool = False
    ended: dt.datetime | None = None
    user: str | None = None  # whose run it is (None: no one's)
    given: dict[str, str] = field(default_factory=dict)  # a value the user gave a tool → the argument's name

    @property
    def slotted_request(self) -> str:
        """The request with every value the user gave a tool put back as the argument's name."""
        text = self.request
        for value in sorted(self.given, key=len, reverse=True):
            text = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", f"<{self.given[value]}>", text, flags=re.IGNORECASE)
        return text

    @property
    def tools(self) -> list[str]:
        return [c.tool for c in self.calls]


@dataclass
class Intent:
    key: str
    agent: str
    runs: list[Run]
    typical: list[str]  # shortened requests nearest the centroid, most typical first
    wording: Wording = ENGLISH  # the language of its requests: its rules are worded in it

    @property
    def successes(self) -> list[Run]:
        return [r for r in self.runs if r.succeeded]

    @property
    def failures(self) -> list[Run]:
        return [r for r in self.runs if r.succeeded is False]

    @property
    def condition(self) -> str:
        words = self.wording
        return words.requests_like.format(quotes=words.request_separator.join(words.quoted(t) for t in self.typical))


def _provenance(value: Any, user_text: str, results: list[tuple[str, str]]) -> str:
    """Where a call's argument value came from: the user's words, else an earlier tool's result."""
    atoms = _atoms(value)
    if not atoms:
        return "agent"
    if all(a in user_text for a in atoms):
        return "user"
    for tool, text in reversed(results):
        if all(a in text or a in user_text for a in atoms):
            return tool
    return "agent"


def _atoms(value: Any) -> list[str]:
    """A call argument's values (lower case) long enough to say where they came from."""
    values = value if isinstance(value, list) else [value]
    atoms = [str(v).lower() for v in values if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    return [a for a in atoms if len(a) >= MIN_VALUE_CHARS]


def _outcome(records: list[dict[str, Any]], status: str | None) -> bool | None:
    """Success from the run's outcome record, else its goal status, else explicit feedback on it."""
    for r in reversed(records):
        if r["kind"] == "outcome" and r.get("outcome") in ("success", "failure"):
            return r["outcome"] == "success"
    if status in ("succeeded", "failed"):
        return status == "succeeded"
    signals = [r.get("feedback_signal") for r in records if r["kind"] == "feedback"]
    if "negative" in signals:
        return False
    return True if "positive" in signals else None


def build_runs(records: list[dict[str, Any]], goal_status: dict[str, str] | None = None) -> list[Run]:
    """Records (any order, with goal_id or session) → one Run per goal that has a request."""
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        key = r.get("goal_id") or r.get("session")
        if key:
            by_run[key].append(r)
    runs = []
    for key, members in by_run.items():
        members.sort(key=lambda r: (r["ts"], r["id"]))
        run = _run(key, members, (goal_status or {}).get(key))
        if run is not None:
            runs.append(run)
    return sorted(runs, key=lambda r: r.run_id)


def _run(key: str, members: list[dict[str, Any]], status: str | None) -> Run | None:
    opening = next((r for r in members if r["kind"] == "goal" and (r.get("content") or r.get("text"))), None)
    first_user = next((r for r in members if r["kind"] == "message" and r.get("role") == "user"), None)
    source = opening or first_user
    if source is None:
        return None
    # the user's own words, else the goal's description (its text without the 'goal open: ' label)
    said = first_user or source
    request = _GOAL_LABEL.sub("", " ".join(str(said.get("content") or said.get("text") or "").split()))
    if not request:
        return None
    run = Run(
        run_id=key,
        agent=members[0]["agent"],
        request=request,
        succeeded=_outcome(members, status),
        ended=members[-1]["ts"],
        user=next((r["user"] for r in members if r.get("user")), None),
    )
    run.opening_id = source["id"]
    user_text = ""
    results: list[tuple[str, str]] = []
    pending: dict[str, Call] = {}
    for r in members:
        if r["kind"] == "message" and r.get("role") == "user":
            user_text += " " + (r.get("content") or "").lower()
            run.corrected |= r is not first_user and r.get("category") in ("correction", "safety")
        elif r["kind"] == "feedback" and r.get("feedback_signal") == "negative":
            run.corrected = True
        elif r["kind"] == "tool_call" and r.get("tool_name") and r["tool_name"] not in SCRATCHPAD_TOOLS:
            args = tool_arguments(r)
            call = Call(r["tool_name"], args, {name: _provenance(v, user_text, results) for name, v in args.items()})
            run.calls.append(call)
            run.given.update(
                (atom, name) for name, origin in call.sources.items() if origin == "user" for atom in _atoms(args[name])
            )
            pending[r["tool_name"]] = call
        elif r["kind"] == "tool_result" and r.get("tool_name"):
            if r.get("tool_error") and r["tool_name"] in pending:
                pending[r["tool_name"]].failed = True
            results.append((r["tool_name"], str(r.get("tool_result") or r.get("tool_error") or "").lower()))
    return run


def shorten(text: str, words: int) -> str:
    """The request without greetings, cut at `words` words: what a condition quotes. Chinese has no
    spaces: its greeting is cut at the first punctuation, and it is cut at two characters a word."""
    if CJK.search(text):
        head, *rest = _STOPS.split(text, maxsplit=1)
        if rest and head.strip() in CHINESE.greetings:
            text = rest[0].strip()
        limit = 2 * words
        return text[:limit] + ("…" if len(text) > limit else "")
    parts = text.split()
    while parts and parts[0].lower().strip("!,.") in ENGLISH.greetings:
        parts = parts[1:]
    clipped = " ".join(parts[:words]) or text
    return clipped + ("…" if len(parts) > words else "")


_GOAL_LABEL = re.compile(r"^goal \w+: ")
_STOPS = re.compile(r"[，。！？、,.!?\s]")


def group_intents(
    runs: list[Run],
    vectors: np.ndarray,
    *,
    distance: float,
    typical: int = 3,
    typical_words: int = 14,
    agent_wording: Wording = ENGLISH,
) -> list[Intent]:
    """Runs of one agent grouped by their (unit-length) request vectors: Ward linkage cut at `distance`,
    which keeps one wide topic ('change my flight') from swallowing the rest; each intent keyed by its
    most typical run, described by its `typical` requests, worded in their language (`agent_wording`
    when they are too short to tell)."""
    from sklearn.cluster import AgglomerativeClustering

    if not runs:
        return []
    vectors = np.asarray(vectors, dtype=np.float32)
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    if len(runs) == 1:
        labels = np.zeros(1, dtype=int)
    else:
        labels = AgglomerativeClustering(n_clusters=None, distance_threshold=distance, linkage="ward").fit_predict(
            vectors
        )
    intents = []
    for label in sorted(set(labels.tolist())):
        members = np.flatnonzero(labels == label)
        centroid = vectors[members].mean(axis=0)
        order = members[np.argsort(-(vectors[members] @ centroid), kind="stable")]
        members_runs = [runs[i] for i in order]
        shared = len({r.user for r in members_runs} - {None}) > 1
        said = framed(members_runs) if shared else [r.request for r in members_runs]
        quotes = list(dict.fromkeys(shorten(text, typical_words) for text in said))[:typical]
        key = f"intent:{runs[0].agent}:{runs[int(order[0])].run_id}"
        words = wording_for((r.request for r in members_runs), fallback=agent_wording, decisive=CLEAR_SHARE)
        intents.append(Intent(key=key, agent=runs[0].agent, runs=members_runs, typical=quotes, wording=words))
    return intents


_TOKEN = re.compile(rf"<\w+>|{CJK.pattern}|\w+")
_MASKS = re.compile(r"…(?:[^\w<>…]*…)+")


def framed(runs: list[Run]) -> list[str]:
    """Several users' requests as shared know-how may quote them, most telling first: each value the
    user gave a tool as the argument's name, and every word that fewer than half the requests, or only
    one user's, hold as '…' (where to, whose name, what was bought: what a person asked about, not how
    such requests are put)."""
    said = [r.slotted_request for r in runs]
    words = [{t.lower() for t in _TOKEN.findall(text)} for text in said]
    runs_with = Counter(t for held in words for t in held)
    users_with: dict[str, set[str]] = defaultdict(set)
    for run, held in zip(runs, words):
        for t in held:
            users_with[t].add(run.user or "")

    def frame(token: str) -> bool:
        t = token.lower()
        return t.startswith("<") or (2 * runs_with[t] >= len(runs) and len(users_with[t] - {""}) > 1)

    masked = [_MASKS.sub("…", _TOKEN.sub(lambda m: m[0] if frame(m[0]) else "…", text)) for text in said]
    order = sorted(range(len(masked)), key=lambda i: masked[i].count("…"))  # stable: typical first on ties
    return [masked[i] for i in order]


@dataclass
class ProcedureStep:
    tool: str
    args: list[tuple[str, str]]  # (argument name, where its value came from)
    runs: int  # successful runs that made this call


def procedure(successes: list[Run], *, share: float = 0.5) -> list[ProcedureStep]:
    """The calls at least `share` of the successful runs made, in their median order of first use,
    with the argument names most of those calls passed and each value's usual source."""
    if not successes:
        return []
    used: Counter = Counter()
    positions: dict[str, list[float]] = defaultdict(list)
    names: dict[str, Counter] = defaultdict(Counter)
    sources: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for run in successes:
        ok = [c for c in run.calls if not c.failed]
        seen: set[str] = set()
        for position, call in enumerate(ok):
            if call.tool not in seen:
                seen.add(call.tool)
                positions[call.tool].append(position / max(len(ok), 1))
            for name, origin in call.sources.items():
                names[call.tool][name] += 1
                sources[(call.tool, name)][origin] += 1
        used.update(seen)
    needed = max(1, int(np.ceil(share * len(successes))))
    tools = sorted((t for t, n in used.items() if n >= needed), key=lambda t: (statistics.median(positions[t]), t))
    steps = []
    for tool in tools:
        calls = sum(names[tool].values()) and max(names[tool].values())
        args = [
            (name, sources[(tool, name)].most_common(1)[0][0])
            for name, n in names[tool].most_common()
            if n >= 0.5 * calls
        ]
        steps.append(ProcedureStep(tool, args, used[tool]))
    return steps


def describe_step(step: ProcedureStep, words: Wording) -> str:
    """'cancel_reservation(reservation_id ← from get_user_details result)'."""
    sources = {"user": words.from_user, "agent": words.from_agent}
    args = ", ".join(
        f"{name} ← {sources.get(origin) or words.from_result.format(tool=origin)}" for name, origin in step.args
    )
    return f"{step.tool}({args})"
