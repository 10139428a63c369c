"""Where session keys and sequences are read from, the JSON row function, and SQL parameter styles."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from airflow_provider_eh.client.received_fields import ReceivedFields
from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest import FieldRef, IngestEvent, json_rows
from airflow_provider_eh.ingest.rows import load_row_function
from airflow_provider_eh.ingest.sinks.sql.dialects import PostgresDialect, SqliteDialect
from airflow_provider_eh.ingest.sinks.sql.tables import identifier


def ev(body, **props) -> IngestEvent:
    return IngestEvent("1", 7, "70", None, json.dumps(body).encode(), props)


def test_field_refs_read_properties_and_nested_body_fields_and_name_what_is_missing():
    event = ev({"order": {"id": "o-1"}}, session="s-9")
    assert FieldRef.parse("session").get(event) == "s-9"
    assert FieldRef.parse("body:order.id").get(event) == "o-1"
    with pytest.raises(KeyError, match="body field 'order.nope'"):
        FieldRef.parse("body:order.nope").get(event)
    with pytest.raises(SinkConfigError, match="'header:x'"):
        FieldRef.parse("header:x")


def test_json_rows_keeps_listed_columns_and_rejects_non_objects():
    to_row = json_rows(["id", "tags"])
    assert to_row(ev({"id": 1, "tags": ["a"], "extra": 2})) == {"id": 1, "tags": '["a"]'}
    with pytest.raises(ValueError, match="expected an object"):
        to_row(ev([1, 2]))


def test_a_body_reads_as_json_loads_reads_it_whitespace_bom_and_utf16_included():
    bodies = [b'{"a": 1}', b' {"a": 1}\n', b"\xef\xbb\xbf[1]", '{"a": "\u00fc"}'.encode("utf-16"), b'"x"', b"3.5"]
    assert [replace(ev(None), body=b).json() for b in bodies] == [json.loads(b) for b in bodies]
    for bad, error in ((b"1 2", "Extra data"), (b"", "Expecting value"), (b'{"a": }', "Expecting value")):
        with pytest.raises(ValueError, match=error):
            replace(ev(None), body=bad).json()


def test_an_event_built_on_the_receiving_thread_is_the_dataclass_event():
    fields = ReceivedFields(7, "70", None, b'{"a": 1}', {"eh.seq": 3}, "application/json")
    event = IngestEvent.received("1", fields)
    assert event == IngestEvent("1", *fields) and event.decoded is None and event.json() == {"a": 1}
    assert replace(event, decoded={"b": 2}).json() == {"b": 2} and event.producer_sequence_number == 3


def test_row_function_is_loaded_from_a_dotted_path_or_fails_naming_it():
    assert load_row_function("os.path:basename")("/a/b") == "b"
    with pytest.raises(SinkConfigError, match="'nope.mod:f'"):
        load_row_function("nope.mod:f")


def test_statements_are_rewritten_for_format_paramstyle_drivers():
    assert PostgresDialect("psycopg2", "pyformat").sql("SELECT '5%' WHERE a = ? AND b = ?") == "SELECT '5%%' WHERE a = %s AND b = %s"
    assert SqliteDialect("sqlite3", "qmark").sql("a = ?") == "a = ?"
    with pytest.raises(SinkConfigError, match="paramstyle 'numeric' of driver 'x' is not supported"):
        PostgresDialect("x", "numeric").sql("a = ?")


def test_table_and_column_names_must_be_plain_identifiers():
    assert identifier("analytics.orders", "table") == "analytics.orders"
    with pytest.raises(SinkConfigError, match="orders; DROP"):
        identifier("orders; DROP TABLE x", "table")


def test_values_sqlite_has_no_type_for_are_text_in_the_forms_nested_ones_take() -> None:
    import datetime
    import decimal
    import uuid

    from airflow_provider_eh.client.typed_events import json_default
    from airflow_provider_eh.ingest.sinks.sql.values import sqlite_values

    plain = [(1, "a", 2.5, b"\x00", None, True)]
    assert sqlite_values(plain) is plain  # nothing to write otherwise: the rows as they are
    instant = datetime.datetime(2026, 3, 1, 0, 0, 30, 217000, tzinfo=datetime.UTC)
    typed = [(1, decimal.Decimal("12.34"), instant, datetime.date(2026, 3, 1), datetime.time(8, 30),
              uuid.UUID("12345678-1234-5678-1234-567812345678"), b"\x01")]
    (row,) = sqlite_values(typed)
    assert row == (1, "12.34", "2026-03-01T00:00:30.217000+00:00", "2026-03-01", "08:30:00",
                   "12345678-1234-5678-1234-567812345678", b"\x01")
    assert row[1:6] == tuple(json_default(v) for v in typed[0][1:6])  # as a nested field's JSON writes them
