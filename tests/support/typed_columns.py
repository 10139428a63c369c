"""Every Avro and JSON Schema type, as a producer gives it to Microsoft's encoders, and as each sink reads it back.

``EVERYTHING`` is an Avro record with a field of each type the sinks map (primitives, decimals on bytes and fixed,
uuid, date, times, timestamps, local timestamps, duration, enum, fixed, a union with null, a union of two types,
arrays, a map and nested records holding logical types). ``avro_row(n)`` is the n-th row as a producer passes it
to ``AvroEncoder`` (a local timestamp as the ``long`` the ``avro`` package takes, a duration as its 12 bytes).
``expected(sink, n)`` is what the sink's own client reads back of it, column by column.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import hashlib
import json
import uuid
from typing import Any

from airflow_provider_eh.ingest import IngestEvent, Stream

UTC = datetime.UTC

EVERYTHING: dict[str, Any] = {"type": "record", "name": "Everything", "namespace": "com.example", "fields": [
    {"name": "id", "type": "long"},
    {"name": "flag", "type": "boolean"},
    {"name": "small", "type": "int"},
    {"name": "ratio", "type": "float"},
    {"name": "score", "type": "double"},
    {"name": "label", "type": "string"},
    {"name": "raw", "type": "bytes"},
    {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 4}},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "amount", "type": {"type": "fixed", "name": "Amount", "size": 8, "logicalType": "decimal",
                                "precision": 12, "scale": 3}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "clock_ms", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "clock_us", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "local_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "span", "type": {"type": "fixed", "name": "Span", "size": 12, "logicalType": "duration"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "either", "type": ["int", "string"]},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "counts", "type": {"type": "map", "values": "long"}},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
        {"name": "street", "type": "string"},
        {"name": "since", "type": {"type": "int", "logicalType": "date"}},
        {"name": "deposit", "type": {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}}]}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
]}
COLUMNS = [f["name"] for f in EVERYTHING["fields"]]


def decoded_row(n: int) -> dict[str, Any]:
    """The n-th row as the sinks get it decoded (local timestamps as naive ``datetime``, the duration in parts)."""
    return {
        "id": n, "flag": n % 2 == 0, "small": -n, "ratio": 1.5 * n, "score": n / 3, "label": f"ü-{n}",
        "raw": bytes([n, 0, 255]), "code": b"C%03d" % n, "color": "GREEN" if n % 2 else "RED",
        "price": decimal.Decimal(f"{n}.{n:02d}"), "amount": decimal.Decimal(f"-{n}234.567"),
        "ref": uuid.UUID(f"12345678-1234-5678-1234-5678123456{n:02d}"), "day": datetime.date(2026, 3, n),
        "clock_ms": datetime.time(8, 30, n, 123000), "clock_us": datetime.time(8, 30, n, 123456),
        "ts_ms": datetime.datetime(2026, 3, 1, 0, 0, n, 217000, tzinfo=UTC),
        "ts_us": datetime.datetime(2026, 3, 1, 0, 0, n, 217123, tzinfo=UTC),
        "local_ms": datetime.datetime(2026, 3, 1, 9, 0, n, 5000), "local_us": datetime.datetime(2026, 3, 1, 9, 0, n, 5123),
        "span": (n, 2, 3003), "note": None if n % 2 else f"note {n}", "either": n if n % 2 else f"s{n}",
        "tags": ["a", f"t{n}"], "counts": {"x": n, "y": -1},
        "address": {"street": f"Main {n}", "since": datetime.date(2020, 1, n), "deposit": decimal.Decimal("99.50")},
        "lines": [{"sku": f"k{n}", "qty": n}, {"sku": "z", "qty": 0}],
    }


def _micros(moment: datetime.datetime, unit: int) -> int:
    return (moment - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=unit)


def avro_row(n: int) -> dict[str, Any]:
    """The n-th row as a producer gives it to ``AvroEncoder``."""
    row = decoded_row(n)
    months, days, millis = row["span"]
    return {**row, "ref": str(row["ref"]), "local_ms": _micros(row["local_ms"], 1000), "local_us": _micros(row["local_us"], 1),
            "span": b"".join(v.to_bytes(4, "little") for v in (months, days, millis))}


def _json(value: Any) -> Any:
    """As the sinks' JSON holds a nested value (dates, decimals as text)."""
    return json.loads(json.dumps(value, default=lambda v: v.isoformat() if hasattr(v, "isoformat") else str(v)))


