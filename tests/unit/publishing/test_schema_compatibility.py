"""Compatibility before publishing: Avro's schema-resolution rules and the JSON Schema subset, as pure logic.

Each Avro case's verdict is also Apache Avro's own checker's (``avro.compatibility``), so the rules
agree with the library Microsoft's encoder uses; our messages name the field and the versions.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_eh.publishing.compatibility import avro_incompatibilities, incompatibilities, json_incompatibilities


def record(*fields: dict[str, Any], name: str = "Order") -> str:
    """An Avro record ``com.example.<name>`` of ``fields``, as JSON text."""
    return json.dumps({"type": "record", "name": name, "namespace": "com.example", "fields": list(fields)})


ID = {"name": "id", "type": "long"}
AMOUNT = {"name": "amount", "type": "int"}
LINE_SKU_STRING = json.loads(record({"name": "sku", "type": "string"}, name="Line"))
LINE_SKU_INT = json.loads(record({"name": "sku", "type": "int"}, name="Line"))


def apache_verdict(writer: str, reader: str) -> bool:
    """Apache Avro's checker: can ``reader`` read what ``writer`` wrote?"""
    import avro.schema
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    result = ReaderWriterCompatibilityChecker().get_compatibility(avro.schema.parse(reader), avro.schema.parse(writer))
    return result.compatibility is SchemaCompatibilityType.compatible


AVRO_CASES = [
    # (writer, reader, problem expected in our message, or None when readable)
    (record(ID), record(ID, {"name": "note", "type": ["null", "string"], "default": None}), None),
    (record(ID), record(ID, {"name": "channel", "type": "string"}), "field 'channel' is in R without a default and not in W"),
    (record(ID, AMOUNT), record(ID), None),  # a field the reader lacks is skipped
    (record(ID, AMOUNT), record(ID, {"name": "amount", "type": "long"}), None),  # int -> long: a promotion
    (record(ID, AMOUNT), record(ID, {"name": "amount", "type": "double"}), None),
    (record(ID, {"name": "amount", "type": "long"}), record(ID, AMOUNT), "field 'amount': long in W cannot be read as int in R"),
    (record(ID, AMOUNT), record(ID, {"name": "amount", "type": "string"}),
     "field 'amount': int in W cannot be read as string in R"),
    (record(ID, {"name": "s", "type": "string"}), record(ID, {"name": "s", "type": "bytes"}), None),
    (record(ID, AMOUNT), record(ID, {"name": "amount", "type": ["null", "long"], "default": None}), None),
    (record(ID, {"name": "amount", "type": ["null", "int"]}), record(ID, AMOUNT),
     "field 'amount': null in W cannot be read as int in R"),
    (record(ID, {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}}),
     record(ID, {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A"]}}),
     "field 'kind': enum symbol(s) B of W are not in R, which has no default symbol"),
    (record(ID, {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}}),
     record(ID, {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A"], "default": "A"}}), None),
    (record(ID, {"name": "h", "type": {"type": "fixed", "name": "H", "size": 16}}),
     record(ID, {"name": "h", "type": {"type": "fixed", "name": "H", "size": 32}}), "field 'h': fixed size 16 in W, 32 in R"),
    (record(ID, {"name": "lines", "type": {"type": "array", "items": LINE_SKU_STRING}}),
     record(ID, {"name": "lines", "type": {"type": "array", "items": LINE_SKU_INT}}),
     "field 'lines[].sku': string in W cannot be read as int in R"),
    (record(ID, {"name": "tags", "type": {"type": "map", "values": "int"}}),
     record(ID, {"name": "tags", "type": {"type": "map", "values": "long"}}), None),
    (record(ID, {"name": "customer_id", "type": "long"}),
     record(ID, {"name": "customer", "type": "long", "aliases": ["customer_id"]}), None),  # renamed, with an alias
    (json.dumps({"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"},
                                                             {"name": "next", "type": ["null", "Node"]}]}),
     json.dumps({"type": "record", "name": "Node", "fields": [{"name": "v", "type": "long"},
                                                             {"name": "next", "type": ["null", "Node"]}]}), None),
    (json.dumps({"type": "record", "name": "Node", "fields": [{"name": "v", "type": "long"},
                                                             {"name": "next", "type": ["null", "Node"]}]}),
     json.dumps({"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"},
                                                             {"name": "next", "type": ["null", "Node"]}]}),
     "field 'v': long in W cannot be read as int in R"),  # a recursive record
    (record(ID), record(ID, name="Refund"), "the schema: record com.example.Order in W cannot be read as record "
                                            "com.example.Refund in R (another name)"),
]


