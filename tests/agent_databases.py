"""opencode's `opencode.db` and Goose's `sessions.db` as the tools create them (their own schemas:
opencode's Drizzle tables in `session/session.sql.ts`, Goose's `sessions` and `messages` after its
migrations), with writers for the rows the tools write."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

OPENCODE_SCHEMA = """
CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, vcs text, name text,
  time_created integer NOT NULL, time_updated integer NOT NULL, sandboxes text NOT NULL DEFAULT '[]');
CREATE TABLE session (
  id text PRIMARY KEY, project_id text NOT NULL REFERENCES project(id) ON DELETE cascade,
  workspace_id text, parent_id text, slug text NOT NULL, directory text NOT NULL, path text,
  title text NOT NULL, version text NOT NULL, share_url text, summary_additions integer,
  summary_deletions integer, summary_files integer, summary_diffs text, cost real NOT NULL DEFAULT 0,
  tokens_input integer NOT NULL DEFAULT 0, tokens_output integer NOT NULL DEFAULT 0,
  tokens_reasoning integer NOT NULL DEFAULT 0, tokens_cache_read integer NOT NULL DEFAULT 0,
  tokens_cache_write integer NOT NULL DEFAULT 0, revert text, permission text, goal text, agent text,
  model text, time_created integer NOT NULL, time_updated integer NOT NULL, time_compacting integer,
  time_archived integer);
CREATE INDEX session_project_idx ON session (project_id);
CREATE INDEX session_parent_idx ON session (parent_id);
CREATE TABLE message (
  id text PRIMARY KEY, session_id text NOT NULL REFERENCES session(id) ON DELETE cascade,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
CREATE TABLE part (
  id text PRIMARY KEY, message_id text NOT NULL REFERENCES message(id) ON DELETE cascade,
  session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE INDEX part_message_id_id_idx ON part (message_id, id);
CREATE INDEX part_session_idx ON part (session_id);
"""

GOOSE_SCHEMA = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE sessions (
  id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '',
  user_set_name BOOLEAN DEFAULT FALSE, session_type TEXT NOT NULL DEFAULT 'user', working_dir TEXT NOT NULL,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  extension_data TEXT DEFAULT '{}', total_tokens INTEGER, input_tokens INTEGER, output_tokens INTEGER,
  accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
  schedule_id TEXT, recipe_json TEXT, user_recipe_values_json TEXT, provider_name TEXT,
  model_config_json TEXT, goose_mode TEXT NOT NULL DEFAULT 'auto', thread_id TEXT, archived_at TIMESTAMP,
  project_id TEXT, accumulated_cost REAL);
CREATE TABLE messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
  content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL, timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  tokens INTEGER, metadata_json TEXT, message_id TEXT);
CREATE INDEX idx_messages_session ON messages(session_id);
CREATE INDEX idx_messages_message_id ON messages(message_id);
"""


def create(path: Path, schema: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.executescript(schema)
    con.execute("PRAGMA journal_mode=WAL")  # as both tools open it
    con.close()
    return path


class Opencode:
    """An `opencode.db` written as opencode writes it: a session, its messages, their parts (upserted
    as a tool call moves from running to completed)."""

    def __init__(self, path: Path) -> None:
        self.con = sqlite3.connect(create(path, OPENCODE_SCHEMA), isolation_level=None)
        self.con.execute("INSERT INTO project VALUES ('prj_1', '/home/me/shop', 'git', 'shop', 1, 1, '[]')")

    def session(self, sid: str, directory: str, t: int) -> None:
        self.con.execute(
            "INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated)"
            " VALUES (?, 'prj_1', ?, ?, 'a title', '1.2.0', ?, ?)",
            (sid, sid, directory, t, t),
        )

    def message(self, mid: str, sid: str, role: str, t: int, **data: Any) -> None:
        info = {"role": role, "time": {"created": t}, **data}
        self.con.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET data = excluded.data,"
            " time_updated = excluded.time_updated",
            (mid, sid, t, t, json.dumps(info)),
        )

    def part(self, pid: str, mid: str, sid: str, t: int, data: dict[str, Any]) -> None:
        self.con.execute(
            "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET data = excluded.data,"
            " time_updated = excluded.time_updated",
            (pid, mid, sid, t, t, json.dumps(data)),
        )

    def close(self) -> None:
        self.con.close()


class Goose:
    """A Goose `sessions.db`: sessions with their working folder, messages appended with their content."""

    def __init__(self, path: Path) -> None:
        self.con = sqlite3.connect(create(path, GOOSE_SCHEMA), isolation_level=None)

    def session(self, sid: str, working_dir: str) -> None:
        self.con.execute("INSERT INTO sessions (id, name, working_dir) VALUES (?, 'a name', ?)", (sid, working_dir))

    def message(self, sid: str, role: str, created: int, content: list[dict[str, Any]], mid: str) -> None:
        self.con.execute(
            "INSERT INTO messages (session_id, role, content_json, created_timestamp, message_id) VALUES (?, ?, ?, ?, ?)",
            (sid, role, json.dumps(content), created, mid),
        )

    def close(self) -> None:
        self.con.close()
