"""A query that names a project gets that project's environment rules.

A coding agent's first question ("[django/django] Fix the validator") shares few words with
"To run the tests in django/django: ./tests/runtests.py <module>", and its vector is about the
task, not the environment. The project's name is the exact key: an environment unit (refine's
environment.py, `subject` = the repository) whose project the query names counts as first in
every retrieval list, and is then scored like any other candidate."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..store.vocabulary import LIVE_SQL
from .filters import Filters

if TYPE_CHECKING:
    from ..store.store import Store

ENVIRONMENT = "environment"


def project_units(store: "Store", text: str, filters: Filters) -> dict[tuple[str, str], float]:
    """(`unit`, id) → similarity 1.0 for the active environment units of the projects `text` names."""
    if not filters.search_units or filters.category not in (None, ENVIRONMENT) or filters.kind not in (None, "rule"):
        return {}
    rows = store.con.execute(
        f"SELECT id, subject FROM units WHERE {LIVE_SQL} AND category = ? AND subject IS NOT NULL"
        + (" AND agent = ?" if filters.agent else ""),
        [ENVIRONMENT, *([filters.agent] if filters.agent else [])],
    ).fetchall()
    lowered = text.lower()
    return {
        ("unit", uid): 1.0
        for uid, project in rows
        if re.search(rf"(?<![\w/.-]){re.escape(project.lower())}(?![\w/-])", lowered)
    }
