"""A house that grows by rooms: no module of the provider or the local endpoint over 450 lines, no function over 60.

What is over today is listed below with its size now, and may only shrink: a new module or function over the
line fails, and so does a listed one that grew. Split a module by what its parts are about (a folder of
modules under one name, as ``client/failures/``), a function by the steps it takes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import eventhubs_local

import airflow_provider_eh

ROOTS = {"airflow_provider_eh": Path(airflow_provider_eh.__file__).parent,
         "eventhubs_local": Path(eventhubs_local.__file__).parent}
MODULE_LINES = 450
FUNCTION_LINES = 60

# module -> its lines now: the ones still over, to split
MODULES_OVER: dict[str, int] = {}
# module:function -> its lines now
FUNCTIONS_OVER: dict[str, int] = {}


def _sources() -> list[tuple[str, Path]]:
    return [(f"{name}/{path.relative_to(root).as_posix()}", path)
            for name, root in ROOTS.items() for path in sorted(root.rglob("*.py"))]


def test_no_module_is_over_450_lines_but_those_listed_and_none_grew() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in _sources()}
    assert len(sizes) > 150
    over = {name: n for name, n in sizes.items() if n > MODULE_LINES}
    grown = {name: (n, MODULES_OVER.get(name)) for name, n in over.items() if n > MODULES_OVER.get(name, MODULE_LINES)}
    assert grown == {}, f"modules over {MODULE_LINES} lines (lines, allowed): {grown}; split them into rooms"
    shrunk = {name: n for name, n in MODULES_OVER.items() if sizes.get(name, 0) < n}
    assert shrunk == {}, f"listed modules are smaller now: lower or drop their entries: {shrunk}"


def test_no_function_is_over_60_lines_but_those_listed_and_none_grew() -> None:
    lengths = {}
    for name, path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{name}:{node.name}"
                lengths[key] = max(lengths.get(key, 0), node.end_lineno - node.lineno + 1)  # type: ignore[operator]
    over = {key: n for key, n in lengths.items() if n > FUNCTION_LINES}
    grown = {key: (n, FUNCTIONS_OVER.get(key)) for key, n in over.items() if n > FUNCTIONS_OVER.get(key, FUNCTION_LINES)}
    assert grown == {}, f"functions over {FUNCTION_LINES} lines (lines, allowed): {grown}; split them by their steps"
    shrunk = {key: n for key, n in FUNCTIONS_OVER.items() if lengths.get(key, 0) < n}
    assert shrunk == {}, f"listed functions are shorter now: lower or drop their entries: {shrunk}"
