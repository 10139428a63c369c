"""Imports only point down: the layers of CONTRIBUTING.md's "How the code is laid out", checked two ways.

From the bottom: ``errors``, ``steps``, ``stamps``, ``client/`` and ``checkpoints/``; then the two
engines, ``publishing/`` and ``ingest/`` (neither imports the other, nor Airflow); then ``spark/``
(the publishing engine on executors, no Airflow); then the Airflow shells. Beside them, the local
endpoint (``endpoint/eventhubs_local``, a distribution of its own) imports nothing of the provider and
nothing of Airflow: the provider's ``testing`` helpers start it, never the other way round.

Every ``import`` statement of a layer's source is read (also those inside functions and under
``TYPE_CHECKING``: an upward import there is still an upward dependency), and every module of a layer
is imported in a fresh interpreter whose ``sys.modules`` must hold nothing above it. A package's
``__main__`` (``python -m airflow_provider_eh.ingest``) is part of its layer like any other module: what it
needs of Airflow comes from the shell through an interface the layer declares
(``ingest.__main__.Connections``).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import airflow_provider_eh

PACKAGE = "airflow_provider_eh"
ROOT = Path(airflow_provider_eh.__file__).parent
SHELLS = ("hooks", "operators", "sensors", "triggers", "plugins", "assets", "queues", "version_compat",
          "get_provider_info", "metrics")
ENGINES = ("publishing", "ingest")
ABOVE_BOTTOM = ("airflow", *ENGINES, "spark", *SHELLS)

# layer (a subpackage or top-level module of the package) -> what it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "errors": ABOVE_BOTTOM,
    "steps": ABOVE_BOTTOM,
    "stamps": ABOVE_BOTTOM,
    "client": ABOVE_BOTTOM,
    "checkpoints": ABOVE_BOTTOM,
    "publishing": ("airflow", "ingest", "spark", *SHELLS),
    "ingest": ("airflow", "publishing", "spark", *SHELLS),
    "spark": ("airflow", "ingest", *SHELLS),
}


def _qualified(name: str) -> str:
    """``airflow`` stays as it is; a name of the package (``hooks``) becomes ``airflow_provider_eh.hooks``."""
    return name if name == "airflow" else f"{PACKAGE}.{name}"


def _under(module: str, names: tuple[str, ...]) -> str | None:
    """The forbidden name ``module`` is, or is inside, if any."""
    for name in names:
        prefix = _qualified(name)
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return None


def _sources(layer: str) -> list[Path]:
    path = ROOT / layer
    return sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every import statement in ``path``; ``from x import y`` counts as ``x.y``."""
    package = _module_name(path).split(".")
    if path.stem != "__init__":
        package = package[:-1]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            out.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return out


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_import_statement_of_a_layer_points_up(layer: str) -> None:
    upward = [
        f"{path.relative_to(ROOT.parent)}:{line} imports {target}"
        for path in _sources(layer)
        for line, target in _imports(path)
        if _under(target, FORBIDDEN[layer])
    ]
    assert upward == [], f"{layer} must not import {', '.join(FORBIDDEN[layer])}; found:\n" + "\n".join(upward)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_importing_a_layer_loads_nothing_above_it(layer: str) -> None:
    modules = [_module_name(path) for path in _sources(layer)]
    script = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout)
    above = [m for m in loaded if _under(m, FORBIDDEN[layer])]
    assert above == [], f"importing {layer} ({len(modules)} modules) loaded {above}"


def test_the_checks_see_an_upward_import() -> None:
    """The static check resolves relative and nested imports (so an empty finding above means something)."""
    assert ROOT / "ingest" / "__main__.py" in _sources("ingest")  # a command line is part of its layer
    found = dict(_imports(ROOT / "publishing" / "publisher.py"))
    assert any(t == f"{PACKAGE}.stamps.batch_stamp" for t in found.values())
    assert any(_under(t, ("client",)) for t in found.values())
    assert _under(f"{PACKAGE}.hooks.producer_state", FORBIDDEN["spark"]) == f"{PACKAGE}.hooks"
    assert _under("airflow.sdk", FORBIDDEN["ingest"]) == "airflow"
    assert _under("airflow_provider_eh.stamps", FORBIDDEN["ingest"]) is None


