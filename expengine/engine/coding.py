"""What a coding agent is told from its hooks, and what is written into its AGENTS.md / CLAUDE.md.
A mixin of `Engine`, as `Explain` is: reads only, through `session()`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ContextManager, Literal

if TYPE_CHECKING:
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
            result = self.query(text, k=PROMPT_CANDIDATES, touch=False)
            with self.session() as store:
                if not ac.relevant(store, result, text):
                    return {"text": ""}
                units = ac.project_units(store, result.hits, project)[:PROMPT_HITS]
                return {"text": ac.rendered(units, budget or ac.FIX_BUDGET, ac.PROMPT_HEADER)}
        with self.session() as store:
            if situation == "session-start":
                return {"text": ac.standing(store, project, budget=budget or ac.DEFAULT_BUDGET)}
            if situation == "failure":
                return {"text": ac.fix_for(store, project, text or "", session=session, budget=budget or ac.FIX_BUDGET)}
            return {"lines": ac.rule_lines(store, project)}
