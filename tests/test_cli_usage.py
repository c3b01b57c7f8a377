"""Usage mistakes on every command: exit 2 and one line on stderr naming the problem, never a traceback.

The cases are derived from the Typer app itself, so a new command or option is covered the day it is added."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import typer.main
from helpers import run_main

from expengine.cli import app

CLI = typer.main.get_command(app)
WRONG_TYPES = {int: "abc", float: "abc"}
GLOBAL_PREFIX = ["--store", "/nonexistent/expengine-usage-test"]  # parsing fails before a store is opened


def commands(group=CLI, path=()):
    """(path, click command) for every leaf command, subcommands of groups (`config show`) included."""
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def required_args(command) -> list[str]:
    """Placeholder values for the command's required arguments, so only the mistake under test is wrong."""
    return ["x" for p in command.params if p.param_type_name == "argument" and p.required]


def bare(annotation):
    """int for `int` and `Optional[int]`."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if typing.get_origin(annotation) is typing.Union and len(args) == 1 else annotation


def typed_options(command):
    for p in command.params:
        if p.param_type_name == "option" and bare(p.type_descriptor.annotation) in WRONG_TYPES:
            yield p.opts[0], WRONG_TYPES[bare(p.type_descriptor.annotation)]


ALL = list(commands())
NAMES = [" ".join(path) for path, _ in ALL]
MISSING = [(path, c) for path, c in ALL if required_args(c)]
TYPED = [(path, opt, bad, c) for path, c in ALL for opt, bad in typed_options(c)]
# every number of seconds or megabytes, the global --wait included: nan, inf and negatives are refused
FLOATS = [
    (path, p.opts[0], c)
    for path, c in [((), CLI), *ALL]
    for p in c.params
    if p.param_type_name == "option" and bare(p.type_descriptor.annotation) is float
]


def assert_one_line_usage_error(code: int, out: str, err: str, *, mentions: str) -> None:
    assert code == 2, (code, out, err)
    assert "Traceback" not in out + err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert mentions in lines[0], err


def test_the_suite_covers_every_command():
    assert {"query", "ingest", "restore", "forget", "config show", "config init", "repair"} <= set(NAMES)
    # the derivation found what it should (ingest's PATHS is optional with --outcomes, so it is checked below)
    assert len(MISSING) >= 7 and len(TYPED) >= 6
    assert {"--wait", "--grace", "--max-body-mb", "--idle", "--time-limit"} <= {o for _, o, _ in FLOATS}


@pytest.mark.parametrize("path,command", MISSING, ids=[" ".join(p) for p, _ in MISSING])
def test_a_missing_argument_is_exit_2(monkeypatch, capsys, path, command):
    code, out, err = run_main(monkeypatch, capsys, [*GLOBAL_PREFIX, *path])
    assert_one_line_usage_error(code, out, err, mentions="Missing argument")


@pytest.mark.parametrize("path,option,bad,command", TYPED, ids=[f"{' '.join(p)} {o}" for p, o, _, _ in TYPED])
def test_a_wrong_type_is_exit_2(monkeypatch, capsys, path, option, bad, command):
    code, out, err = run_main(monkeypatch, capsys, [*GLOBAL_PREFIX, *path, *required_args(command), option, bad])
    assert_one_line_usage_error(code, out, err, mentions=option)


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "-1"])
@pytest.mark.parametrize("path,option,command", FLOATS, ids=[f"{' '.join(p)} {o}" for p, o, _ in FLOATS])
def test_a_float_option_refuses_nan_inf_and_negatives(monkeypatch, capsys, path, option, command, bad):
    argv = [*path, *required_args(command), f"{option}={bad}"] if path else [f"{option}={bad}", "stats"]
    code, out, err = run_main(monkeypatch, capsys, [*GLOBAL_PREFIX, *argv])
    assert_one_line_usage_error(code, out, err, mentions=option)
    assert "Input should be" in err  # the fix: the bound it must keep


@pytest.mark.parametrize("path,command", ALL, ids=NAMES)
def test_an_unknown_option_is_exit_2(monkeypatch, capsys, path, command):
    code, out, err = run_main(monkeypatch, capsys, [*GLOBAL_PREFIX, *path, *required_args(command), "--no-such-option"])
    assert_one_line_usage_error(code, out, err, mentions="--no-such-option")


@pytest.mark.parametrize("path,command", ALL, ids=NAMES)
def test_a_global_option_after_the_command_is_exit_2(monkeypatch, capsys, path, command):
    code, out, err = run_main(monkeypatch, capsys, [*path, *required_args(command), "--store", "/tmp/x"])
    assert_one_line_usage_error(code, out, err, mentions="before the command")


@pytest.mark.parametrize(
    "argv,mentions",
    [
        (["--wait", "soon", "stats"], "--wait"),
        (["no-such-command"], "No such command"),
        (["--store"], "--store"),
    ],
)
def test_global_option_mistakes_are_exit_2(monkeypatch, capsys, argv, mentions):
    assert_one_line_usage_error(*run_main(monkeypatch, capsys, argv), mentions=mentions)


@pytest.mark.parametrize(
    "argv,mentions",
    [
        (["query"], "Missing argument"),
        (["query", "weather", "-k", "abc"], "-k"),
        (["query", "weather", "--store", "/tmp/x"], "before the command"),
        (["stats", "--bogus"], "--bogus"),
        (["config", "show", "--bogus"], "--bogus"),
        (["ingest"], "Missing argument"),
    ],
)
def test_the_installed_entry_point_gives_exit_2(tmp_path, argv, mentions):
    """`python -m expengine` as a user runs it: the real process, its real exit code and stderr."""
    env = {**os.environ, "EXPENGINE_HOME": str(tmp_path / "store"), "PYTHONPATH": str(Path(__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-m", "expengine", *argv], capture_output=True, text=True, env=env, timeout=60
    )
    assert_one_line_usage_error(done.returncode, done.stdout, done.stderr, mentions=mentions)
    assert not (tmp_path / "store").exists()  # a usage mistake touches nothing


@pytest.mark.parametrize("argv", [["ingest", "--from-agents", "bogus"], ["sources", "bogus"]])
def test_an_unknown_agent_is_exit_2_and_leaves_no_store(tmp_path, argv):
    env = {**os.environ, "EXPENGINE_HOME": str(tmp_path / "store"), "PYTHONPATH": str(Path(__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-m", "expengine", *argv], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 2 and "unknown agent 'bogus'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "store").exists()
