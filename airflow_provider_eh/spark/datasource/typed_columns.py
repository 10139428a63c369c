"""Typed columns of read events: an Avro schema or a JSON Schema as an Arrow type, and bodies decoded into it.

The reader's ``decoded`` column is a struct of the schema's fields (``df.select("decoded.*")`` gives
them as columns). Its type comes from the ``schema`` option, on the driver, before any event is read:
Avro ``record`` → struct, ``int``/``long`` → int/bigint, ``float``/``double``, ``boolean``, ``string``
and ``enum`` → string, ``bytes``/``fixed`` → binary, ``array``, ``map``, a union with ``null`` → the
other type, nullable; the logical types ``date``, ``timestamp-millis``/``-micros`` and ``decimal``.
A JSON Schema's ``object`` → struct, ``integer`` → bigint, ``number`` → double, ``string``, ``boolean``,
``array``; anything else is kept as its JSON text.

Each event is decoded by the schema id its content type names, with Microsoft's decoder and the Schema
Registry (:class:`~airflow_provider_eh.client.typed_events.TypedDecoder`: one fetch per id); a JSON
event without a schema id (the writer's default body, the row as JSON) is parsed as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from airflow_provider_eh.client.typed_events import TypedDecoder, json_default, typed_content
from airflow_provider_eh.errors import DataSourceOptionError, UndecodableEventError

_AVRO_PRIMITIVES = {"int": "int32", "long": "int64", "float": "float32", "double": "float64", "boolean": "bool_",
                    "string": "string", "bytes": "binary", "null": "null"}
_JSON_PRIMITIVES = {"integer": "int64", "number": "float64", "string": "string", "boolean": "bool_"}


def arrow_type_of(definition: str, fmt: str) -> Any:
    """The Arrow type of a schema's values (a struct for a record or an object)."""
    try:
        schema = json.loads(definition)
    except ValueError:
        raise DataSourceOptionError("option 'schema' is not JSON: give the Avro schema or JSON Schema as JSON text") from None
    return _avro(schema, {}) if fmt == "Avro" else _json_schema(schema)


def _avro(schema: Any, named: dict[str, Any]) -> Any:
    import pyarrow as pa

    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return getattr(pa, _AVRO_PRIMITIVES[schema])()
        if schema in named:
            return named[schema]
        raise DataSourceOptionError(f"option 'schema': type {schema!r} is neither an Avro primitive nor a type named before")
    if isinstance(schema, list):
        others = [s for s in schema if s != "null"]
        if len(others) == 1:
            return _avro(others[0], named)
        return pa.string()  # a union of several types: its value as JSON text
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "date":
        return pa.date32()
    if logical in ("timestamp-millis", "timestamp-micros"):
        return pa.timestamp("us", tz="UTC")
    if logical == "decimal":
        return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
    if kind == "record":
        fields = []
        struct = None
        for f in schema.get("fields", []):
            fields.append(pa.field(f["name"], _avro(f["type"], named), nullable=True))
        struct = pa.struct(fields)
        named[schema["name"]] = struct
        if schema.get("namespace"):
            named[f"{schema['namespace']}.{schema['name']}"] = struct
        return struct
    if kind == "enum":
        named[schema["name"]] = pa.string()
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    if kind == "array":
        return pa.list_(_avro(schema["items"], named))
    if kind == "map":
        return pa.map_(pa.string(), _avro(schema["values"], named))
    return _avro(kind, named)


def _json_schema(schema: Any) -> Any:
    import pyarrow as pa

    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        kind = others[0] if len(others) == 1 else None
    if kind == "object" and "properties" in schema:
        return pa.struct([pa.field(name, _json_schema(sub), nullable=True) for name, sub in schema["properties"].items()])
    if kind == "array" and isinstance(schema.get("items"), dict):
        return pa.list_(_json_schema(schema["items"]))
    if kind in _JSON_PRIMITIVES:
        return getattr(pa, _JSON_PRIMITIVES[kind])()
    return pa.string()  # anything else: its JSON text


def _fit(value: Any, arrow_type: Any) -> Any:
    """A decoded value as ``arrow_type`` holds it: JSON text where the type is text and the value is not."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_struct(arrow_type):
        if not isinstance(value, dict):
            return None
        return {f.name: _fit(value.get(f.name), f.type) for f in arrow_type}
    if pa.types.is_list(arrow_type) and isinstance(value, list):
        return [_fit(v, arrow_type.value_type) for v in value]
    if pa.types.is_map(arrow_type) and isinstance(value, dict):
        return [(k, _fit(v, arrow_type.item_type)) for k, v in value.items()]
    if pa.types.is_string(arrow_type) and not isinstance(value, str):
        return json.dumps(value, default=json_default, sort_keys=True)
    return value


class BodyDecoder:
    """
    Decodes the bodies of one task's events into ``arrow_type``; one per task (its registry client and schemas live as long).

    :param arrow_type: the ``decoded`` column's type.
    :param fmt: ``"Avro"`` or ``"Json"``: how an event without a schema id is read (JSON text; Avro needs an id).
    :param registry: the Schema Registry of the ids (``None``: none configured).
    :param null_on_error: an undecodable event gives a null and its reason, rather than failing the task.
    """

    def __init__(self, arrow_type: Any, fmt: str, registry: Any, *, null_on_error: bool):
        self.arrow_type = arrow_type
        self.fmt = fmt
        self.null_on_error = null_on_error
        self._decoder = TypedDecoder(registry)

    def decode(self, body: bytes, content_type: str | None, where: Any) -> tuple[Any, str | None]:
        """``(value fitted to the type, None)``, or ``(None, reason)`` with ``null_on_error``; ``where()`` names the event."""
        try:
            if typed_content(content_type) is not None:
                assert content_type is not None
                value = self._decoder.decode(body, content_type)
            elif self.fmt == "Json":
                try:
                    value = json.loads(body)
                except ValueError as exc:
                    raise UndecodableEventError(f"the body is not JSON ({exc})") from None
            else:
                raise UndecodableEventError(f"content type {content_type!r} names no Schema Registry id, and an Avro "
                                            "body cannot be read without its schema id")
        except UndecodableEventError as exc:
            if self.null_on_error:
                return None, str(exc)
            raise UndecodableEventError(f"{where()}: {exc}; give option decodeErrors=null to keep such events with a "
                                        "null 'decoded' and the reason in 'decodeError'") from None
        return _fit(value, self.arrow_type), None

    def column(self, bodies: Sequence[bytes], content_types: Sequence[str | None], partition_id: str,
               sequence_numbers: Sequence[int]) -> tuple[Any, Any]:
        """The ``decoded`` and ``decodeError`` Arrow arrays of one batch of a partition's events."""
        import pyarrow as pa

        def where(seq: int) -> Any:
            return lambda: f"partition {partition_id}, sequence number {seq}"

        pairs = [self.decode(b, c, where(s)) for b, c, s in zip(bodies, content_types, sequence_numbers, strict=True)]
        return (pa.array([p[0] for p in pairs], type=self.arrow_type),
                pa.array([p[1] for p in pairs], type=pa.string()))

    def close(self) -> None:
        self._decoder.close()
