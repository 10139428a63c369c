"""The types of a schema's fields, one vocabulary for Avro and JSON Schema, and the decoded values they give.

:func:`fields_of` reads a schema definition of Schema Registry (an Avro record, a JSON Schema object) into
:class:`FieldType` s by field name: a ``kind`` (``decimal``, ``timestamp``, ``record``, ...) with what the kind needs
(precision and scale, the items of an array, the fields of a record). The sinks map each kind to a column type of
their own (``ingest/sinks/sql/columns.py``, ``ingest/sinks/delta/columns.py``), so a table is created from the
schema an event carries, not from the values a batch happened to hold.

Microsoft's Avro decoder (the ``avro`` package) gives most logical types as Python values already (``Decimal``,
``UUID``, ``date``, ``time``, aware ``datetime``) but not ``local-timestamp-*`` (a ``long``) nor ``duration`` (12
bytes), and a JSON Schema event's ``date-time``, ``date`` and ``uuid`` strings stay strings. :func:`normalizer`
gives, per schema, the function that turns those into the values their kinds stand for (a naive ``datetime``, a
:class:`Duration`, an aware ``datetime``, a ``date``, a ``UUID``), or ``None`` when a schema has none of them:
most schemas cost nothing per event.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: the kinds, in the order the docs' table lists them
KINDS = ("boolean", "int", "long", "float", "double", "string", "bytes", "fixed", "enum", "decimal", "uuid", "date",
         "time-millis", "time-micros", "timestamp-millis", "timestamp-micros", "local-timestamp-millis",
         "local-timestamp-micros", "duration", "array", "map", "record", "union", "json")

_EPOCH = datetime.datetime(1970, 1, 1)


@dataclass(frozen=True)
class Duration:
    """Avro's ``duration``: months, days and milliseconds, each counted apart (a month is not a number of days)."""

    months: int
    days: int
    milliseconds: int

    def iso(self) -> str:
        """ISO 8601 text (``P1M2DT0.003S``), which Postgres reads as an ``INTERVAL`` of the same three parts."""
        seconds, millis = divmod(self.milliseconds, 1000)
        return f"P{self.months}M{self.days}DT{seconds}.{millis:03d}S"

    @classmethod
    def of_bytes(cls, value: bytes | bytearray) -> Duration:
        """Avro's encoding: three little-endian unsigned 32-bit integers."""
        return cls(*(int.from_bytes(value[i:i + 4], "little") for i in (0, 4, 8)))


@dataclass(frozen=True)
class FieldType:
    """
    What a schema says of one field (or of an array's items, a map's values).

    :param kind: one of :data:`KINDS`.
    :param nullable: whether the field may be null (an Avro union with ``null``, a JSON Schema property not required
        or with ``null`` among its types).
    :param precision: a decimal's digits; a fixed's size.
    :param scale: a decimal's digits after the point.
    :param items: an array's items, a map's values.
    :param fields: a record's fields, in order.
    :param source: the schema's own spelling of the type, for errors.
    """

    kind: str
    nullable: bool = False
    precision: int | None = None
    scale: int | None = None
    items: FieldType | None = None
    fields: tuple[tuple[str, FieldType], ...] = field(default=())
    source: str = ""

    def describe(self) -> str:
        """The type as an error names it (``decimal(10,2)``, ``array<long>``)."""
        if self.kind == "decimal":
            return f"decimal({self.precision},{self.scale})"
        if self.kind in ("array", "map") and self.items is not None:
            return f"{self.kind}<{self.items.describe()}>"
        return self.kind

    @classmethod
    def of_value(cls, value: Any) -> FieldType | None:
        """The kind of a Python value a row function returned for a column that is no field of the schema."""
        for types, kind in _VALUE_KINDS:
            if isinstance(value, types):
                return cls(kind, nullable=True)
        return None


_VALUE_KINDS: tuple[tuple[Any, str], ...] = (
    (bool, "boolean"), (int, "long"), (float, "double"), (str, "string"), ((bytes, bytearray), "bytes"),
    (datetime.datetime, "timestamp-micros"), (datetime.date, "date"), (datetime.time, "time-micros"),
    (uuid.UUID, "uuid"), ((dict, list), "json"))


# -- Avro ---------------------------------------------------------------------------------------------------------

_AVRO_PRIMITIVES = {"boolean": "boolean", "int": "int", "long": "long", "float": "float", "double": "double",
                    "string": "string", "bytes": "bytes"}
_AVRO_LOGICAL = {"uuid", "date", "time-millis", "time-micros", "timestamp-millis", "timestamp-micros",
                 "local-timestamp-millis", "local-timestamp-micros", "duration"}


def _avro(schema: Any, named: dict[str, FieldType]) -> FieldType:
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return FieldType(_AVRO_PRIMITIVES[schema], source=schema)
        if schema in named:
            return named[schema]
        short = {name.rpartition(".")[2]: t for name, t in named.items()}
        if schema in short:
            return short[schema]
        return FieldType("json", source=schema)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        nullable = len(branches) < len(schema)
        if len(branches) == 1:
            inner = _avro(branches[0], named)
            return FieldType(inner.kind, True, inner.precision, inner.scale, inner.items, inner.fields, inner.source)
        return FieldType("union", nullable, source=json.dumps(schema))
    if not isinstance(schema, Mapping):
        return FieldType("json", source=str(schema))
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        found = FieldType("decimal", precision=int(schema.get("precision", 38)), scale=int(schema.get("scale", 0)),
                          source=json.dumps(schema))
    elif logical in _AVRO_LOGICAL:
        found = FieldType(str(logical), source=json.dumps(schema))
    elif kind == "record":
        _name(schema, named, FieldType("record", source=str(schema.get("name"))))  # a field may refer to it by name
        found = FieldType("record", fields=tuple((f["name"], _avro(f["type"], named)) for f in schema.get("fields", [])),
                          source=str(schema.get("name")))
    elif kind == "enum":
        found = FieldType("enum", source=str(schema.get("name")))
    elif kind == "fixed":
        found = FieldType("fixed", precision=int(schema.get("size", 0)), source=str(schema.get("name")))
    elif kind == "array":
        found = FieldType("array", items=_avro(schema.get("items"), named), source="array")
    elif kind == "map":
        found = FieldType("map", items=_avro(schema.get("values"), named), source="map")
    else:
        return _avro(kind, named)
    if kind in ("record", "enum", "fixed"):
        _name(schema, named, found)
    return found


