"""Each operation is declared once (expengine/operations.py): the command line's options, the server's
request model and the MCP tool made from it must agree on every argument's name, default and bounds."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Optional

import pytest
import typer.main
from typer.testing import CliRunner

from expengine.cli import app
from expengine.cli.operation_cmds import switches
from expengine.errors import InputError
from expengine.operations import OPERATIONS, Operation
from expengine.service import ops
from expengine.service.mcp_server import build

BOUNDS = {
    "ge": "minimum",
    "le": "maximum",
    "gt": "exclusiveMinimum",
    "min_length": "minLength",
    "max_length": "maxLength",
}


def declared(op: Operation) -> dict[str, tuple[Any, dict[str, Any]]]:
    """name -> (default, bounds) as the dataclass declares them."""
    out = {}
    for f in dataclasses.fields(op.args):
        default = None if f.default is dataclasses.MISSING else f.default
        out[f.name] = (default, {BOUNDS[k]: v for k, v in f.metadata.items() if k in BOUNDS})
    return out


def _bounds(prop: dict[str, Any]) -> dict[str, Any]:
    found = {k: prop[k] for k in BOUNDS.values() if k in prop}
    for option in prop.get("anyOf", []):
        found.update(_bounds(option))
    return found


def from_schema(schema: dict[str, Any]) -> dict[str, tuple[Any, dict[str, Any]]]:
    return {name: (prop.get("default"), _bounds(prop)) for name, prop in schema.get("properties", {}).items()}


@pytest.fixture(scope="module")
def mcp_tools() -> dict[str, Any]:
    server = build(lambda: object(), lambda: None)  # a server "answers": nothing is opened or preloaded
    return {tool.name: tool for tool in asyncio.run(server.list_tools())}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_the_http_model_is_the_declaration(name: str) -> None:
    op = OPERATIONS[name]
    assert from_schema(ops.OPS[name].args.model_json_schema()) == declared(op)
    assert ops.OPS[name].mode == op.mode


@pytest.mark.parametrize("name", sorted(n for n, op in OPERATIONS.items() if op.mcp))
def test_the_mcp_tool_is_the_declaration(name: str, mcp_tools: dict[str, Any]) -> None:
    op = OPERATIONS[name]
    tool = mcp_tools[op.tool]
    assert from_schema(tool.input_schema) == declared(op)
    assert tool.input_schema.get("additionalProperties") is False  # an unknown argument is refused
    assert tool.annotations.read_only_hint is op.read_only
    assert tool.annotations.destructive_hint is op.destructive
    assert tool.description == op.mcp


def test_every_mcp_tool_says_whether_it_writes_and_destroys(mcp_tools: dict[str, Any]) -> None:
    hints = {
        name: (tool.annotations.read_only_hint, tool.annotations.destructive_hint) for name, tool in mcp_tools.items()
    }
    assert hints["memory_ingest"] == (False, False) and hints["memory_status"] == (True, False)
    assert hints["memory_forget"] == (False, True)
    assert hints["memory_query"] == (False, False)  # touch=true, the default, reinforces what it shows
    assert all(None not in pair for pair in hints.values()), hints


@pytest.mark.parametrize("name", sorted(n for n, op in OPERATIONS.items() if op.cli))
def test_the_command_line_options_are_the_declaration(name: str) -> None:
    """Each field is an argument (required), or an option with its default, or the flag that turns a True
    default off, or a yes/no pair of flags (unset by default); nothing else but --json and the renderer's own."""
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    params = {opt: param for param in command.params for opt in [*param.opts, param.name]}
    seen = set()
    for f in dataclasses.fields(OPERATIONS[name].args):
        if f.default is dataclasses.MISSING:
            found = [params[f.name]]
            assert found[0].required
        elif "off" in f.metadata:
            found = [params[f.metadata["off"][0]]]
            assert f.default is True and found[0].default is False
        elif f.type in ("Optional[bool]", Optional[bool]):
            on, off = switches(f.name, f.metadata)
            found = [params[on], params[off]]
            assert f.default is None and [p.default for p in found] == [False, False]
        else:
            found = [params[f.name]]
            assert found[0].default == f.default, f.name
        seen.update(p.name for p in found)
    assert {p.name for p in command.params} - seen <= {"as_json", "fmt"}


def test_yes_and_no_together_is_a_usage_error(tmp_path) -> None:
    out = CliRunner().invoke(app, ["--store", str(tmp_path / "s"), "feedback", "x", "--helpful", "--harmful"])
    assert out.exit_code != 0 and "--helpful and --harmful contradict each other" in str(out.exception)


def test_mcp_query_takes_every_query_argument_with_the_servers_bounds(mcp_tools: dict[str, Any]) -> None:
    props = mcp_tools["memory_query"].input_schema["properties"]
    assert {"category", "until", "goal", "include_dormant", "expand"} <= set(props)
    assert _bounds(props["k"])["maximum"] == 100


def test_units_list_notes_over_mcp_and_goals_over_every_door(make_engine: Any, write_jsonl: Any, tmp_path) -> None:
    """`goals` is a whole command made of a declaration, an Engine method and its domain code."""
    from helpers import BOOKING, REFUND

    engine = make_engine()
    engine.ingest([write_jsonl("log.jsonl", BOOKING + REFUND)])
    engine.close()
    store = tmp_path / "store"
    out = CliRunner().invoke(app, ["--store", str(store), "goals", "--json"])
    assert out.exit_code == 0, out.output
    goals = {g["goal_id"]: g for g in json.loads(out.stdout)["goals"]}
    assert goals["g1"]["status"] == "succeeded" and goals["g1"]["records"] == len(BOOKING)
    assert goals["g2"]["status"] == "failed"
    failed = CliRunner().invoke(app, ["--store", str(store), "goals", "--status", "failed"])
    assert failed.exit_code == 0 and "g2" in failed.stdout and "g1" not in failed.stdout
    with make_engine(store) as again:
        assert ops.run(again, "units", {"kind": "note"}) == {"units": []}
        assert [g["goal_id"] for g in ops.run(again, "goals", {"limit": 1})["goals"]] == ["g2"]


NUMBERS = [
    (op.name, f.name)
    for op in OPERATIONS.values()
    for f in dataclasses.fields(op.args)
    if f.type in ("float", "Optional[float]", float, Optional[float])
]


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("name,field", NUMBERS)
def test_a_request_number_refuses_nan_and_infinity(name: str, field: str, bad: str) -> None:
    """Python's JSON reads NaN and Infinity: a bound on both sides refuses them, over HTTP as over MCP."""
    with pytest.raises(InputError, match=field):
        ops.parse(ops.lookup(name), json.loads(f'{{"{field}": {bad}}}'))


def test_the_request_numbers_are_found() -> None:
    assert ("refine", "time_limit_s") in NUMBERS
