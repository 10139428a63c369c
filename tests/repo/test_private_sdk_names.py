"""The Event Hubs SDK's private names are touched in one adapter, the package ``client/sdk_internals/``.

Every module of the package but the adapter's (each module under ``client/sdk_internals/``) is parsed,
and any of these is a finding:

- an import of a private module or name of ``azure`` (``azure.eventhub._pyamqp``, ``from azure.eventhub
  import _x``);
- an attribute with a single leading underscore read, written or deleted on anything but ``self`` or
  ``cls`` (``producer._handler``, ``super()._open()``), or named by a string to ``getattr``,
  ``hasattr``, ``setattr``, ``delattr`` or looked up in ``vars(...)``; a class of the same module
  (``_Sink._fields``) and namedtuple's documented ``_replace``/``_asdict``/``_fields``/``_make`` are
  the package's own;
- an import of one of the adapter's modules (``airflow_provider_eh.client.sdk_internals.batches``):
  the rest of the package calls the names the adapter's ``__init__`` exports;
- in a class that derives from an SDK class (a base imported from ``azure`` or from the adapter), a
  ``def _x`` (an override of the SDK's private method) or a ``self._x`` that is not one of the class's
  own attributes listed in :data:`OWN_ON_SDK_CLASSES`.

The rule is static and errs on the strict side: a private access of another library's object is a
finding too, and stays only through :data:`ALLOWED`, a short list with the reason of each.
"""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_provider_eh

ROOT = Path(airflow_provider_eh.__file__).parent
ADAPTER = ROOT / "client" / "sdk_internals"  # the adapter: every module under it, and nothing else
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make"}
NAMING_CALLS = {"getattr", "hasattr", "setattr", "delattr"}

# (module path under the package, the expression) -> why it is not the Event Hubs SDK's
ALLOWED: dict[tuple[str, str], str] = {
    ("hooks/producer_state.py", "row._val"): "Airflow's Variable model: the encrypted column, to tell 'undecryptable' from 'null'",
    ("spark/job.py", "getattr(client, '_builder')"): "pyspark's Spark Connect client: the server's port",
    # the package's own objects, one attribute away from ``self``
    ("ingest/mirror.py", "self._run._mirror"): "the mirror writer is its IngestRun's helper",
    ("ingest/mirror.py", "self._run._stage"): "the mirror writer is its IngestRun's helper",
    ("ingest/sinks/sql/store.py", "self._store._read_checkpoint"): "a session of its own SqlCheckpointStore",
}

