"""The endpoint's Avro schema checks: parsing, and the specification's resolution rules for compatibility."""

from __future__ import annotations

import json
from typing import Any

import pytest
from eventhubs_local.avro_schema import AvroSchemaError, incompatibilities, parse


def schema(*fields: dict[str, Any], **extra: Any) -> Any:
    return parse(json.dumps({"type": "record", "name": "Order", "namespace": "ns", "fields": list(fields), **extra}))


def f(name: str, kind: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


@pytest.mark.parametrize(("written", "read"), [
    ("int", "long"), ("int", "float"), ("int", "double"), ("long", "double"), ("float", "double"),
    ("string", "bytes"), ("bytes", "string"), ("int", ["null", "int"]), ("long", ["null", "double"]),
])
def test_promotions_and_unions_read_older_data(written: Any, read: Any) -> None:
    assert incompatibilities(schema(f("x", written)), schema(f("x", read))) == []


@pytest.mark.parametrize(("written", "read"), [("long", "int"), ("double", "float"), ("string", "int"),
                                               (["null", "string"], "string"), ("int", ["null", "string"])])
def test_narrowing_or_foreign_types_are_named(written: Any, read: Any) -> None:
    problems = incompatibilities(schema(f("x", written)), schema(f("x", read)))
    assert problems and all("'Order.x'" in p for p in problems)


def test_added_fields_need_defaults_removed_ones_do_not_and_aliases_count() -> None:
    old = schema(f("id", "long"), f("gone", "string"))
    assert incompatibilities(old, schema(f("id", "long"), f("new", "int", default=0))) == []
    assert incompatibilities(old, schema(f("id", "long"), f("new", "int"))) == [
        "field 'Order.new' is added without a default: data written before has no value for it"]
    assert incompatibilities(old, schema(f("id", "long"), f("renamed", "string", aliases=["gone"]))) == []


def test_nested_records_enums_arrays_and_maps() -> None:
    def nested(symbols: list[str], item: str, **enum_extra: Any) -> Any:
        line = {"type": "record", "name": "Line", "fields": [f("sku", item)]}
        return schema(f("lines", {"type": "array", "items": line}),
                      f("tags", {"type": "map", "values": "int"}),
                      f("status", {"type": "enum", "name": "Status", "symbols": symbols, **enum_extra}))
    old = nested(["NEW", "PAID"], "string")
    assert incompatibilities(old, nested(["NEW", "PAID", "SHIPPED"], "bytes")) == []
    problems = incompatibilities(old, nested(["NEW"], "int"))
    assert any("'Order.lines[].sku'" in p for p in problems)
    assert any("'Order.status'" in p and "PAID" in p for p in problems)
    assert incompatibilities(old, nested(["NEW"], "string", default="NEW")) == []


def test_recursive_types_and_bad_definitions() -> None:
    linked = json.dumps({"type": "record", "name": "Node", "fields": [
        f("value", "int"), f("next", ["null", "Node"], default=None)]})
    assert incompatibilities(parse(linked), parse(linked)) == []
    for bad, says in [("{", "not JSON"), ('{"type": "record", "name": "R"}', "'fields' must be a list"),
                      ('{"type": "array"}', "needs 'items'"), ('"Nope"', "unknown type 'Nope'"),
                      ('{"type": "enum", "name": "E", "symbols": [1]}', "'symbols'")]:
        with pytest.raises(AvroSchemaError, match=says):
            parse(bad)