def expected(sink: str, n: int) -> dict[str, Any]:
    """What ``sink`` (``sqlite``, ``postgres``, ``mysql``, ``delta``) reads back of row ``n``, by column, with the
    database's own client (JSON columns parsed)."""
    row = decoded_row(n)
    months, days, millis = row["span"]
    iso_span = f"P{months}M{days}DT{millis // 1000}.{millis % 1000:03d}S"
    nested = {c: _json(row[c]) for c in ("tags", "counts", "address", "lines")}
    if sink == "sqlite":
        text = {c: row[c].isoformat() for c in ("day", "clock_ms", "clock_us", "ts_ms", "ts_us", "local_ms", "local_us")}
        return {**row, **text, **nested, "flag": int(row["flag"]), "price": str(row["price"]), "amount": str(row["amount"]),
                "ref": str(row["ref"]), "span": iso_span, "either": row["either"]}
    if sink == "postgres":
        return {**row, **nested, "ref": str(row["ref"]), "span": datetime.timedelta(days=months * 30 + days, milliseconds=millis)}
    if sink == "mysql":
        def clock(t: datetime.time) -> datetime.timedelta:
            return datetime.timedelta(hours=t.hour, minutes=t.minute, seconds=t.second, microseconds=t.microsecond)
        return {**row, **nested, "flag": int(row["flag"]), "ref": str(row["ref"]), "span": iso_span,
                "clock_ms": clock(row["clock_ms"]), "clock_us": clock(row["clock_us"]),
                "ts_ms": row["ts_ms"].replace(tzinfo=None), "ts_us": row["ts_us"].replace(tzinfo=None)}
    assert sink == "delta"
    return {**row, "ref": str(row["ref"]), "clock_ms": row["clock_ms"].isoformat(), "clock_us": row["clock_us"].isoformat(),
            "local_ms": row["local_ms"].isoformat(), "local_us": row["local_us"].isoformat(),
            "span": {"months": months, "days": days, "milliseconds": millis},
            "either": json.dumps(row["either"]) if not isinstance(row["either"], str) else row["either"],
            "counts": sorted(row["counts"].items())}


def read_back(sink: str, value: Any, column: str) -> Any:
    """A value as the client read it, in the terms of :func:`expected` (bytes of a ``memoryview``, JSON parsed)."""
    if isinstance(value, memoryview):
        return bytes(value)
    if column in ("tags", "counts", "address", "lines", "either") and isinstance(value, str) and sink in ("sqlite", "mysql"):
        return json.loads(value)
    if sink == "delta" and column == "counts":
        return sorted(value)
    return value


def tagged(value: Any) -> Any:
    """``value`` as JSON for ``tests/integration/ingest/typed_producer.py``: its decimals, instants, dates, times and
    bytes tagged (``{"$decimal": "12.34"}``), so the producer gives the encoder the same Python values."""
    import base64

    if isinstance(value, dict):
        return {k: tagged(v) for k, v in value.items()}
    if isinstance(value, list):
        return [tagged(v) for v in value]
    for kind, tag in ((decimal.Decimal, "$decimal"), (datetime.datetime, "$datetime"), (datetime.date, "$date"),
                      (datetime.time, "$time")):
        if isinstance(value, kind):
            return {tag: str(value) if kind is decimal.Decimal else value.isoformat()}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode()}
    return value


# ---- encoding events in one process: a registry of schemas by id, and events as ingestion receives them ----

STREAM = Stream("ns.local", "hub", "$Default")


class Registry:
    """A Schema Registry client of one process: schemas by id, the id a hash of the definition."""

    def __init__(self) -> None:
        self.schemas: dict[str, str] = {}

    def register_schema(self, group: str, name: str, definition: str, fmt: str, **kwargs: Any) -> Any:
        schema_id = hashlib.sha256(definition.encode()).hexdigest()[:32]
        self.schemas[schema_id] = definition
        return type("Props", (), {"id": schema_id, "format": fmt})()

    get_schema_properties = register_schema

    def get_schema(self, schema_id: str, **kwargs: Any) -> Any:
        return type("Schema", (), {"definition": self.schemas[schema_id]})()

    def close(self) -> None:
        pass


class AsyncRegistry(Registry):
    """The same registry answering the async decoder: the same schemas by id."""

    async def get_schema(self, schema_id: str, **kwargs: Any) -> Any:  # type: ignore[override]
        return super().get_schema(schema_id)

    async def close(self) -> None:  # type: ignore[override]
        pass


class Endpoint:
    """What a decoder asks of an endpoint: its namespace and a registry client (sync or async, the one given)."""

    fully_qualified_namespace = "ns.local"

    def __init__(self, registry: Registry):
        self.registry = registry

    def client(self) -> Registry:
        return self.registry

    def async_client(self) -> Registry:
        return self.registry


def encoded(registry: Registry, seq: int, row: dict[str, Any], schema: dict[str, Any] = EVERYTHING) -> IngestEvent:
    from azure.schemaregistry.encoder.avroencoder import AvroEncoder

    message = AvroEncoder(client=registry, group_name="g", auto_register=True).encode(row, schema=json.dumps(schema))
    return IngestEvent("0", seq, str(seq), None, message["content"], {}, message["content_type"])


def with_field(field: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(EVERYTHING)
    schema["fields"].append(field)
    return schema
