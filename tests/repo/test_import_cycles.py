"""No two modules of the package import each other, directly or round a longer circle.

Every ``import`` statement counts, also those inside functions and under ``TYPE_CHECKING``: a circle
there still means neither module can be read (or moved) without the other. An import names the module
it imports from (``from airflow_provider_eh.publishing.state import StateKey`` is an edge to
``publishing.state``; ``from airflow_provider_eh.publishing import state`` to ``publishing.state`` too);
that a package's ``__init__`` runs first is Python's business, not a dependency of the importer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_provider_eh

PACKAGE = "airflow_provider_eh"
ROOT = Path(airflow_provider_eh.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base for alias in node.names]
            for target in targets:
                while target and target not in paths:  # `import a.b.c` of a name inside a module
                    target = target.rpartition(".")[0]
                if target.startswith(PACKAGE) and target != name:
                    graph[name].add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_finder_sees_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_of_the_package_imports_itself_round_a_circle():
    circles = _circles(_graph())
    assert not circles, "modules that import each other: " + "; ".join(" <-> ".join(c) for c in circles)
