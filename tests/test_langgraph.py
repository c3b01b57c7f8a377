"""LangGraph's store backed by expengine, used by a real compiled graph that writes and reads memories."""

from __future__ import annotations

import uuid
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from expengine.integrations.langgraph import ExpengineStore, record_id


class State(TypedDict, total=False):
    user: str
    learned: str
    question: str
    recalled: list[str]


def remember(state: State, *, store: BaseStore) -> State:
    if state.get("learned"):
        store.put(("support-bot", state["user"]), str(uuid.uuid4()), {"content": state["learned"], "source": "chat"})
    return {}


def recall(state: State, *, store: BaseStore) -> State:
    hits = store.search(("support-bot", state["user"]), query=state["question"], limit=3)
    return {"recalled": [hit.value["content"] for hit in hits]}


def _graph(store: ExpengineStore):
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def test_a_graph_writes_memories_and_reads_them_back_through_the_real_query(make_engine):
    engine = make_engine()
    graph = _graph(ExpengineStore(engine))
    facts = [
        "The user prefers a window seat on long flights.",
        "The user is allergic to peanuts; never order peanut snacks.",
        "The user's home airport is Oslo Gardermoen.",
    ]
    for fact in facts:
        graph.invoke({"user": "u-42", "learned": fact, "question": "anything"})
    graph.invoke({"user": "u-7", "learned": "The user prefers an aisle seat.", "question": "anything"})
    out = graph.invoke({"user": "u-42", "question": "which seat should I book for this user?"})
    assert out["recalled"][0] == facts[0]  # the real query ranks the seat preference first
    assert "The user prefers an aisle seat." not in out["recalled"]  # another user's namespace
    rows = engine.store.con.execute(
        "SELECT agent, session, kind, content FROM records WHERE starts_with(id, 'lg:support-bot/u-42:') ORDER BY ts"
    ).fetchall()
    assert rows == [("support-bot", "support-bot/u-42", "note", fact) for fact in facts]
    hits = engine.query("peanut allergy", k=3, touch=False).hits  # the memories are expengine's too
    assert any(h.id.startswith("lg:support-bot/u-42:") for h in hits)


def test_get_put_update_delete_list_and_filter(make_engine):
    # "what does the user eat" is 0.44 from "Vegetarian meals only.": under MiniLM's floor (0.455), which
    # would answer the search with nothing relevant (docs/benchmarks.md counts this cost)
    engine = make_engine(overrides={"query.min_similarity": "0"})
    store = ExpengineStore(engine, touch=False)
    namespace = ("support-bot", "u-1")
    store.put(namespace, "seat", {"content": "Window seat, please.", "kind": "preference"})
    store.put(namespace, "meal", {"content": "Vegetarian meals only.", "kind": "diet"})
    item = store.get(namespace, "seat")
    assert item is not None and item.value == {"content": "Window seat, please.", "kind": "preference"}
    assert item.namespace == namespace and item.key == "seat"
    store.put(namespace, "seat", {"content": "Aisle seat from now on.", "kind": "preference"})
    assert store.get(namespace, "seat").value["content"] == "Aisle seat from now on."
    contents = engine.store.con.execute(
        "SELECT content FROM records WHERE id = ?", [record_id(namespace, "seat")]
    ).fetchall()
    assert contents == [("Aisle seat from now on.",)]  # the old value was forgotten, not kept beside
    listed = store.search(namespace, filter={"kind": "diet"})
    assert [i.key for i in listed] == ["meal"]
    found = store.search(namespace, query="what does the user eat", limit=1)
    assert [i.key for i in found] == ["meal"] and found[0].score is not None
    assert store.list_namespaces(prefix=("support-bot",)) == [namespace]
    store.delete(namespace, "meal")
    assert store.get(namespace, "meal") is None
