"""LangGraph's long-term memory store, backed by expengine: `graph.compile(store=ExpengineStore(engine))`.

A namespace maps to an agent, a user and a session: `("support-bot", "user-42")` is agent
`support-bot`, user `user-42` (the element at `user_index`, 1 by default; None: no user), session
`support-bot/user-42`; a search under a namespace that names a user sees that user's memories and
the shared ones only. `put` records the value as a `note` memory (its text is the value's
`content`, `text` or `memory` field, else the value as JSON; the whole value rides in `meta`), so it
is redacted, embedded, weighed, decayed, clustered and refined like any other memory. `search` with a
`query` runs the real hybrid query (score = similarity, weight, recency) and reinforces what it
returns; without one it lists the namespace, newest first. Records are immutable here, so a `put`
that changes a key's value, or deletes it (`value=None`), forgets the old record for real first.

Needs the `langgraph` extra: `pip install 'expengine[langgraph]'`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import TYPE_CHECKING, Any, Iterable

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

if TYPE_CHECKING:
    from ..engine import Engine

PREFIX = "lg:"  # every record this store writes has an id "lg:<namespace joined by />:<key>"
MAX_K = 50


def record_id(namespace: tuple[str, ...], key: str) -> str:
    return f"{PREFIX}{'/'.join(namespace)}:{key}"


def _text(value: dict[str, Any]) -> str:
    for field in ("content", "text", "memory"):
        if isinstance(value.get(field), str) and value[field].strip():
            return value[field]
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _matches(value: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    """LangGraph's simple filter: every given field equal (`{"$eq": v}` and `{"$ne": v}` too)."""
    for field, expected in (wanted or {}).items():
        actual = value.get(field)
        if isinstance(expected, dict) and set(expected) <= {"$eq", "$ne"}:
            if "$eq" in expected and actual != expected["$eq"]:
                return False
            if "$ne" in expected and actual == expected["$ne"]:
                return False
        elif actual != expected:
            return False
    return True


class ExpengineStore(BaseStore):
    """A LangGraph `BaseStore` over one expengine `Engine` (which keeps its models loaded)."""

    def __init__(self, engine: "Engine", *, touch: bool = True, user_index: int | None = 1) -> None:
        self.engine = engine
        self.touch = touch  # searches reinforce their hits, as an agent's use of a memory should
        self.user_index = user_index

    def _user(self, namespace: tuple[str, ...]) -> str | None:
        """The user a namespace names (its element at `user_index`), if it is long enough to name one."""
        at = self.user_index
        return namespace[at] if at is not None and len(namespace) > at else None

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        listed = list(ops)
        return await asyncio.to_thread(self.batch, listed)

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            self._put(op.namespace, op.key, dict(op.value) if op.value is not None else None)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    @staticmethod
    def _item(record: dict[str, Any], cls: type = Item, **extra: Any) -> Any:
        stored = record["meta"].get("langgraph") or {}
        ts = record["ts"]
        stamp = ts.replace(tzinfo=dt.timezone.utc) if ts.tzinfo is None else ts
        return cls(
            value=stored.get("value") or {},
            key=stored.get("key", record["id"]),
            namespace=tuple(stored.get("namespace") or ()),
            created_at=stamp,
            updated_at=stamp,
            **extra,
        )

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        found = self.engine.records(ids=[record_id(namespace, key)], limit=1)
        return self._item(found[0]) if found else None

    def _put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any] | None) -> None:
        rid = record_id(namespace, key)
        current = self._get(namespace, key)
        if current is not None and value is not None and current.value == value:
            return  # the same memory again
        if current is not None:
            self.engine.forget(ids=[rid])
        if value is None:
            return
        from ..service import ops

        event = {
            "id": rid,
            "ts": dt.datetime.now(dt.timezone.utc).isoformat(),
            "kind": "note",
            "agent": namespace[0] if namespace else "default",
            "session": "/".join(namespace) or None,
            "user": self._user(namespace),
            "content": _text(value),
            "meta": {"langgraph": {"namespace": list(namespace), "key": key, "value": value}},
        }
        ops.run(self.engine, "ingest", {"records": [event], "strict": True})

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = PREFIX + "/".join(op.namespace_prefix)
        agent = op.namespace_prefix[0] if op.namespace_prefix else None
        if op.query:
            k = min(MAX_K, max(10, 3 * (op.offset + op.limit)))
            user = self._user(op.namespace_prefix)
            result = self.engine.query(op.query, k=k, agent=agent, user=user, touch=self.touch)
            ranked = [h for h in result.hits if h.type == "memory" and h.id.startswith(prefix)]
            scores = {h.id: h.score for h in ranked}
            records = {r["id"]: r for r in self.engine.records(ids=list(scores), limit=len(scores) or 1)}
            items = [
                self._item(records[h.id], SearchItem, score=scores[h.id])
                for h in ranked
                if h.id in records
                and _matches(records[h.id]["meta"].get("langgraph", {}).get("value") or {}, op.filter)
            ]
            return items[op.offset : op.offset + op.limit]
        listed = self.engine.records(id_prefix=prefix, agent=agent, limit=100_000)
        items = [
            self._item(r, SearchItem)
            for r in listed
            if _matches(r["meta"].get("langgraph", {}).get("value") or {}, op.filter)
        ]
        return items[op.offset : op.offset + op.limit]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        seen: set[tuple[str, ...]] = set()
        for record in self.engine.records(id_prefix=PREFIX, limit=1_000_000):
            namespace = tuple(record["meta"].get("langgraph", {}).get("namespace") or ())
            if all(_condition(namespace, c) for c in op.match_conditions or ()):
                seen.add(namespace[: op.max_depth] if op.max_depth is not None else namespace)
        return sorted(seen)[op.offset : op.offset + op.limit]


def _condition(namespace: tuple[str, ...], condition: Any) -> bool:
    path = tuple(condition.path)
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return len(namespace) >= len(path) and all(p == "*" or p == n for p, n in zip(path, part))
