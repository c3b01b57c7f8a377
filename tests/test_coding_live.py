"""The live loop with Claude Code: hooks run as Claude Code runs them (JSON on stdin, exit code, stdout)
against a real store, cold and through a real running server; transcripts ingested as they grow."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from claude_sessions import CWD, Transcript, context_of, run_hook
from test_service import start_server, stop

from expengine import Engine
from expengine.config import Config
from expengine.engine.coding import head_and_tail
from expengine.integrations.hook_client import LOG_FILE
from expengine.service.client import find_server

FOREGROUND = {"EXPENGINE_HOOK_FOREGROUND": "1"}
FAILED_MAKE = "Exit code 2\nmake: *** No rule to make target 'check'.  Stop."


def _session(folder: Path, n: int) -> Transcript:
    """One session in the demo project: `make check` fails, the test script works."""
    t = Transcript(folder / f"s{n}.jsonl", f"s{n}")
    t.prompt(f"fix parser bug number {n}")
    t.noise()
    t.command("make check", FAILED_MAKE, failed=True)
    t.command(f"./run_tests.sh tests/test_parser_{n}.py", "5 passed in 0.2s")
    t.say("Fixed, the parser tests pass.")
    return t


def _stop(store: Path, t: Transcript) -> tuple[int, str, str]:
    return run_hook(
        store, "Stop", {"session_id": t.session, "transcript_path": str(t.path), "cwd": t.cwd}, **FOREGROUND
    )


def _records(store: Path) -> int:
    with Engine(store=store) as engine:
        return int(engine.store.con.execute("SELECT count(*) FROM records").fetchone()[0])


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    """A store that learned the demo project from three sessions ingested by Stop hooks, then compacted."""
    tmp = tmp_path_factory.mktemp("learned")
    store = tmp / "store"
    for n in range(3):
        code, out, _ = _stop(store, _session(tmp / "projects", n))
        assert (code, out) == (0, "")
    with Engine(store=store, embedder=embedder, overrides={"llm.mode": "template"}) as engine:
        engine.compact()
    return store


def test_session_start_prints_the_project_s_test_command_and_pitfall_with_evidence(learned: Path) -> None:
    code, out, _ = run_hook(learned, "SessionStart", {"session_id": "new", "cwd": CWD, "source": "startup"})
    assert code == 0
    payload = json.loads(out)
    assert payload["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    text = context_of(out)
    assert "./run_tests.sh" in text and "make" in text
    assert "seen in 3 sessions" in text and "[u-" in text
    assert "a precedent" not in text  # the rules say it: no precedent repeats them


def test_the_session_after_the_first_is_told_the_test_command_the_first_ran(tmp_path: Path) -> None:
    """One session is below a rule's bar, and none is compacted yet: what it ran is a labelled precedent."""
    store = tmp_path / "store"
    assert _stop(store, _session(tmp_path / "projects", 0))[:2] == (0, "")
    code, out, _ = run_hook(store, "SessionStart", {"session_id": "s1", "cwd": CWD, "source": "startup"})
    text = context_of(out)
    assert code == 0 and "To run the tests in demo: ./run_tests.sh <file>." in text
    assert "a precedent, not a rule: seen in 1 session, 1 succeeded]" in text
    assert run_hook(store, "SessionStart", {"session_id": "s0", "cwd": CWD})[:2] == (0, "")  # not its own


def test_a_project_with_nothing_learned_gets_nothing(learned: Path) -> None:
    assert run_hook(learned, "SessionStart", {"session_id": "x", "cwd": "/home/dev/elsewhere"})[:2] == (0, "")


def test_a_failed_command_gets_the_fix_that_worked_for_its_error(learned: Path) -> None:
    payload = {"cwd": CWD, "tool_name": "Bash", "tool_input": {"command": "make check"}, "error": FAILED_MAKE}
    code, out, _ = run_hook(learned, "PostToolUseFailure", payload)
    assert code == 0 and "./run_tests.sh" in context_of(out)
    ok = {"cwd": CWD, "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a"}}
    assert run_hook(learned, "PostToolUse", ok)[:2] == (0, "")


