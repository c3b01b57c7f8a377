"""A query that names a project gets that project's environment rules, and the rule for the error
the query carries.

A coding agent's first question ("[django/django] Fix the validator") shares few words with
"To run the tests in django/django: ./tests/runtests.py <module>", and its vector is about the
task, not the environment. The project's name is the key: an environment unit (refine's
environment.py, `subject` = the project) whose project the query names counts as first in every
retrieval list, and is then scored like any other candidate; unless the query carries an error with a
rule, another project's memories and own rules are dropped from its candidates (in one store of two
projects, a fresh `go test` call of one outranked the other's rule; an error's raw kin in another
project stay: on SWE-bench, dropping them lost a step's next program). A query names a project as a user
would (`named_projects`): its full name (`django/django`) or its short name (`django`, the part
after the last `/`, when no other project in the store has it), bare or in a leading `[…]`, a path
one of whose folders is the short name (`/home/u/src/django`), or the explicit `project` argument;
case does not matter. A query that names none, asked of a store whose rules are of one project
("how do I run the tests in this repo"), is about that project.

A query at a failed command ("[django/django] <the error's tail>") is mostly the error's own text,
which the raw errors of other runs match better than any rule. A recovery unit (refine's fixes.py)
is keyed by the error's kind (`textutil.error_key`, its `attribute`): when the query names a project
and its error has that key, the project's rule counts as first in every list (and its environment
rules as first in one: the error's rule comes first); a project without one
(or one the store has no rule for, named as "[owner/name] …") gets the rule shared by several
projects (`subject` NULL), and never another project's own."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from ..store.db import in_ids, json_meta
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


def short_name(project: str) -> str:
    """`django/django` → `django`; `spotter` → `spotter`: what a user calls a project."""
    return project.rstrip("/").rsplit("/", 1)[-1].lower()


def project_of(meta: dict[str, Any]) -> str | None:
    """A coding record's project: `meta.repo` (set by the readers from the repository), else the last
    folder of `meta.cwd` (`/home/u/src/spotter` → `spotter`); a worktree inside a `<name>-worktrees`
    or `.worktrees` folder belongs to `<name>` (`…/spotter-worktrees/spotter-gqc` → `spotter`)."""
    repo = meta.get("repo") or meta.get("project")
    if isinstance(repo, str) and repo.strip():
        return repo.strip()
    cwd = meta.get("cwd")
    if not isinstance(cwd, str) or not cwd.strip("/ "):
        return None
    folders = [f for f in re.split(r"[\\/]", cwd) if f]
    for position, folder in enumerate(folders[:-1]):
        if folder.endswith("-worktrees"):
            return folder.removesuffix("-worktrees")
        if folder in (".worktrees", "worktrees") and position > 0:
            return folders[position - 1]
    return folders[-1]


_PATH = re.compile(r"(?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]+)*/?")
_SHORT_NAME_CHARS = 3  # a shorter short name ("ui", "db") is a word before it is a project


def named_projects(text: str, projects: set[str], explicit: str | None = None) -> set[str]:
    """The projects of `projects` that `text` (or `explicit`, a name or a path) names: by full name or in
    a leading `[…]`; else (no `[…]`) by short name where it is unambiguous in `projects`; else by a
    path one of whose folders is a short name."""
    by_short: dict[str, list[str]] = {}
    for project in projects:
        by_short.setdefault(short_name(project), []).append(project)
    unique = {name: found[0] for name, found in by_short.items() if len(found) == 1 and len(name) >= _SHORT_NAME_CHARS}
    if explicit is not None:
        wanted = explicit.strip().strip("[]").lower()
        full = {p for p in projects if p.lower() in (wanted, (project_of({"cwd": wanted}) or "").lower())}
        folders = [wanted, (project_of({"cwd": wanted}) or "").lower(), *reversed(wanted.split("/"))]
        return full or next(({unique[f]} for f in folders if f in unique), set())
    lowered = text.lower()
    named = {
        project for project in projects if re.search(rf"(?<![\w/.-]){re.escape(project.lower())}(?![\w/-])", lowered)
    }
    leading = _LEADING_PROJECT.match(text)
    if leading:  # "[astropy/astropy] <error>": the bracket says which, even one the store does not know
        return named | named_projects("", projects, leading.group(0))
    # a short name, then a path's folders, only where nothing plainer named one: an error's paths name
    # the libraries it went through, not the project it was asked about
    if not named:
        named = {p for name, p in unique.items() if re.search(rf"(?<![\w/.@-]){re.escape(name)}(?![\w/@-])", lowered)}
    if not named:
        named = {unique[f.lower()] for path in _PATH.findall(text) for f in path.split("/") if f.lower() in unique}
    return named


def _project_rules(units: Rows) -> list[Any]:
    return [u for u in units.values() if u.status in LIVE_UNIT_STATUSES and u.category in (ENVIRONMENT, RECOVERY)]


@dataclass
class Projected:
    """What a query's project adds to its candidates, and what it takes away."""

    units: dict[tuple[str, str], float] = field(default_factory=dict)  # (`unit`, id) → similarity
    # the projects named, when the query carries no known error: no other project's memory shows
    only: set[str] = field(default_factory=set)
    others: list[tuple[str, str]] = field(default_factory=list)  # then the other projects' own rules


