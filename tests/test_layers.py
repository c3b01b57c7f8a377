"""The house rules that a diagram would let drift: the floors, no import circles, and one owner of
the `units` table. They are checked on the import graph (grimp) and the source, so they stay true."""

from __future__ import annotations

import re
from pathlib import Path

import grimp
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "expengine"
# Top floor first; a floor may import any floor below it, never one above. The leaves (exceptions,
# the JSON serialiser, strict argument models, text helpers) import only each other, so every floor
# may use them.
FLOORS = [
    "expengine.cli",
    "expengine.fleet",  # drives Engine instances on Ray; wraps the service for many tenants
    "expengine.service",
    "expengine.engine",
    "expengine.lifecycle",
    "expengine.query",
    "expengine.ingest",
    "expengine.store",
    "expengine.models",
    "expengine.config",
    "expengine.config_checks",
]
LEAVES = [
    "expengine.errors",
    "expengine.results",
    "expengine.arguments",
    "expengine.charts",
    "expengine.clock",
    "expengine.operations",
    "expengine.textutil",
]
MAX_LINES = 400


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("expengine")


def _routes(dependencies) -> list[str]:
    return sorted(
        f"{head} -> {tail}"
        for dependency in dependencies
        for route in dependency.routes
        for head in route.heads
        for tail in route.tails
    )


def test_no_floor_imports_a_floor_above_it(graph):
    assert _routes(graph.find_illegal_dependencies_for_layers(layers=FLOORS)) == []


def test_the_floor_check_finds_an_arrow_up():
    """Not vacuous: a store module importing query would be reported."""
    changed = grimp.build_graph("expengine")
    changed.add_import(importer="expengine.store.units", imported="expengine.query.search")
    assert "expengine.store.units -> expengine.query.search" in _routes(
        changed.find_illegal_dependencies_for_layers(layers=FLOORS)
    )


def test_the_leaves_import_only_each_other(graph):
    for leaf in LEAVES:
        assert graph.find_modules_directly_imported_by(leaf) <= set(LEAVES), leaf


def test_no_import_circle_between_modules(graph):
    """Tarjan's strongly connected components over the module graph: every one is a single module."""
    numbers: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        numbers[module] = lowest[module] = len(numbers)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in numbers:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in on_stack:
                lowest[module] = min(lowest[module], numbers[imported])
        if lowest[module] == numbers[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in numbers:
            visit(module)
    assert circles == []


UNIT_WRITE = re.compile(r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+units\b", re.IGNORECASE)
UNIT_INDEX_WRITE = re.compile(r"index\.(add|delete|update)\(\s*(UNITS|[\"']units[\"'])")


def test_only_the_store_writes_the_units_table():
    """store/units.py owns the table: no SQL write to `units` and no LanceDB change of the units
    index anywhere outside store/ (reads on the query path may stay where they are)."""
    offenders = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "store"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if UNIT_WRITE.search(line) or UNIT_INDEX_WRITE.search(line)
    ]
    assert offenders == []


def test_the_check_finds_a_unit_write():
    """The patterns above are not vacuous."""
    assert UNIT_WRITE.search('con.execute("UPDATE units SET status = ?")')
    assert UNIT_WRITE.search("delete from units where id = ?")
    assert UNIT_INDEX_WRITE.search('store.index.delete("units", [uid])')
    assert not UNIT_WRITE.search("SELECT id FROM units WHERE status = 'active'")


def test_no_module_over_the_size_limit():
    too_long = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not too_long, too_long