def test_hooks_through_a_running_server_answer_as_cold_ones_do(learned: Path) -> None:
    failed = {"cwd": CWD, "tool_name": "Bash", "tool_input": {"command": "make check"}, "error": FAILED_MAKE}
    cold = run_hook(learned, "SessionStart", {"session_id": "new", "cwd": CWD})
    cold_fix = run_hook(learned, "PostToolUseFailure", failed)
    child = start_server(learned)
    try:
        warm = run_hook(learned, "SessionStart", {"session_id": "new", "cwd": CWD})
        warm_fix = run_hook(learned, "PostToolUseFailure", failed)
        prompt = run_hook(learned, "UserPromptSubmit", {"cwd": CWD, "prompt": "how do I run the parser tests?"})
        unrelated = run_hook(learned, "UserPromptSubmit", {"cwd": CWD, "prompt": "what a lovely sunny afternoon"})
        pasted = (
            "how do I run the parser tests? " + "I changed the parser to read nested brackets, and they broke. " * 200
        )
        long = run_hook(learned, "UserPromptSubmit", {"cwd": CWD, "prompt": pasted})
    finally:
        code, err = stop(child)
    assert warm == cold and warm[1]
    assert warm_fix == cold_fix and "./run_tests.sh" in context_of(warm_fix[1])
    assert prompt[0] == 0 and "./run_tests.sh" in context_of(prompt[1])
    assert len(pasted) > Config().query.max_text_chars and "./run_tests.sh" in context_of(long[1])  # not a 413
    assert unrelated[:2] == (0, "")
    assert find_server(learned) is None, err


def test_a_broken_store_fails_open(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "expengine.duckdb").write_bytes(b"this is not a database")
    code, out, err = run_hook(store, "SessionStart", {"session_id": "s", "cwd": CWD})
    assert (code, out) == (0, "")
    assert "SessionStart" in (store / LOG_FILE).read_text()
    assert run_hook(store, "SessionStart", {"cwd": CWD}, EXPENGINE_HOME="/nonexistent")[:2] == (0, "")