LOWER = [
    "airflow_provider_eh.client.endpoint",
    "airflow_provider_eh.client.partition_readers",
    "airflow_provider_eh.client.readback",
    "airflow_provider_eh.checkpoints.blob_layout",
    "airflow_provider_eh.checkpoints.lag",
]
ABOVE = ("airflow", "airflow_provider_eh.publishing", "airflow_provider_eh.ingest", "airflow_provider_eh.spark",
         "airflow_provider_eh.hooks", "airflow_provider_eh.operators", "airflow_provider_eh.sensors",
         "airflow_provider_eh.triggers", "airflow_provider_eh.metrics")


def test_client_and_checkpoint_modules_import_no_airflow_and_no_engine() -> None:
    script = (
        "import importlib, json, sys\n"
        f"for name in {LOWER!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout)
    above = [m for m in loaded if any(m == a or m.startswith(a + ".") for a in ABOVE)]
    assert above == [], f"the client layer or the checkpoint modules pulled in {above}"


def test_the_local_endpoint_imports_nothing_of_the_provider_or_of_airflow() -> None:
    import eventhubs_local

    root = Path(eventhubs_local.__file__).parent
    modules = sorted(f"eventhubs_local.{p.relative_to(root).with_suffix('').as_posix().replace('/', '.')}"
                     for p in root.rglob("*.py") if p.stem not in ("__init__", "__main__", "pytest_plugin"))
    assert "eventhubs_local.broker" in modules
    script = (
        "import importlib, json, sys\n"
        f"for name in {['eventhubs_local', *modules]!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout)
    above = [m for m in loaded if m.split(".")[0] in (PACKAGE, "airflow")]
    assert above == [], f"the local endpoint pulled in {above}"


# Inside the ingestion engine: the sinks are rooms of their own. The engine (the runner, the processor, the
# drain, ...) knows them through the contract alone, so a new sink is a folder; a sink knows nothing of the
# engine, nor of another sink. What chooses a sink sits on top: the operators, the command line and the
# admin actions (``admin``, ``delta_replay``, ``__main__``) and the package's exports (``__init__``).
SINKS = f"{PACKAGE}.ingest.sinks"
CHOOSERS = ("__init__", "__main__", "admin", "delta_replay")


def test_the_ingestion_engine_knows_sinks_only_by_their_contract() -> None:
    engine = [p for p in sorted((ROOT / "ingest").glob("*.py")) if p.stem not in CHOOSERS]
    assert {p.stem for p in engine} >= {"runner", "processor", "drain"}
    reaching = [f"{path.relative_to(ROOT.parent)}:{line} imports {target}" for path in engine
                for line, target in _imports(path)
                if target.startswith(SINKS + ".") and not target.startswith(SINKS + ".contract")]
    assert reaching == [], "the engine must import only ingest.sinks.contract of the sinks:\n" + "\n".join(reaching)


def test_a_sink_imports_neither_the_engine_nor_another_sink() -> None:
    engine = {f"{PACKAGE}.ingest.{p.stem}" for p in (ROOT / "ingest").glob("*.py") if p.stem not in ("__init__", "events")}
    sinks = ROOT / "ingest" / "sinks"
    rooms = sorted(p for p in sinks.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert [room.name for room in rooms] == ["delta", "sql"]
    found = []
    for room in rooms:
        others = [f"{SINKS}.{other.name}" for other in rooms if other != room]
        for path in sorted(room.rglob("*.py")):
            for line, target in _imports(path):
                if any(target == m or target.startswith(m + ".") for m in [*engine, *others]):
                    found.append(f"{path.relative_to(ROOT.parent)}:{line} imports {target}")
    for line, target in _imports(sinks / "contract.py"):
        if target.startswith(f"{PACKAGE}.ingest.") and not target.startswith(f"{PACKAGE}.ingest.events"):
            found.append(f"ingest/sinks/contract.py:{line} imports {target}")
    assert found == [], "a sink reaches into the engine or another sink:\n" + "\n".join(found)
