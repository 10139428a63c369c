"""Imports of the package's own modules stand at the top of a module, where the dependency graph shows them.

An import inside a function is kept only where it is deliberately lazy: where moving it to the top would make
importing the module load more (PySpark or deltalake on a machine that has no use for them, the SDK in every
Airflow process that loads the plugin, a shell module from the engine's command line). Those are counted per
module below and may only become fewer; a new one fails. Before adding one, check that it is lazy for a reason:
import the module in a fresh interpreter with the import at the top and compare ``sys.modules``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_provider_eh

ROOT = Path(airflow_provider_eh.__file__).parent

# module -> its function-local imports of the package's own modules (each lazy for a reason)
LAZY: dict[str, int] = {
    "client/endpoint.py": 2,
    "client/received_fields.py": 1,
    "hooks/producer_state.py": 3,
    "ingest/admin.py": 1,
    "ingest/sinks/delta/columns.py": 1,
    "operators/spark_publish.py": 5,
    "plugins/event_hubs_view.py": 1,
    "plugins/links.py": 1,
    "plugins/readers/consumers.py": 1,
    "plugins/readers/dead_letters.py": 2,
    "plugins/readers/discovery.py": 6,
    "plugins/readers/lag.py": 1,
    "plugins/readers/ledgers.py": 2,
    "plugins/readers/reading.py": 2,
    "plugins/readers/variables.py": 2,
    "plugins/sampler.py": 3,
    "plugins/tabs.py": 3,
    "publishing/typed.py": 1,
    "publishing/wire.py": 1,
    "queues.py": 1,
    "spark/datasource/__init__.py": 1,
    "spark/datasource/options.py": 4,
    "spark/datasource/ranges.py": 2,
    "spark/datasource/read_options.py": 1,
    "spark/datasource/read_source.py": 1,
    "spark/datasource/source.py": 4,
}


def _local_imports() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if (isinstance(inner, ast.ImportFrom) and inner.level == 0 and inner.module
                            and inner.module.startswith("airflow_provider_eh")):
                        name = path.relative_to(ROOT).as_posix()
                        found[name] = found.get(name, 0) + 1
    return found


def test_own_imports_inside_functions_are_only_the_lazy_ones_listed() -> None:
    found = _local_imports()
    grown = {name: (n, LAZY.get(name, 0)) for name, n in found.items() if n > LAZY.get(name, 0)}
    assert grown == {}, f"imports of the package inside functions (found, allowed): {grown}; move them to the top"
    fewer = {name: found.get(name, 0) for name, n in LAZY.items() if found.get(name, 0) < n}
    assert fewer == {}, f"fewer lazy imports now: lower or drop their entries: {fewer}"
