"""A command touches only what is provably the store's: a folder that is neither empty nor a store is
refused (exit 2, nothing changed in it), an empty --store too, a command that only reads creates no
store, and the permission tightening names the store's own entries. Also the one-line answers of a few
usage mistakes (feedback with both verdicts, an unknown unit status, negative serve bounds) and of a
store this user cannot write (exit 3, no traceback)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_usage import assert_one_line_usage_error, run_main

REPO = Path(__file__).resolve().parents[1]


def _modes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode) for p in [folder, *folder.rglob("*")]}


def _someone_elses_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "v"
    (folder / "sub").mkdir(parents=True)
    (folder / "shared.txt").write_text("hi\n")
    os.chmod(folder / "shared.txt", 0o644)
    for path in (folder, folder / "sub"):
        os.chmod(path, 0o755)
    return folder


@pytest.mark.parametrize("command", [["stats"], ["ingest", "-"], ["config", "init"], ["mcp"]])
def test_a_folder_that_is_not_a_store_is_refused_and_left_as_it_is(tmp_path, monkeypatch, capsys, command):
    folder = _someone_elses_folder(tmp_path)
    before = _modes(folder)
    code, out, err = run_main(monkeypatch, capsys, ["--store", str(folder), *command])
    assert_one_line_usage_error(code, out, err.split("\n  hint:")[0], mentions="is not an expengine store")
    assert "hint: pass --store naming a new or empty folder" in err
    assert _modes(folder) == before and sorted(p.name for p in folder.iterdir()) == ["shared.txt", "sub"]


@pytest.mark.parametrize(
    "argv", [["--store", "", "stats"], ["--store", " ", "stats"], ["--store", "/proc/self", "stats"]]
)
def test_an_empty_store_path_or_a_system_folder_is_one_line(monkeypatch, capsys, argv):
    code, out, err = run_main(monkeypatch, capsys, argv)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 2  # the line and its hint


def test_a_store_whose_making_was_cut_short_is_still_a_store(make_engine, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / ".lock").write_text("pid 1")  # a process killed before it wrote the database
    (store / "ingested.jsonl").write_text("")
    assert make_engine(store=store).stats().raw == 0


def test_a_command_on_a_missing_path_creates_no_store(tmp_path, monkeypatch, capsys):
    """Only ingest makes a store: a read, or a change to records that are not there, is exit 3."""
    missing = tmp_path / "typo"
    commands = [["stats"], ["units"], ["query", "anything"], ["snapshots"], ["why", "x"], ["pin", "x"]]
    commands += [["forget", "--session", "x"], ["compact"], ["repair"], ["snapshot", "--to", str(tmp_path / "out")]]
    for command in commands:
        code, out, err = run_main(monkeypatch, capsys, ["--store", str(missing), *command])
        assert code == 3 and f"error: no store at {missing}" in err and "hint:" in err, (command, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_sources_on_a_missing_store_lists_everything_as_new_and_creates_nothing(tmp_path, home, monkeypatch, capsys):
    session = home / "claude" / "projects" / "-home-me-shop" / "s1.jsonl"
    session.parent.mkdir(parents=True)
    session.write_text('{"type": "user"}\n')
    missing = tmp_path / "typo"
    code, out, err = run_main(monkeypatch, capsys, ["--store", str(missing), "sources", "--json"])
    rows = json.loads(out)["sources"]
    assert code == 0 and [(r["tool"], r["sessions"], r["new_sessions"]) for r in rows] == [("claude-code", 1, 1)]
    assert not missing.exists()


def test_tightening_a_store_changes_only_its_own_entries(make_engine, write_jsonl, tmp_path):
    from test_compact import BOOKING

    store = tmp_path / "store"
    make_engine(store=store).ingest([write_jsonl("log.jsonl", BOOKING)])
    notes = store / "my-notes.txt"  # the user's own file, kept in the store folder
    notes.write_text("mine\n")
    os.chmod(notes, 0o644)
    os.chmod(store, 0o755)
    os.chmod(store / "expengine.duckdb", 0o644)
    make_engine(store=store).stats()
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    assert stat.S_IMODE((store / "expengine.duckdb").stat().st_mode) == 0o600
    assert stat.S_IMODE(notes.stat().st_mode) == 0o644


@pytest.mark.parametrize(
    "argv, mentions",
    [
        (["feedback", "x", "--helpful", "--harmful"], "--helpful and --harmful contradict each other"),
        (["serve", "--grace", "-5"], "--grace"),
        (["serve", "--max-body-mb", "-1"], "--max-body-mb"),
    ],
)
def test_contradicting_or_negative_options_are_usage_errors(tmp_path, monkeypatch, capsys, argv, mentions):
    code, out, err = run_main(monkeypatch, capsys, ["--store", str(tmp_path / "store"), *argv])
    assert_one_line_usage_error(code, out, err.split("\n  hint:")[0], mentions=mentions)


def test_an_unknown_unit_status_is_a_usage_error(make_engine, tmp_path, monkeypatch, capsys):
    make_engine().close()
    code, out, err = run_main(monkeypatch, capsys, ["--store", str(tmp_path / "store"), "units", "--status", "bogus"])
    assert_one_line_usage_error(code, out, err.split("\n  hint:")[0], mentions="unknown unit status 'bogus'")


def _as_another_user(store: Path) -> list[str]:
    """A command prefix that runs as a user who may read the store but not write it: as root, without the
    capabilities that let root ignore file modes (the store then belongs to `nobody`)."""
    if os.geteuid() != 0:
        for path in [store, *store.rglob("*")]:
            os.chmod(path, stat.S_IMODE(path.stat().st_mode) & ~0o222 | 0o444 | (0o111 if path.is_dir() else 0))
        return []
    if shutil.which("capsh") is None:
        pytest.skip("running as root without capsh: cannot take away root's right to write")
    for path in [store, *store.rglob("*")]:
        os.chown(path, 65534, 65534)
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return ["capsh", "--drop=cap_dac_override,cap_dac_read_search,cap_fowner,cap_chown", "--", "-c"]


@pytest.mark.slow
def test_a_store_this_user_cannot_write_is_exit_3_in_one_line(make_engine, write_jsonl, tmp_path):
    from test_compact import BOOKING

    store = tmp_path / "store"
    log = write_jsonl("log.jsonl", BOOKING)
    make_engine(store=store).ingest([log])
    make_engine(store=store).close()
    os.chmod(log, 0o644)
    prefix = _as_another_user(store)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    forget = ["forget", "--session", "s1"]
    commands = (["ingest", log], ["compact"], ["reindex"], ["config", "init"], ["serve"], forget + ["--yes"])
    for command in (*commands, forget + ["--dry-run"]):
        argv = [sys.executable, "-m", "expengine", "--store", str(store), *command]
        full = [*prefix, " ".join(f"'{a}'" for a in argv)] if prefix else argv
        done = subprocess.run(full, cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 3, (command, done.stderr)
        assert "Traceback" not in done.stderr and "error: " in done.stderr, (command, done.stderr)


def test_an_http_address_in_use_or_in_brackets(tmp_path):
    import socket

    from expengine.errors import InputError
    from expengine.service.edges import tcp_socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(InputError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            tcp_socket(f"127.0.0.1:{port}")
    with pytest.raises(InputError, match="--http expects HOST:PORT or PORT"):
        tcp_socket("[::1]:99999")
    try:
        v6 = tcp_socket("[::1]:0")
    except InputError as exc:  # no IPv6 loopback here: still one line
        assert "cannot listen on [::1]:0" in str(exc)
    else:
        assert v6.family == socket.AF_INET6
        v6.close()


@pytest.mark.slow
def test_serve_on_a_port_in_use_is_one_line(make_engine, tmp_path):
    import socket

    make_engine().close()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        argv = [sys.executable, "-m", "expengine", "--store", str(tmp_path / "store"), "serve", "--http", str(port)]
        env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"error: cannot listen on {port}: Address already in use" in done.stderr
