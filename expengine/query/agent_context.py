"""What a coding agent's hooks inject: a project's standing knowledge at the start of a session, the
fix for a failed command's error, and the few units a prompt is about.

Each line names its unit id, so the agent can ask `show ID` (MCP `memory_show`) for the details and
the source lines instead of the hook injecting more, and its evidence, counted in sessions: how many
sessions the unit's sources come from, and in how many of them its command ran without an error.
Nothing known gives an empty text, which the hook prints as nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..store.db import in_ids, json_ids
from ..store.vocabulary import LIVE_SQL
from ..textutil import approx_tokens, error_key
from .projects import ENVIRONMENT, ERROR_ATTRIBUTE, RECOVERY

if TYPE_CHECKING:
    from ..store.store import Store
    from .hits import Hit, QueryResult

DEFAULT_BUDGET = 400  # tokens of a session's start-up context
FIX_BUDGET = 150
PRECEDENT_FAILURES = 500  # the project's latest failed commands searched for a precedent
PRECEDENT_CHARS = 200  # of the command shown
PRECEDENT_COMMANDS = 2000  # the project's latest shell calls and results mined for an environment precedent
FOOTER = "(`expengine show ID` gives a unit's details and sources)"
PROMPT_HEADER = "Relevant to this prompt, from earlier sessions:"


@dataclass(frozen=True)
class Line:
    unit_id: str  # or, for a precedent, the record it was seen in
    text: str
    sessions: int
    succeeded: int
    precedent: bool = False  # what earlier sessions showed, below a rule's bar

    def render(self) -> str:
        seen = f"seen in {self.sessions} session{'s' if self.sessions != 1 else ''}"
        if self.succeeded:
            seen += f", {self.succeeded} succeeded"
        if self.precedent:
            seen = f"a precedent, not a rule: {seen}"
        return f"- {self.text} [{self.unit_id}; {seen}]"


def evidence(store: "Store", source_ids: list[str]) -> tuple[int, int]:
    """(sessions the sources come from, sessions where the unit's command ran without an error or whose
    goal succeeded). A fix's sources are mostly the failures it answers: then only the first count."""
    if not source_ids:
        return 0, 0
    sources, params = in_ids("r.id", source_ids)
    rows = store.con.execute(
        "SELECT count(DISTINCT r.session), count(DISTINCT r.session) FILTER (WHERE (r.kind = 'tool_result' "
        "AND r.tool_error IS NULL) OR g.status = 'succeeded') FROM records r LEFT JOIN goals g "
        f"ON g.goal_id = r.goal_id WHERE {sources} AND r.session IS NOT NULL",
        params,
    ).fetchall()  # consumed whole: a pending result would hold the server's read cursor in a transaction
    return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)


def _lines(store: "Store", where: str, params: list[Any]) -> list[Line]:
    rows = store.con.execute(
        f"SELECT id, text, source_ids, category, attribute, support FROM units WHERE {LIVE_SQL} AND kind = 'rule' "
        f"AND {where} ORDER BY category = '{ENVIRONMENT}' DESC, attribute IS NULL DESC, support DESC, id",
        params,
    ).fetchall()
    return [Line(uid, text, *evidence(store, json_ids(src))) for uid, text, src, *_ in rows]


def rendered(lines: list[Line], budget: int, header: str) -> str:
    """The header and as many lines, in order, as fit in `budget` tokens; "" when none does."""
    out, used = [header], approx_tokens(header) + approx_tokens(FOOTER)
    for line in lines:
        text = line.render()
        cost = approx_tokens(text)
        if used + cost > budget:
            continue
        out.append(text)
        used += cost
    return "\n".join([*out, FOOTER]) if len(out) > 1 else ""


def standing_lines(store: "Store", project: str) -> tuple[list[Line], list[Line]]:
    """The project's environment rules (test and build commands, what is not installed), and its
    error → fix rules by support."""
    if not project:
        return [], []
    where = "subject = ? AND category = ?"
    return _lines(store, where, [project, ENVIRONMENT]), _lines(store, where, [project, RECOVERY])


def standing(project: str, lines: list[Line], *, budget: int = DEFAULT_BUDGET) -> str:
    """The session's start-up context: `lines` in order, within `budget` tokens."""
    return rendered(lines, budget, f"What expengine learned from earlier sessions in {project}:")


