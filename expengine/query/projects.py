"""A query that names a project gets that project's environment rules, and the rule for the error
the query carries.

A coding agent's first question ("[django/django] Fix the validator") shares few words with
"To run the tests in django/django: ./tests/runtests.py <module>", and its vector is about the
task, not the environment. The project's name is the exact key: an environment unit (refine's
environment.py, `subject` = the repository) whose project the query names counts as first in
every retrieval list, and is then scored like any other candidate.

A query at a failed command ("[django/django] <the error's tail>") is mostly the error's own text,
which the raw errors of other runs match better than any rule. A recovery unit (refine's fixes.py)
is keyed by the error's kind (`textutil.error_key`, its `attribute`): when the query names a project
and its error has that key, the project's rule counts as first in every list (and its environment
rules as first in one: the error's rule comes first); a project without one
(or one the store has no rule for, named as "[owner/name] …") gets the rule shared by several
projects (`subject` NULL), and never another project's own."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..store.row_memo import Rows
from ..store.vocabulary import LIVE_SQL, LIVE_UNIT_STATUSES
from ..textutil import error_key
from .filters import Filters

if TYPE_CHECKING:
    from ..store.store import Store

ENVIRONMENT = "environment"
RECOVERY = "recovery"
ERROR_ATTRIBUTE = "error: "  # a recovery unit's attribute: this + the error's key (refine's fixes.py)
# beside a query's error rule, the project's environment rules count as first in one list of two: the
# error's rule comes first (on the SWE-bench runs, environment rules first left it no room in 500 tokens)
ENVIRONMENT_BESIDE_AN_ERROR = 0.5
_LEADING_PROJECT = re.compile(r"^\s*\[[^\]\n]*\]\s*")  # "[django/django] …": how a coding task's query names it


def _project_rules(units: Rows) -> list[Any]:
    return [u for u in units.values() if u.status in LIVE_UNIT_STATUSES and u.category in (ENVIRONMENT, RECOVERY)]


def project_units(
    store: "Store", text: str, filters: Filters, units: Rows | None = None
) -> dict[tuple[str, str], float]:
    """(`unit`, id) → similarity 1.0 for the active environment units of the projects `text` names,
    and the recovery unit for the key of the error in `text`: the project's own, else the shared one.
    `units`: the unit memo's rows this query (`score.unit_rows`), else they are read from DuckDB."""
    categories = [c for c in (ENVIRONMENT, RECOVERY) if filters.category in (None, c)]
    if not filters.search_units or not categories or filters.kind not in (None, "rule"):
        return {}
    candidates = (
        store.unit_rows.read_where(
            store.con, f"{LIVE_SQL} AND category IN (SELECT unnest(?))", [[ENVIRONMENT, RECOVERY]]
        )
        if units is None
        else units.derived("project rules", _project_rules)
    )
    rows = [
        (u.id, u.subject, u.category, u.attribute)
        for u in candidates
        if u.category in categories
        and (u.subject is not None or u.category == RECOVERY)
        and (not filters.agent or u.agent == filters.agent)
    ]
    lowered = text.lower()
    named = {
        project
        for project in {row[1] for row in rows if row[1]}
        if re.search(rf"(?<![\w/.-]){re.escape(project.lower())}(?![\w/-])", lowered)
    }
    if not named and not _LEADING_PROJECT.match(text):
        return {}
    key = ERROR_ATTRIBUTE + error_key(_LEADING_PROJECT.sub("", text))
    found = [uid for uid, project, category, _ in rows if project in named and category == ENVIRONMENT]
    own = [uid for uid, project, category, attribute in rows if project in named and attribute == key]
    shared = [uid for uid, project, category, attribute in rows if project is None and attribute == key]
    keyed = own or shared
    # a query that carries a known error is about it: its rule first, the project's environment after
    environment = 1.0 if not keyed else ENVIRONMENT_BESIDE_AN_ERROR
    return {**{("unit", uid): environment for uid in found}, **{("unit", uid): 1.0 for uid in keyed}}
