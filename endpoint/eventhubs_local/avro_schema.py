"""Avro schemas for the Schema Registry: parsing a definition, and the compatibility of two versions.

Broker layer, no dependency: a definition is JSON (Avro 1.11 specification, "Schema Declaration");
:func:`parse` checks it and resolves named types, :func:`incompatibilities` applies the
specification's "Schema Resolution" rules to say whether data written with one schema can be read
with another, naming each field at fault.

* Backward (a group's mode ``Backward``): the new version reads data written with the previous one.
  A field the new version adds needs a default; a field it removes is fine; a type may be promoted
  (int to long, float or double; long to float or double; float to double; string and bytes either
  way); an enum may not lose a symbol the old version wrote unless it has a default.
* Forward: the previous version reads data written with the new one (the same rules, roles swapped).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


class AvroSchemaError(ValueError):
    """A definition that is no valid Avro schema; the message says where (a path like ``Order.items``)."""


@dataclass
class Node:
    """One parsed schema: ``kind`` is a primitive name, ``record``, ``enum``, ``fixed``, ``array``, ``map`` or ``union``."""

    kind: str
    name: str = ""  # full name of a named type
    fields: list[tuple[str, Node, bool, tuple[str, ...]]] = field(default_factory=list)  # name, type, has default, aliases
    symbols: tuple[str, ...] = ()
    enum_default: str | None = None
    size: int = 0
    items: Node | None = None  # array items, map values
    branches: list[Node] = field(default_factory=list)

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


def parse(definition: str) -> Node:
    """The schema of an Avro definition, or :class:`AvroSchemaError` naming what is wrong."""
    try:
        raw = json.loads(definition)
    except ValueError as exc:
        raise AvroSchemaError(f"the definition is not JSON: {exc}") from None
    return _Parser().parse(raw, "", "")


class _Parser:
    def __init__(self) -> None:
        self.named: dict[str, Node] = {}

    def _full(self, name: Any, namespace: str, where: str) -> str:
        if not isinstance(name, str) or not name:
            raise AvroSchemaError(f"{where or 'the schema'}: a named type needs a non-empty 'name'")
        return name if "." in name or not namespace else f"{namespace}.{name}"

    def parse(self, raw: Any, namespace: str, where: str) -> Node:
        if isinstance(raw, str):
            if raw in PRIMITIVES:
                return Node(raw)
            full = raw if "." in raw or not namespace else f"{namespace}.{raw}"
            found = self.named.get(full) or self.named.get(raw)
            if found is None:
                raise AvroSchemaError(f"{where or 'the schema'}: unknown type {raw!r}")
            return found
        if isinstance(raw, list):
            return Node("union", branches=[self.parse(b, namespace, f"{where}[{i}]") for i, b in enumerate(raw)])
        if not isinstance(raw, dict):
            raise AvroSchemaError(f"{where or 'the schema'}: {raw!r} is no Avro type")
        kind = raw.get("type")
        if kind in PRIMITIVES:
            return Node(kind)
        if kind in ("record", "error"):
            ns = raw.get("namespace", namespace) if isinstance(raw.get("namespace", namespace), str) else namespace
            full = self._full(raw.get("name"), ns, where)
            node = Node("record", name=full)
            self.named[full] = node
            ns = full.rsplit(".", 1)[0] if "." in full else ""
            fields = raw.get("fields")
            if not isinstance(fields, list):
                raise AvroSchemaError(f"record {full!r}: 'fields' must be a list")
            for spec in fields:
                if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or "type" not in spec:
                    raise AvroSchemaError(f"record {full!r}: each field needs a 'name' and a 'type', got {spec!r}")
                aliases = tuple(a for a in spec.get("aliases", ()) if isinstance(a, str))
                node.fields.append((spec["name"], self.parse(spec["type"], ns, f"{node.short_name}.{spec['name']}"),
                                    "default" in spec, aliases))
            return node
        if kind == "enum":
            full = self._full(raw.get("name"), raw.get("namespace", namespace) or "", where)
            symbols = raw.get("symbols")
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                raise AvroSchemaError(f"enum {full!r}: 'symbols' must be a list of names")
            node = Node("enum", name=full, symbols=tuple(symbols), enum_default=raw.get("default"))
            self.named[full] = node
            return node
        if kind == "fixed":
            full = self._full(raw.get("name"), raw.get("namespace", namespace) or "", where)
            size = raw.get("size")
            if not isinstance(size, int) or size < 0:
                raise AvroSchemaError(f"fixed {full!r}: 'size' must be a whole number")
            node = Node("fixed", name=full, size=size)
            self.named[full] = node
            return node
        if kind == "array":
            if "items" not in raw:
                raise AvroSchemaError(f"{where or 'the schema'}: an array needs 'items'")
            return Node("array", items=self.parse(raw["items"], namespace, f"{where}[]"))
        if kind == "map":
            if "values" not in raw:
                raise AvroSchemaError(f"{where or 'the schema'}: a map needs 'values'")
            return Node("map", items=self.parse(raw["values"], namespace, f"{where}{{}}"))
        if isinstance(kind, (dict, list)):
            return self.parse(kind, namespace, where)
        raise AvroSchemaError(f"{where or 'the schema'}: unknown type {kind!r}")


def incompatibilities(writer: Node, reader: Node) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (empty: it can), each naming the field."""
    problems: list[str] = []
    _match(writer, reader, reader.short_name or reader.kind, problems, set())
    return problems