def _name(schema: Mapping[str, Any], named: dict[str, FieldType], found: FieldType) -> None:
    name = str(schema.get("name", ""))
    namespace = schema.get("namespace")
    named[name if "." in name or not namespace else f"{namespace}.{name}"] = found


# -- JSON Schema --------------------------------------------------------------------------------------------------

_JSON_FORMATS = {"date-time": "timestamp-micros", "date": "date", "uuid": "uuid", "time": "time-micros"}
_JSON_TYPES = {"integer": "long", "number": "double", "boolean": "boolean", "string": "string"}


def _json(schema: Any, nullable: bool = False) -> FieldType:
    if not isinstance(schema, Mapping):
        return FieldType("json", nullable=True)
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    nullable = nullable or "null" in types
    types = [t for t in types if t != "null"]
    if len(types) != 1:
        return FieldType("json", nullable=nullable, source=json.dumps(schema.get("type")))
    kind = types[0]
    if kind == "string" and schema.get("format") in _JSON_FORMATS:
        return FieldType(_JSON_FORMATS[schema["format"]], nullable, source=f"string/{schema['format']}")
    if kind in _JSON_TYPES:
        return FieldType(_JSON_TYPES[kind], nullable, source=kind)
    if kind == "array":
        return FieldType("array", nullable, items=_json(schema.get("items")), source="array")
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        required = set(schema.get("required") or ())
        fields = tuple((name, _json(sub, name not in required)) for name, sub in schema["properties"].items())
        return FieldType("record", nullable, fields=fields, source="object")
    return FieldType("json", nullable, source=str(kind))


def fields_of(definition: str | Mapping[str, Any], fmt: str) -> dict[str, FieldType]:
    """The fields of a record schema (``fmt``: ``Avro`` or ``Json``) by name, in order; ``{}`` for a schema that is
    not a record (its events are no rows of columns)."""
    schema = json.loads(definition) if isinstance(definition, str) else definition
    top = _avro(schema, {}) if fmt == "Avro" else _json(schema)
    return dict(top.fields) if top.kind == "record" else {}


# -- decoded values -----------------------------------------------------------------------------------------------

def _local(unit: int) -> Callable[[Any], Any]:
    return lambda v: _EPOCH + datetime.timedelta(microseconds=v * unit) if isinstance(v, int) else v


def _instant(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def _when(parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    return lambda v: parse(v) if isinstance(v, str) else v


_AVRO_FIXES: dict[str, Callable[[Any], Any]] = {
    "local-timestamp-millis": _local(1000), "local-timestamp-micros": _local(1),
    "duration": lambda v: Duration.of_bytes(v) if isinstance(v, (bytes, bytearray)) and len(v) == 12 else v,
}
_JSON_FIXES: dict[str, Callable[[Any], Any]] = {
    "timestamp-micros": _instant, "date": _when(datetime.date.fromisoformat),
    "uuid": _when(uuid.UUID), "time-micros": _when(datetime.time.fromisoformat),
}


def _fixer(kind: FieldType, fixes: Mapping[str, Callable[[Any], Any]]) -> Callable[[Any], Any] | None:
    """The function that fixes a value of ``kind`` (and what it holds); ``None`` when nothing in it needs one."""
    if kind.kind in fixes:
        return fixes[kind.kind]
    if kind.kind in ("array", "map") and kind.items is not None:
        inner = _fixer(kind.items, fixes)
        if inner is None:
            return None
        if kind.kind == "array":
            return lambda v: [inner(x) for x in v] if isinstance(v, list) else v
        return lambda v: {k: inner(x) for k, x in v.items()} if isinstance(v, dict) else v
    if kind.kind == "record":
        return _record_fixer(kind.fields, fixes)
    return None


def _record_fixer(fields: tuple[tuple[str, FieldType], ...],
                  fixes: Mapping[str, Callable[[Any], Any]]) -> Callable[[Any], Any] | None:
    found = [(name, fix) for name, kind in fields if (fix := _fixer(kind, fixes)) is not None]
    if not found:
        return None

    def fix_record(record: Any) -> Any:
        if not isinstance(record, dict):
            return record
        for name, fix in found:
            value = record.get(name)
            if value is not None:
                record[name] = fix(value)
        return record

    return fix_record


def normalizer(definition: str | Mapping[str, Any], fmt: str) -> Callable[[Any], Any] | None:
    """The function that turns a decoded record's values into the ones their kinds stand for (``local-timestamp-*``
    as naive ``datetime``, ``duration`` as :class:`Duration`, JSON Schema's ``date-time``, ``date``, ``time`` and
    ``uuid`` strings as ``datetime``, ``date``, ``time`` and ``UUID``), in place; ``None`` when no field needs it."""
    fields = fields_of(definition, fmt)
    return _record_fixer(tuple(fields.items()), _AVRO_FIXES if fmt == "Avro" else _JSON_FIXES)