# class (by name) deriving from an SDK class -> the private attributes that are its own
OWN_ON_SDK_CLASSES: dict[str, set[str]] = {
    "SingleConnectionProducerClient": {"_take_share", "_give_back_share", "_share_key", "_owns_kept", "_kept"},
    "SingleConnectionConsumerClient": {"_take_share", "_give_back_share", "_share_key"},
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _adapter_module(module: str) -> bool:
    """Whether ``module`` is the adapter (``...client.sdk_internals``) or one of its modules."""
    return module.endswith("client.sdk_internals") or ".client.sdk_internals." in f".{module}"


def _inside_adapter(module: str) -> bool:
    """Whether ``module`` is one of the adapter's modules (not the adapter itself), absolute or relative."""
    parts = module.split(".")
    return "sdk_internals" in parts[:-1]


def _private_azure_module(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "azure" and any(_private(p) for p in parts)


class _Finder(ast.NodeVisitor):
    def __init__(self, relative: str, tree: ast.Module):
        self.relative = relative
        self.findings: list[str] = []
        self.own_classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        self.sdk_names = self._sdk_imports(tree)
        self._sdk_class: list[str | None] = []

    @staticmethod
    def _sdk_imports(tree: ast.Module) -> set[str]:
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module.split(".")[0] == "azure" or _adapter_module(node.module)):
                names.update(alias.asname or alias.name for alias in node.names)
        return names

    def _find(self, node: ast.AST, what: str) -> None:
        text = what
        if (self.relative, text) in ALLOWED:
            return
        self.findings.append(f"{self.relative}:{getattr(node, 'lineno', '?')}: {text}")

    # imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _private_azure_module(alias.name) or _inside_adapter(alias.name):
                self._find(node, f"import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if _private_azure_module(module) or _inside_adapter(module):
            self._find(node, f"from {module} import ...")
        elif module.split(".")[0] == "azure":
            for alias in node.names:
                if _private(alias.name):
                    self._find(node, f"from {module} import {alias.name}")

    # classes deriving from the SDK's
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        derived = any(isinstance(b, ast.Name) and b.id in self.sdk_names for b in node.bases) or any(
            isinstance(b, ast.Attribute) and isinstance(b.value, ast.Name) and b.value.id in self.sdk_names
            for b in node.bases)
        self._sdk_class.append(node.name if derived else None)
        if derived:
            own = OWN_ON_SDK_CLASSES.get(node.name, set())
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(item.name) \
                        and item.name not in own:
                    self._find(item, f"{node.name}.{item.name} overrides a private method of an SDK class")
        self.generic_visit(node)
        self._sdk_class.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # a nested function or class starts no new class scope for ``self``; only ClassDef does
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _private(node.attr) and node.attr not in NAMEDTUPLE_API:
            value = node.value
            if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                sdk_class = self._sdk_class[-1] if self._sdk_class else None
                if sdk_class is not None and node.attr not in OWN_ON_SDK_CLASSES.get(sdk_class, set()):
                    self._find(node, f"{value.id}.{node.attr} in {sdk_class}, a class deriving from the SDK's")
            elif not (isinstance(value, ast.Name) and value.id in self.own_classes):
                self._find(node, f"{ast.unparse(node)}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in NAMING_CALLS and len(node.args) >= 2:
            target, name = node.args[0], node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value) \
                    and not (isinstance(target, ast.Name) and target.id in ("self", "cls")):
                self._find(node, f"{func.id}({ast.unparse(target)}, {name.value!r})".replace(
                    f"{func.id}(", "getattr(" if func.id == "getattr" else f"{func.id}(", 1))
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        left = node.left
        if isinstance(left, ast.Constant) and isinstance(left.value, str) and _private(left.value) and any(
                isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "vars" for c in node.comparators):
            self._find(node, f"{left.value!r} in vars(...)")
        self.generic_visit(node)


def findings_of(source: str, relative: str = "<snippet>.py") -> list[str]:
    tree = ast.parse(source)
    finder = _Finder(relative, tree)
    finder.visit(tree)
    return finder.findings


def _adapter_modules() -> list[Path]:
    return sorted(ADAPTER.rglob("*.py"))


def _package_modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if not p.is_relative_to(ADAPTER))


def test_no_module_but_the_adapter_touches_private_names_of_the_sdk() -> None:
    findings = []
    for path in _package_modules():
        findings += findings_of(path.read_text(), path.relative_to(ROOT).as_posix())
    assert findings == [], (
        "private names of the Event Hubs SDK (or another library's) outside client/sdk_internals/; move them "
        "there behind a named function with the reason, or, for another library's, add them to ALLOWED:\n"
        + "\n".join(findings)
    )


def test_the_rule_sees_each_kind_of_private_access() -> None:
    snippet = '''
import azure.eventhub._pyamqp.types
from azure.eventhub._pyamqp._encode import TYPE
from azure.eventhub import _common
from azure.eventhub import EventHubProducerClient

class Ours:
    def __init__(self):
        self._mine = 1

class Derived(EventHubProducerClient):
    def _create_producer(self, partition_id=None):
        return super()._create_producer(partition_id)

    def create_batch(self):
        return self._max_message_size_on_link

def touch(producer, client, link):
    producer._handler._link_properties = {}
    getattr(client, "_producers", None)
    hasattr(link, "_error")
    setattr(producer, "_open", None)
    delattr(producer, "_create_handler")
    if "_create_handler" in vars(producer):
        pass
    return Ours._mine, link._replace(a=1)
'''
    found = findings_of(snippet)
    expected = [
        "import azure.eventhub._pyamqp.types",
        "from azure.eventhub._pyamqp._encode import ...",
        "from azure.eventhub import _common",
        "Derived._create_producer overrides a private method of an SDK class",
        "super()._create_producer",
        "self._max_message_size_on_link in Derived",
        "producer._handler._link_properties",
        "producer._handler",
        "getattr(client, '_producers')",
        "hasattr(link, '_error')",
        "setattr(producer, '_open')",
        "delattr(producer, '_create_handler')",
        "'_create_handler' in vars(...)",
    ]
    for text in expected:
        assert any(text in f for f in found), f"{text!r} not found in {found}"
    assert not any("_mine" in f or "_replace" in f for f in found), found  # our own class, namedtuple's API
    assert len(found) == len(expected), found


def test_the_adapter_itself_is_where_the_private_names_are() -> None:
    assert (ADAPTER / "__init__.py").is_file() and not ADAPTER.with_suffix(".py").exists()  # one adapter, a package
    modules = _adapter_modules()
    assert len(modules) > 1 and set(_package_modules()).isdisjoint(modules)
    for path in modules:  # the rule is not blind to them there: each module of the adapter holds some
        relative = path.relative_to(ROOT).as_posix()
        assert findings_of(path.read_text(), relative), relative


def test_a_class_deriving_from_the_adapters_is_held_to_the_rule() -> None:
    for module in ("airflow_provider_eh.client.sdk_internals", "airflow_provider_eh.client.sdk_internals.hooked_clients"):
        snippet = f"""
from {module} import HookedProducerClient

class Lean(HookedProducerClient):
    def _open(self):
        return self._handler
"""
        found = findings_of(snippet)
        assert any("Lean._open overrides" in f for f in found) and any("self._handler in Lean" in f for f in found), found
        assert any(module in f for f in found) == module.endswith(".hooked_clients"), found  # the adapter's own module


def test_the_adapters_modules_are_reached_through_the_adapter() -> None:
    assert findings_of("from airflow_provider_eh.client import sdk_internals\n"
                       "from airflow_provider_eh.client.sdk_internals import typed\n") == []
    found = findings_of("import airflow_provider_eh.client.sdk_internals.batches\n"
                        "from airflow_provider_eh.client.sdk_internals.amqp_values import typed\n"
                        "from .sdk_internals.receiving import message_of\n")
    assert len(found) == 3, found


def test_no_module_of_the_local_endpoint_but_its_adapter_touches_private_names_of_the_sdk() -> None:
    """The endpoint speaks AMQP with the SDK's private codec: ``eventhubs_local/sdk_amqp.py`` names what it takes
    of it, once; every other module of the endpoint is held to the same rule as the provider's."""
    import eventhubs_local

    root = Path(eventhubs_local.__file__).parent
    adapter = root / "sdk_amqp.py"
    modules = sorted(p for p in root.rglob("*.py") if p != adapter)
    assert len(modules) > 20
    findings = [f for path in modules for f in findings_of(path.read_text(), f"eventhubs_local/{path.relative_to(root)}")]
    assert findings == [], ("private names of the SDK in the local endpoint outside eventhubs_local/sdk_amqp.py; "
                            "take them there under a public name:\n" + "\n".join(findings))
    assert findings_of(adapter.read_text(), "eventhubs_local/sdk_amqp.py")  # the rule is not blind to them there