def test_bad_hook_input_fails_open(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    assert run_hook(store, "NoSuchEvent", {})[:2] == (0, "")
    assert "NoSuchEvent" in (store / LOG_FILE).read_text()


def test_a_transcript_that_grows_between_two_stops_stores_only_its_new_lines(tmp_path: Path) -> None:
    store = tmp_path / "store"
    t = _session(tmp_path / "projects", 0)
    assert _stop(store, t)[:2] == (0, "")
    first = _records(store)
    assert _stop(store, t)[:2] == (0, "")
    assert _records(store) == first  # nothing new, nothing stored
    t.command("./run_tests.sh tests/test_lexer.py", "2 passed")
    assert _stop(store, t)[:2] == (0, "")
    assert _records(store) == first + 2  # the new call and its result only


def test_a_subagent_s_transcript_is_ingested_with_its_session(tmp_path: Path) -> None:
    store = tmp_path / "store"
    t = _session(tmp_path / "projects", 0)
    sub = Transcript(t.path.with_suffix("") / "subagents" / "agent-a1.jsonl", t.session)
    sub.command("grep -rn parse src", "src/parser.py:1: def parse")
    assert _stop(store, t)[:2] == (0, "")
    with Engine(store=store) as engine:
        found = engine.store.con.execute(
            "SELECT count(*) FROM records WHERE content LIKE '%grep -rn parse%' "
            "OR CAST(tool_args AS VARCHAR) LIKE '%grep -rn parse%'"
        ).fetchone()[0]
    assert found == 1


def test_private_spans_and_ignored_files_stay_out_of_the_store(tmp_path: Path) -> None:
    project = tmp_path / "demo"
    (project / "secrets").mkdir(parents=True)
    (project / ".git").mkdir()
    (project / ".expengineignore").write_text("secrets/\n*.pem\n")
    store = tmp_path / "store"
    t = Transcript(tmp_path / "projects" / "p.jsonl", "p", cwd=str(project))
    t.prompt("deploy with token <private>hunter2-is-my-token</private> please")
    t.read(str(project / "secrets" / "prod.env"), "DB_PASSWORD=swordfish")
    t.command("cat server.pem", "-----BEGIN KEY----- zzz")
    t.command("ls", "README.md")
    assert _stop(store, t)[:2] == (0, "")
    with Engine(store=store) as engine:
        rows = engine.store.con.execute("SELECT * FROM records").fetchall()
    text = json.dumps([list(map(str, r)) for r in rows])
    assert "hunter2" not in text and "swordfish" not in text and "BEGIN KEY" not in text
    assert "[private]" in text and "README.md" in text


def test_the_ids_a_hook_names_are_shown_with_their_sources_and_exported_with_their_evidence(
    learned: Path, tmp_path: Path
) -> None:
    from test_connect import _cli

    text = context_of(run_hook(learned, "SessionStart", {"session_id": "new", "cwd": CWD})[1])
    unit_id = text.split("[", 1)[1].split(";", 1)[0]
    code, out = _cli("show", unit_id, "--json", store=learned)
    assert code == 0 and json.loads(out)["sources"]
    agents = tmp_path / "CLAUDE.md"
    project = tmp_path / "demo"
    project.mkdir()
    code, out = _cli("export", "agents-md", "--project", str(project), "--write", str(agents), store=learned)
    assert code == 0
    assert unit_id in agents.read_text() and "seen in 3 sessions" in agents.read_text()


def test_stop_hands_the_ingest_to_a_detached_process_and_a_later_stop_never_stores_a_line_twice(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    t = _session(tmp_path / "projects", 0)
    payload = {"session_id": t.session, "transcript_path": str(t.path), "cwd": t.cwd}
    assert run_hook(store, "Stop", payload)[:2] == (0, "")  # returns at once; the worker goes on
    assert _stop(store, t)[:2] == (0, "")  # waits for the worker's lock, then stores what is left
    reference = tmp_path / "reference"
    assert _stop(reference, _session(tmp_path / "again", 0))[:2] == (0, "")
    assert _records(store) == _records(reference)


def test_the_hooks_files_are_the_store_s_own() -> None:
    """A folder holding only what the hooks wrote is still a store (the folder check refuses strangers)."""
    from expengine.integrations.hook_client import LOG_FILE
    from expengine.integrations.transcripts import CURSORS, INGEST_LOCK
    from expengine.store.permissions import STORE_ENTRIES

    assert {LOG_FILE, CURSORS, INGEST_LOCK} <= set(STORE_ENTRIES)


def test_the_hook_command_imports_only_the_standard_library() -> None:
    """A hook through a running server costs one bare start-up: hook_client.py imports nothing else."""
    import ast
    import sys

    from expengine.integrations import hook_client

    tree = ast.parse(Path(hook_client.__file__).read_text())
    top = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    top |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    assert top and top <= set(sys.stdlib_module_names) | {"__future__"}


def test_the_cold_path_of_a_healed_store_never_loads_lance(learned: Path) -> None:
    """Lance's import is most of a cold hook's start-up; a SessionStart or a failure reads DuckDB only."""
    import subprocess
    import sys

    probe = (
        "import sys; from expengine.integrations.hooks import main; main(sys.argv[1:]); "
        "print(sorted(m for m in ('lance', 'lancedb') if m in sys.modules), file=sys.stderr)"
    )
    for event, payload in (
        ("SessionStart", {"session_id": "new", "cwd": CWD}),
        ("PostToolUseFailure", {"cwd": CWD, "tool_name": "Bash", "error": FAILED_MAKE}),
    ):
        child = subprocess.run(
            [sys.executable, "-c", probe, "--store", str(learned), event],
            input=json.dumps({"hook_event_name": event, **payload}),
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert "./run_tests.sh" in context_of(child.stdout) and child.stderr.strip().endswith("[]"), event


def test_a_socket_nobody_listens_on_falls_back_to_the_cold_path(learned: Path) -> None:
    import socket

    cold = run_hook(learned, "SessionStart", {"session_id": "new", "cwd": CWD})
    path = learned / "serve.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # bound, never listening, then closed: what a killed server leaves
    dead.close()
    try:
        assert run_hook(learned, "SessionStart", {"session_id": "new", "cwd": CWD}) == cold and cold[1]
    finally:
        path.unlink()


def test_an_error_met_in_one_earlier_session_gets_its_precedent_labelled_and_no_rule(
    tmp_path: Path, embedder: Any
) -> None:
    store = tmp_path / "store"
    assert _stop(store, _session(tmp_path / "projects", 0))[:2] == (0, "")
    with Engine(store=store, embedder=embedder, overrides={"llm.mode": "template"}) as engine:
        engine.compact()
        rules = engine.store.con.execute("SELECT count(*) FROM units WHERE attribute LIKE 'error: %'").fetchone()
    assert rules == (0,)  # one session is below a rule's bar, and stays so
    payload = {"cwd": CWD, "tool_name": "Bash", "tool_input": {"command": "make check"}, "error": FAILED_MAKE}
    code, out, _ = run_hook(store, "PostToolUseFailure", {**payload, "session_id": "s9"})
    text = context_of(out)
    assert code == 0 and "`./run_tests.sh tests/test_parser_0.py`" in text
    assert "a precedent, not a rule: seen once, in session s0" in text
    assert run_hook(store, "PostToolUseFailure", {**payload, "session_id": "s0"})[:2] == (0, "")


def test_a_prompt_over_the_query_limit_keeps_its_start_and_end() -> None:
    text = "why does the parser fail " + "x" * 20_000 + " and how do I test it"
    cut = head_and_tail(text, 8192)
    assert len(cut) == 8192 and cut.startswith("why does the parser fail") and cut.endswith("how do I test it")
    assert head_and_tail("short", 8192) == "short"
