"""The package's errors are one hierarchy: every public exception class derives from ``EventHubsProviderError``.

An error outside it escapes the operators' map (``operators/task_errors.py``: retryable or not), and a user's
``except EventHubsProviderError`` does not see it. Private classes (a leading underscore) are control flow
inside one module and never leave it.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import airflow_provider_eh
from airflow_provider_eh.errors import EventHubsProviderError

ROOT = Path(airflow_provider_eh.__file__).parent


def _exception_classes() -> list[tuple[str, str, int]]:
    """``(module, class, line)`` of every public class whose name ends in ``Error`` or that derives from a built-in
    exception directly, read from the source."""
    builtin = {name for name in dir(__builtins__ if isinstance(__builtins__, dict) else __builtins__)}
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if node.name.endswith("Error") or any(b in builtin and b.endswith(("Error", "Exception")) for b in bases):
                found.append((module, node.name, node.lineno))
    return found


def test_every_public_error_of_the_package_is_in_the_one_hierarchy() -> None:
    classes = _exception_classes()
    assert len(classes) > 30 and ("airflow_provider_eh.errors", "SinkConfigError") in {c[:2] for c in classes}
    outside = [f"{module}:{line} {name}" for module, name, line in classes
               if not issubclass(getattr(importlib.import_module(module), name), EventHubsProviderError)]
    assert outside == [], "errors outside EventHubsProviderError:\n" + "\n".join(outside)