def _describe(node: Node) -> str:
    return node.name or node.kind


def _readable(writer: Node, reader: Node, seen: set[tuple[int, int]]) -> bool:
    problems: list[str] = []
    _match(writer, reader, "", problems, seen)
    return not problems


def _match(writer: Node, reader: Node, path: str, problems: list[str], seen: set[tuple[int, int]]) -> None:
    key = (id(writer), id(reader))
    if key in seen:  # a recursive type: already being matched
        return
    seen = seen | {key}
    if writer.kind == "union":
        for branch in writer.branches:
            _match(branch, reader, path, problems, seen)
        return
    if reader.kind == "union":
        if not any(_readable(writer, branch, seen) for branch in reader.branches):
            problems.append(f"field '{path}': type {_describe(writer)} is not among "
                            f"{', '.join(_describe(b) for b in reader.branches)}")
        return
    if writer.kind in PRIMITIVES or reader.kind in PRIMITIVES:
        if writer.kind != reader.kind and reader.kind not in _PROMOTIONS.get(writer.kind, ()):
            problems.append(f"field '{path}': type {_describe(writer)} cannot be read as {_describe(reader)}")
        return
    if writer.kind != reader.kind:
        problems.append(f"field '{path}': type {_describe(writer)} cannot be read as {_describe(reader)}")
        return
    if writer.kind in ("record", "enum", "fixed") and writer.short_name != reader.short_name:
        problems.append(f"field '{path}': named type {writer.name} cannot be read as {reader.name}")
        return
    if writer.kind == "record":
        written = {name: node for name, node, _d, _a in writer.fields}
        for name, node, has_default, aliases in reader.fields:
            source = next((written[n] for n in (name, *aliases) if n in written), None)
            child = f"{path}.{name}" if path else name
            if source is None:
                if not has_default:
                    problems.append(f"field '{child}' is added without a default: data written before has no value for it")
                continue
            _match(source, node, child, problems, seen)
    elif writer.kind == "enum":
        missing = [s for s in writer.symbols if s not in reader.symbols]
        if missing and reader.enum_default is None:
            problems.append(f"field '{path}': enum {reader.name} lacks symbol(s) {', '.join(missing)} and has no default")
    elif writer.kind == "fixed":
        if writer.size != reader.size:
            problems.append(f"field '{path}': fixed {reader.name} has size {reader.size}, not {writer.size}")
    elif writer.kind in ("array", "map"):
        assert writer.items is not None and reader.items is not None
        _match(writer.items, reader.items, path + ("[]" if writer.kind == "array" else "{}"), problems, seen)