@pytest.mark.parametrize(("writer", "reader", "problem"), AVRO_CASES)
def test_avro_resolution_names_the_field_and_agrees_with_apache_avro(writer: str, reader: str, problem: str | None) -> None:
    """Each case: our problems name the field (or there are none), and Apache Avro's verdict is the same."""
    problems = avro_incompatibilities(writer, reader, writer_label="W", reader_label="R")
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems
    assert apache_verdict(writer, reader) is (problem is None)


def test_each_mode_reads_in_its_direction_and_full_is_both() -> None:
    """Backward: the new schema reads the latest's data; Forward: the latest reads the new one's; Full: both."""
    latest = record(ID, AMOUNT)
    added = record(ID, AMOUNT, {"name": "channel", "type": "string"})  # a field more, no default
    removed = record(ID)  # amount dropped; the latest version has no default for it
    assert incompatibilities("Avro", "None", latest, added) == []
    assert incompatibilities("Avro", "Backward", latest, added, latest_label="version 3") == [
        "field 'channel' is in this schema without a default and not in version 3: data written with version 3 has "
        "no value for it"]
    assert incompatibilities("Avro", "Forward", latest, added) == []  # the latest version skips channel
    assert incompatibilities("Avro", "Backward", latest, removed) == []
    assert incompatibilities("Avro", "Forward", latest, removed, latest_label="version 3") == [
        "field 'amount' is in version 3 without a default and not in this schema: data written with this schema has "
        "no value for it"]
    full = incompatibilities("Avro", "Full", latest, record(ID, {"name": "channel", "type": "string"}))
    assert len(full) == 2 and "'channel'" in full[0] and "'amount'" in full[1]
    with pytest.raises(ValueError, match="compatibility mode 'Sideways'"):
        incompatibilities("Avro", "Sideways", latest, added)


def obj(properties: dict[str, Any], required: tuple[str, ...] = (), **more: Any) -> str:
    """A JSON Schema object of ``properties``, ``required`` and ``more`` keywords, as JSON text."""
    return json.dumps({"type": "object", "properties": properties, "required": list(required), **more})


JSON_CASES = [
    (obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}, "b": {"type": "integer"}}), None),
    (obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}, "b": {"type": "integer"}}, ("b",)),
     "property 'b' is required by R but not by W"),
    (obj({"a": {"type": "string"}}, ["a"]), obj({"a": {"type": "string"}}), None),
    (obj({"n": {"type": "integer"}}), obj({"n": {"type": "number"}}), None),  # integer is within number
    (obj({"n": {"type": "number"}}), obj({"n": {"type": "integer"}}),
     "property 'n': number in W is not accepted by R, which takes integer"),
    (obj({"n": {"type": ["string", "null"]}}), obj({"n": {"type": "string"}}),
     "property 'n': null/string in W is not accepted by R, which takes string"),
    (obj({"k": {"enum": ["A", "B"]}}), obj({"k": {"enum": ["A"]}}), "property 'k': value(s) ['B'] of W are not allowed by R"),
    (obj({"a": {"type": "string"}, "b": {"type": "string"}}), obj({"a": {"type": "string"}}, additionalProperties=False),
     "property 'b' is in W but not in R, which allows no additional properties"),
    (obj({"o": {"type": "object", "properties": {"x": {"type": "string"}}}}),
     obj({"o": {"type": "object", "properties": {"x": {"type": "boolean"}}}}),
     "property 'o.x': string in W is not accepted by R, which takes boolean"),
    (obj({"l": {"type": "array", "items": {"type": "string"}}}), obj({"l": {"type": "array", "items": {"type": "integer"}}}),
     "property 'l[]': string in W is not accepted by R, which takes integer"),
]


@pytest.mark.parametrize(("writer", "reader", "problem"), JSON_CASES)
def test_json_schema_subset_names_the_property(writer: str, reader: str, problem: str | None) -> None:
    """Each case: an instance valid under W stays valid under R, or the problem names the property."""
    problems = json_incompatibilities(writer, reader, writer_label="W", reader_label="R")
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


def test_json_modes_use_the_same_directions() -> None:
    """A property made required breaks Backward (old data lacks it), not Forward."""
    latest = obj({"a": {"type": "string"}})
    required = obj({"a": {"type": "string"}, "b": {"type": "integer"}}, ("b",))
    assert incompatibilities("Json", "Backward", latest, required) == [
        "property 'b' is required by this schema but not by the latest version"]
    assert incompatibilities("Json", "Forward", latest, required) == []