def project_commands(store: "Store", project: str, session: str | None) -> list[dict[str, Any]]:
    """The project's latest shell calls and their results in other sessions, oldest first, with the
    columns `refine.environment.project_calls` reads: what an environment precedent is mined from."""
    columns = ("id", "agent", "session", "kind", "tool_name", "tool_args", "tool_error", "meta")
    rows = store.con.execute(
        f"SELECT {', '.join(columns)} FROM (SELECT * FROM records WHERE kind IN ('tool_call', 'tool_result') "
        "AND tool_name IS NOT NULL AND session IS NOT NULL AND session <> ? "
        "AND json_extract_string(meta, '$.repo') = ? ORDER BY ts DESC, id DESC LIMIT ?) ORDER BY ts, id",
        [session or "", project, PRECEDENT_COMMANDS],
    ).fetchall()
    return [dict(zip(columns, row)) for row in rows]


def fix_for(store: "Store", project: str, error: str, *, session: str | None = None, budget: int = FIX_BUDGET) -> str:
    """The rule for this error's kind in this project, else the one shared by several projects, else the
    precedent: what was run next after this error in an earlier session of the project."""
    key = error_key(error)
    if not key:
        return ""
    attribute = ERROR_ATTRIBUTE + key
    lines = _lines(store, "category = ? AND attribute = ? AND subject = ?", [RECOVERY, attribute, project or ""])
    lines = lines or _lines(store, "category = ? AND attribute = ? AND subject IS NULL", [RECOVERY, attribute])
    if lines:
        return rendered(lines[:1], budget, f"This error ({key}) was met before:")
    return precedent(store, project, key, session, budget)


def precedent(store: "Store", project: str, key: str, session: str | None, budget: int) -> str:
    """The shell command run next after the latest error of kind `key` in another session of `project`.
    One session is below a rule's bar (a rule must hold with any one session left out), so this is served
    as what it is, a precedent with its one piece of evidence, and never becomes a rule by being served."""
    if not project:
        return ""
    failures = store.con.execute(
        "SELECT session, ts, coalesce(source_line, 0), tool_error FROM records WHERE kind = 'tool_result' "
        "AND tool_error IS NOT NULL AND session IS NOT NULL AND session <> ? "
        "AND json_extract_string(meta, '$.repo') = ? ORDER BY ts DESC LIMIT ?",
        [session or "", project, PRECEDENT_FAILURES],
    ).fetchall()
    for failed_in, ts, line, error in failures:
        if error_key(error) != key:
            continue
        rows = store.con.execute(
            "SELECT id, json_extract_string(tool_args, '$.command') FROM records WHERE kind = 'tool_call' "
            "AND session = ? AND json_extract_string(tool_args, '$.command') IS NOT NULL "
            "AND (ts > ? OR (ts = ? AND coalesce(source_line, 0) > ?)) ORDER BY ts, source_line LIMIT 1",
            [failed_in, ts, ts, line],
        ).fetchall()
        if not rows:
            continue
        record_id, command = rows[0]
        text = (
            f"- ran next after the same error: `{' '.join(str(command).split())[:PRECEDENT_CHARS]}` "
            f"[{record_id}; a precedent, not a rule: seen once, in session {str(failed_in)[:8]}]"
        )
        header = f"This error ({key}) was met before:"
        if approx_tokens(header) + approx_tokens(text) + approx_tokens(FOOTER) > budget:
            return ""
        return "\n".join([header, text, FOOTER])
    return ""


def relevant(store: "Store", result: "QueryResult", text: str) -> bool:
    """The query's own verdict, and its best cosine against the encoder's floor even where the query
    skipped it (a store whose rules are all of one project takes every query as about that project)."""
    from ..models.mixed import encoder_of

    floor = store.config.query.similarity_floor(encoder_of(store.embeddings.name, text))
    return result.relevant and (floor <= 0 or (result.best_similarity or 0.0) >= floor)


def project_units(store: "Store", hits: list["Hit"], project: str) -> list[Line]:
    """The unit hits of a query (already past its similarity floor), less the rules of other projects."""
    ids = [h.id for h in hits if h.type == "unit"]
    where, params = in_ids("id", ids)
    subjects = dict(store.con.execute(f"SELECT id, subject FROM units WHERE {where}", params).fetchall())
    return [
        Line(h.id, h.text, *evidence(store, h.source_ids))
        for h in hits
        if h.type == "unit" and subjects.get(h.id) in (None, project)
    ]


def rule_lines(store: "Store", project: str) -> list[str]:
    """Every live rule of the project, rendered with its evidence, in a stable order (AGENTS.md)."""
    return [line.render() for line in _lines(store, "subject = ?", [project])]
