"""Who speaks in an agent's dialogue, read incrementally.

Per session, its speakers in order of appearance; per agent (and user: `_of_user`), every name word
(and three-letter short form) its speakers go by. Labels ("Caroline: …") name speakers once at least
two of the agent's messages open with one (a lone "Note: …" is no dialogue). That is a pass over all the
agent's messages, so what each session's messages give (labels and their first message, the last
message, the capitalised words) is kept between cycles with the messages' fingerprint
(store/derived_runs.py) and a cycle reads again only the sessions whose messages changed; the result is
the one a whole read gives (tests/test_nights_refine.py).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from ...store.derived_runs import cached, fingerprints, store_runs
from .statements import split_speaker

if TYPE_CHECKING:
    from ...store.store import Store

PEOPLE = "people"
_GROUP = "coalesce(session, agent) || chr(31) || agent"  # one session's messages of one agent
_CAPITAL = re.compile(r"\b[A-Z][a-z]{2,}\b")


def people(
    store: "Store", agents: set[str], *, keep: bool = True, full: bool = False
) -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    """(per session, its speakers in order of appearance; per agent key, the names its speakers go by)
    over every message of `agents`; `keep`: store what was read again, `full`: read everything."""
    where = "kind = 'message' AND agent IN (SELECT unnest(?))"
    prints = fingerprints(store, _GROUP, where, [sorted(agents)])
    old = {} if full else cached(store, PEOPLE)
    stale = sorted(k for k, fp in prints.items() if old.get(k, ("", ""))[0] != fp)
    rows = store.con.execute(
        f"SELECT {_GROUP}, ts, id, agent || coalesce(chr(31) || user, ''), content FROM records "
        f"WHERE {where} AND {_GROUP} IN (SELECT unnest(?)) ORDER BY ts, id",
        [sorted(agents), stale],
    ).fetchall()
    by_group: dict[str, list[list[Any]]] = defaultdict(list)
    for group, *row in rows:
        by_group[group].append(row)
    fresh = {k: (prints[k], json.dumps(_distil(by_group.get(k, [])))) for k in stale}
    if keep:
        store_runs(store, PEOPLE, fresh, set(prints) | {k for k in old if k.rsplit(chr(31), 1)[-1] not in agents})
    uses: dict[str, Counter[str]] = defaultdict(Counter)
    first: dict[str, dict[str, tuple[dt.datetime, str]]] = defaultdict(dict)
    last: dict[str, tuple[dt.datetime, str, str]] = {}
    capitals: set[tuple[str, str]] = set()
    for key in sorted(prints):
        kept = json.loads(fresh[key][1] if key in fresh else old[key][1])
        session = key.rsplit(chr(31), 1)[0]
        for agent, label, count in kept["uses"]:
            uses[agent][label] += count
        for label, ts, record_id in kept["first"]:
            seen = (dt.datetime.fromisoformat(ts), record_id)
            if label not in first[session] or seen < first[session][label]:
                first[session][label] = seen
        ts, record_id, agent = kept["last"]
        ending = (dt.datetime.fromisoformat(ts), record_id, agent)
        if session not in last or ending[:2] > last[session][:2]:
            last[session] = ending
        capitals.update((agent, word) for agent, word in kept["capitals"])
    dialogue = {agent for agent, counted in uses.items() if sum(counted.values()) >= 2}
    speakers = {
        session: sorted(labels, key=labels.__getitem__)
        for session, labels in first.items()
        if labels and last[session][2] in dialogue
    }
    names: dict[str, set[str]] = defaultdict(set)
    for agent in dialogue:
        for label in uses[agent]:
            for word in label.lower().split():
                names[agent].update({word, word[:3]} if len(word) > 3 else {word})
    for agent, word in capitals:
        if agent in dialogue and any(_nickname(word, name) for name in names[agent]):
            names[agent].add(word)
    return speakers, names


def _distil(rows: list[list[Any]]) -> dict[str, Any]:
    """One session's messages of one agent (ts, id, agent key, content; in order): what `people` needs."""
    uses: Counter[tuple[str, str]] = Counter()
    first: dict[str, tuple[str, str]] = {}
    capitals: set[tuple[str, str]] = set()
    for ts, record_id, agent, content in rows:
        label = split_speaker(content or "")[0]
        if label:
            uses[(agent, label)] += 1
            first.setdefault(label, (ts.isoformat(), record_id))
        capitals.update((agent, w.lower()) for w in _CAPITAL.findall(content or ""))
    ts, record_id, agent, _ = rows[-1]
    return {
        "uses": [[a, label, n] for (a, label), n in sorted(uses.items())],
        "first": [[label, *seen] for label, seen in first.items()],
        "last": [ts.isoformat(), record_id, agent],
        "capitals": sorted(capitals),
    }


def _nickname(word: str, name: str) -> bool:
    """ "Caro" for Caroline, "Mell" for Melanie: a short form a speaker is called by (its first letters,
    the last one maybe doubled)."""
    return len(name) > len(word) and (name.startswith(word) or (word[-1] == word[-2] and name.startswith(word[:-1])))
