"""The Delta sink's column type for each kind of schema field, and values as Arrow takes them (no Airflow import).

A Delta table the sink creates from an event's schema, and a column it adds when the schema gains a field, take
these types (``docs/reference/column-types.md`` shows them, generated from :data:`DELTA_TYPES`): Delta's own ``decimal(p,s)``,
``timestamp``, ``date``, structs, arrays and maps, nested as deep as the schema. Delta has no time of day, no
interval and no UUID type: a time and a UUID are strings (ISO 8601, the UUID's text), a duration a struct of its
three counts. A local timestamp (no time zone) is ISO 8601 text without offset: Delta's ``timestamp_ntz`` needs a
table feature that would lift the table's protocol above what every reader reads (``docs/ingestion.md``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_provider_eh.client.schema_types import KINDS, Duration, FieldType
from airflow_provider_eh.client.typed_events import json_default
from airflow_provider_eh.ingest.sinks.contract import ValueRefusedError

#: kind -> the Delta type as Delta's schema spells it; ``{p}``/``{s}``: precision and scale, ``{items}``: the items'
DELTA_TYPES: dict[str, str] = {
    "boolean": "boolean", "int": "integer", "long": "long", "float": "float", "double": "double",
    "string": "string", "bytes": "binary", "fixed": "binary", "enum": "string", "decimal": "decimal({p},{s})",
    "uuid": "string", "date": "date", "time-millis": "string", "time-micros": "string",
    "timestamp-millis": "timestamp", "timestamp-micros": "timestamp",
    "local-timestamp-millis": "string", "local-timestamp-micros": "string",
    "duration": "struct<months: long, days: long, milliseconds: long>", "array": "array<{items}>",
    "map": "map<string, {items}>", "record": "struct<{fields}>", "union": "string (JSON)", "json": "string (JSON)",
}
assert tuple(DELTA_TYPES) == KINDS, "a kind without a Delta type"

_MAX_PRECISION = 38


def arrow_type(field: FieldType) -> Any:
    """The Arrow type (of the Delta type, :data:`DELTA_TYPES`) of ``field``."""
    import pyarrow as pa

    kind = field.kind
    simple = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
              "double": pa.float64(), "bytes": pa.binary(), "fixed": pa.binary(), "date": pa.date32(),
              "timestamp-millis": pa.timestamp("us", tz="UTC"), "timestamp-micros": pa.timestamp("us", tz="UTC")}
    if kind in simple:
        return simple[kind]
    if kind == "decimal" and (field.precision or 38) <= _MAX_PRECISION:
        return pa.decimal128(field.precision or 38, field.scale or 0)
    if kind == "duration":
        return pa.struct([(name, pa.int64()) for name in ("months", "days", "milliseconds")])
    if kind == "array" and field.items is not None:
        return pa.list_(arrow_type(field.items))
    if kind == "map" and field.items is not None:
        return pa.map_(pa.string(), arrow_type(field.items))
    if kind == "record" and field.fields:
        return pa.struct([pa.field(name, arrow_type(sub)) for name, sub in field.fields])
    return pa.string()


def arrow_schema(fields: Mapping[str, FieldType]) -> Any:
    """The Arrow schema of a table created from ``fields``."""
    import pyarrow as pa

    return pa.schema([pa.field(name, arrow_type(kind)) for name, kind in fields.items()])


def delta_type_text(arrow: Any) -> str:
    """The Delta type of an Arrow type, as Delta's schema spells it (what two types are compared by)."""
    import pyarrow as pa
    from deltalake import Schema

    return str(Schema.from_arrow(pa.schema([pa.field("c", arrow)])).fields[0].type)


def _text(value: Any) -> Any:
    if type(value) is str:
        return value
    if isinstance(value, (dict, list, tuple, int, float)):  # bool is an int: JSON's true and false
        return json.dumps(value, sort_keys=True, default=json_default)
    return json_default(value)