def project_units(
    store: "Store", text: str, filters: Filters, units: Rows | None = None, *, project: str | None = None
) -> Projected:
    """(`unit`, id) → similarity 1.0 for the active environment units of the projects `text` names (or
    `project`, when given), and the recovery unit for the key of the error in `text`: the project's
    own, else the shared one; and, for a query about a project that carries no known error, what of
    other projects it must not show. `units`: the unit memo's rows this query (`score.unit_rows`), else
    they are read from DuckDB."""
    categories = [c for c in (ENVIRONMENT, RECOVERY) if filters.category in (None, c)]
    if not filters.search_units or not categories or filters.kind not in (None, "rule"):
        return Projected()
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
    projects = {row[1] for row in rows if row[1]}
    named = named_projects(text, projects, project)
    asked_plainly = project is None and not _LEADING_PROJECT.match(text)
    if not named and asked_plainly and len(projects) == 1:
        named = projects  # "how do I run the tests in this repo", asked of a store that knows one project
    if not named and asked_plainly:
        return Projected()
    key = ERROR_ATTRIBUTE + error_key(_LEADING_PROJECT.sub("", text))
    found = [uid for uid, subject, category, _ in rows if subject in named and category == ENVIRONMENT]
    own = [uid for uid, subject, category, attribute in rows if subject in named and attribute == key]
    shared = [uid for uid, subject, category, attribute in rows if subject is None and attribute == key]
    keyed = own or shared
    # a query that carries a known error is about it: its rule first, the project's environment after
    environment = 1.0 if not keyed else ENVIRONMENT_BESIDE_AN_ERROR
    projected = Projected({**{("unit", uid): environment for uid in found}, **{("unit", uid): 1.0 for uid in keyed}})
    if named and not keyed:  # a known error's fix carries across projects: its raw kin stay candidates
        projected.only = named
        projected.others = [("unit", uid) for uid, subject, _, _ in rows if subject and subject not in named]
    return projected


def other_projects_memories(
    store: "Store", candidates: Iterable[tuple[str, str]], named: set[str]
) -> list[tuple[str, str]]:
    """The memory candidates of a query that names `named` which belong to another project (`project_of`
    their meta): "how do I run the tests in alpha" is not answered by beta's `go test` call. Records of no
    project (a chat log's) stay."""
    ids = [i for t, i in candidates if t == "memory"]
    if not named or not ids:
        return []
    where, params = in_ids("id", ids)
    rows = store.con.execute(f"SELECT id, meta FROM records WHERE {where} AND meta IS NOT NULL", params).fetchall()
    return [("memory", i) for i, meta in rows if (found := project_of(json_meta(meta))) and found not in named]
