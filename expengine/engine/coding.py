"""What a coding agent is told from its hooks, and what is written into its AGENTS.md / CLAUDE.md.
A mixin of `Engine`, as `Explain` is: reads only, through `session()`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ContextManager, Literal

if TYPE_CHECKING:
    from ..config import Config
    from ..query.agent_context import Line
    from ..query.hits import QueryResult
    from ..store.store import Store

Situation = Literal["session-start", "prompt", "failure", "export"]
PROMPT_HITS = 3  # a prompt gets the few units it is about, never a page
PROMPT_CANDIDATES = 10  # hits asked for, memories among them, to find those units


class Coding:
    """A project's knowledge for one moment of a coding session, as text ("" when nothing is known)."""

    if TYPE_CHECKING:

        def session(self) -> ContextManager["Store"]: ...

        def query(self, text: str, **options: Any) -> "QueryResult": ...

        config: "Config"

    def agent_context(
        self,
        situation: Situation,
        *,
        project: str | None = None,
        cwd: str | None = None,
        session: str | None = None,
        text: str | None = None,
        budget: int | None = None,
    ) -> dict[str, Any]:
        """session-start: the project's standing knowledge; failure: the fix for the error in `text`;
        prompt: the units relevant to the prompt `text` (the query's similarity floor decides);
        export: every live rule of the project, for an AGENTS.md section."""
        from ..ingest.sessions import project_of
        from ..query import agent_context as ac

        if project is None:
            project = project_of(cwd or "") or ""
        if situation == "prompt":
            if not text:
                return {"text": ""}
            # the prompt alone, over memories and units: naming the project, or asking for units only,
            # would skip the similarity floor (search.py), and the floor decides that nothing is relevant
            result = self.query(head_and_tail(text, self.config.query.max_text_chars), k=PROMPT_CANDIDATES, touch=False)
            with self.session() as store:
                if not ac.relevant(store, result, text):
                    return {"text": ""}
                units = ac.project_units(store, result.hits, project)[:PROMPT_HITS]
                return {"text": ac.rendered(units, budget or ac.FIX_BUDGET, ac.PROMPT_HEADER)}
        with self.session() as store:
            if situation == "session-start":
                environment, recovery = ac.standing_lines(store, project)
                lines = [*environment, *environment_precedents(store, project, session, environment), *recovery]
                return {"text": ac.standing(project, lines, budget=budget or ac.DEFAULT_BUDGET)}
            if situation == "failure":
                return {"text": ac.fix_for(store, project, text or "", session=session, budget=budget or ac.FIX_BUDGET)}
            return {"lines": ac.rule_lines(store, project)}


def head_and_tail(text: str, limit: int) -> str:
    """`text` within `limit` characters: its start (what is asked) and its end (what is asked last), a
    pasted log or file between them cut, so a long prompt still gets its context."""
    if len(text) <= limit:
        return text
    gap = " … "
    head = (limit - len(gap)) * 2 // 3
    return text[:head] + gap + text[len(text) - (limit - len(gap) - head) :]


def environment_precedents(store: "Store", project: str, session: str | None, rules: list["Line"]) -> list["Line"]:
    """What the project's earlier sessions showed of its environment (the test and build commands that
    ran, a program that was not installed) where no rule says it yet: a rule needs two sessions and a
    compaction, and the second session of a project is the one that needs its test command most. A
    project whose test command is a rule is past that (and is not read again at each session start)."""
    from ..lifecycle.refine.environment import environment_drafts, project_calls, test_condition
    from ..query import agent_context as ac

    known = [line.text for line in rules]
    if not project or any(t.startswith(test_condition(project)) for t in known):
        return []
    calls = [c for found in project_calls(ac.project_commands(store, project, session)).values() for c in found]
    return [
        ac.Line(
            draft.source_ids[0], f"{draft.condition}: {draft.action}.", draft.trials, draft.successes, precedent=True
        )
        for draft in environment_drafts(calls, project, min_runs=1)
        if draft.condition and not any(t.startswith(draft.condition) for t in known)
    ]