def _converter(arrow: Any) -> Callable[[Any], Any] | None:
    """The function that turns a decoded value into what Arrow takes for ``arrow``; ``None`` where it takes it as is."""
    import pyarrow as pa

    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        return _text
    if pa.types.is_struct(arrow):
        fields = [(arrow.field(i).name, _converter(arrow.field(i).type)) for i in range(arrow.num_fields)]

        def struct(value: Any) -> Any:
            if isinstance(value, Duration):
                return {"months": value.months, "days": value.days, "milliseconds": value.milliseconds}
            if not isinstance(value, Mapping):
                return value
            return {name: (value.get(name) if convert is None or value.get(name) is None else convert(value[name]))
                    for name, convert in fields}

        return struct
    if pa.types.is_map(arrow):
        return _each(_converter(arrow.item_type), mapping=True)
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return _each(_converter(arrow.value_type), mapping=False)
    return None


def _each(inner: Callable[[Any], Any] | None, *, mapping: bool) -> Callable[[Any], Any] | None:
    """A converter of a map's values or a list's items, each by ``inner``."""
    if inner is None:
        return None
    if mapping:
        return lambda v: {k: None if x is None else inner(x) for k, x in v.items()} if isinstance(v, Mapping) else v
    return lambda v: [None if x is None else inner(x) for x in v] if isinstance(v, list) else v


def arrow_rows(rows: Sequence[Mapping[str, Any]], schema: Any) -> list[dict[str, Any]]:
    """``rows`` with each value as Arrow takes it for its column of ``schema``; :class:`ValueRefusedError` naming the
    column and the value's type for one no Delta type of the table holds."""
    converters = {f.name: c for f in schema if (c := _converter(f.type)) is not None}
    if not converters:
        return list(rows)  # type: ignore[arg-type]
    converted = []
    for row in rows:
        out = dict(row)
        for name, convert in converters.items():
            value = out.get(name)
            if value is not None and type(value) is not str:
                try:
                    out[name] = convert(value)
                except (TypeError, ValueError) as exc:
                    raise ValueRefusedError(name, type(value).__name__, f"the Delta column is "
                                            f"{schema.field(name).type} ({exc})") from None
        converted.append(out)
    return converted


def to_arrow(rows: Sequence[Mapping[str, Any]], schema: Any, *, extend: bool = False) -> Any:
    """``rows`` as an Arrow table of ``schema`` (``None``: inferred from the values); with ``extend``, a column of the
    rows that ``schema`` lacks is added with the type inferred from its values (a table created from the schema, and
    a row function's own columns). :class:`ValueRefusedError` for a value the column cannot hold."""
    import pyarrow as pa

    if schema is not None and extend:
        names = set(schema.names)
        extra = list(dict.fromkeys(c for row in rows for c in row if c not in names))
        for column in extra:
            inferred = pa.array([row.get(column) for row in rows]).type
            schema = schema.append(pa.field(column, pa.string() if pa.types.is_null(inferred) else inferred))
    data = list(rows) if schema is None else arrow_rows(rows, schema)
    return pa.Table.from_pylist(data) if schema is None else pa.Table.from_pylist(data, schema=schema)


def prepare_table(table: Any, uri: str, fields: Mapping[str, FieldType], *, evolve: bool) -> bool:
    """Make the existing Delta ``table`` fit ``fields``: a column added for each field it lacks (with ``evolve``); a
    field whose type is not its column's is :class:`~airflow_provider_eh.errors.SinkConfigError` naming both and what
    to do. Whether a column was added (one commit)."""
    import pyarrow as pa
    from deltalake import Schema

    from airflow_provider_eh.errors import SinkConfigError

    existing = {f.name.lower(): str(f.type) for f in table.schema().fields}
    missing = []
    for name, kind in fields.items():
        wanted = arrow_type(kind)
        found = existing.get(name.lower())
        if found is None:
            missing.append(pa.field(name, wanted))
        elif found != delta_type_text(wanted) and not found.startswith("PrimitiveType(\"string\")"):
            raise SinkConfigError(
                f"The schema of the events has field {name!r} as {kind.describe()} (Delta {delta_type_text(wanted)}) and "
                f"the Delta table {uri!r} has it as {found}; Delta cannot change a column's type in place: write to a new "
                "table (or rewrite this one with the new type), or map the field to another column with a row function.")
    if not missing:
        return False
    if not evolve:
        raise SinkConfigError(
            f"The schema of the events has field(s) {[f.name for f in missing]} that the Delta table {uri!r} has no "
            "column for; let the sink add them (evolve_columns=True), or leave them out of columns.")
    table.alter.add_columns(list(Schema.from_arrow(pa.schema(missing)).fields))
    return True
