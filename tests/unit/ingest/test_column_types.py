"""Every Avro type, encoded by Microsoft's ``AvroEncoder``, lands as its own column type on SQLite and a local Delta
table: the table created from the schema the events carry, a field the schema gains added as a column, a change
that cannot be applied named, and a value the sink cannot hold dead-lettered alone. (An in-process registry; the
hub, Postgres and MariaDB are in ``tests/integration/ingest/test_typed_columns.py``.)"""

from __future__ import annotations

import copy
import json
import sqlite3
from typing import Any

import pytest

from airflow_provider_eh.client.typed_events import TypedDecoder
from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest import BatchProcessor, IngestEvent, SqlIngestStore, json_rows
from tests.support.typed_columns import (
    COLUMNS,
    EVERYTHING,
    STREAM,
    Endpoint,
    Registry,
    avro_row,
    encoded,
    expected,
    read_back,
    with_field,
)


def sql_rows(db: Any, table: str = "everything") -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        cursor = conn.execute(f"SELECT * FROM {table} ORDER BY id")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def test_every_avro_type_lands_in_a_sqlite_table_created_from_the_schema_and_a_new_field_adds_a_column(tmp_path) -> None:
    registry = Registry()
    db = tmp_path / "sink.db"
    store = SqlIngestStore(sqlite3.connect(db), STREAM)
    processor = BatchProcessor("everything", json_rows(), decoder=TypedDecoder(Endpoint(registry)))
    with store.transaction() as tx:
        result = processor.process(tx, "0", [encoded(registry, n, avro_row(n)) for n in (1, 2)])
    assert (result.rows, result.dead_letters) == (2, 0)
    with sqlite3.connect(db) as conn:
        declared = {r[1]: r[2] for r in conn.execute("PRAGMA table_info(everything)")}
    assert declared["price"] == "TEXT" and declared["raw"] == "BLOB" and declared["id"] == "INTEGER"
    for n, row in zip((1, 2), sql_rows(db), strict=True):
        want = expected("sqlite", n)
        assert {c: read_back("sqlite", row[c], c) for c in COLUMNS} == {c: want[c] for c in COLUMNS}

    # a new version of the schema gains a field: its column is added, the old rows have it NULL
    newer = with_field({"name": "rating", "type": ["null", "double"], "default": None})
    with store.transaction() as tx:
        processor.process(tx, "0", [encoded(registry, 3, {**avro_row(3), "rating": 4.5}, newer)])
    assert [r["rating"] for r in sql_rows(db)] == [None, None, 4.5]

    # without evolving, a field the table lacks is an error naming it, the column to add and the option
    store.evolve_columns = False
    store.columns.clear()
    newest = with_field({"name": "extra", "type": "long"})
    with pytest.raises(SinkConfigError, match=r"field 'extra' \(long\).*ALTER TABLE everything ADD COLUMN extra INTEGER.*"
                                              r"evolve_columns=True"):
        with store.transaction() as tx:
            processor.process(tx, "0", [encoded(registry, 4, {**avro_row(4), "extra": 1}, newest)])
    store.close()


def test_a_value_the_sink_cannot_hold_is_a_dead_letter_naming_partition_sequence_field_and_type(tmp_path) -> None:
    db = tmp_path / "sink.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INTEGER, thing TEXT)")
    store = SqlIngestStore(sqlite3.connect(db), STREAM)

    def rows(event: IngestEvent) -> dict[str, Any]:
        body = json.loads(event.body)
        return {"id": body["id"], "thing": {1, 2} if body["id"] == 2 else "fine"}

    processor = BatchProcessor("t", rows)
    events = [IngestEvent("3", n, str(n), None, json.dumps({"id": n}).encode()) for n in (1, 2, 3)]
    with store.transaction() as tx:
        result = processor.process(tx, "3", events)
    assert (result.rows, result.dead_letters) == (2, 1)
    [letter] = store.dead_letters()
    assert letter.reason == "row_rejected" and letter.event.sequence_number == 2
    assert letter.error.startswith("event 2 of partition 3: table 't' cannot hold field 'thing' (set)"), letter.error
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT id, thing FROM t ORDER BY id").fetchall() == [(1, "fine"), (3, "fine")]
    store.close()


def test_a_field_whose_new_type_its_sqlite_column_cannot_hold_is_an_error_before_anything_is_written(tmp_path) -> None:
    registry = Registry()
    db = tmp_path / "sink.db"
    store = SqlIngestStore(sqlite3.connect(db), STREAM)
    processor = BatchProcessor("everything", json_rows(), decoder=TypedDecoder(Endpoint(registry)))
    with store.transaction() as tx:
        processor.process(tx, "0", [encoded(registry, 1, avro_row(1))])
    changed = copy.deepcopy(EVERYTHING)
    changed["fields"][2] = {"name": "small", "type": "string"}  # was an int: its column is INTEGER
    changed["fields"].append({"name": "rating", "type": ["null", "double"], "default": None})  # not added either
    newer = [encoded(registry, 2, avro_row(2)), encoded(registry, 3, {**avro_row(3), "small": "x", "rating": 1.0}, changed)]
    for batch in (newer[1:], newer):  # the new version alone, and after an event of the old one in its batch
        store.columns.clear()
        with pytest.raises(SinkConfigError, match=r"Table 'everything': the schema of the events has field 'small' as string "
                                                  r"and its column is INTEGER, which cannot hold it; copy the table .* small is "
                                                  r"TEXT .*Nothing of the batch was written"):
            with store.transaction() as tx:
                processor.process(tx, "0", batch)
    assert [r["id"] for r in sql_rows(db)] == [1] and "rating" not in sql_rows(db)[0]
    assert store.dead_letters() == []
    # a change the column holds (an int becoming a long, a field made optional) is no error
    wider = copy.deepcopy(EVERYTHING)
    wider["fields"][2] = {"name": "small", "type": ["null", "long"], "default": None}
    with store.transaction() as tx:
        assert processor.process(tx, "0", [encoded(registry, 4, {**avro_row(4), "small": 2**40}, wider)]).rows == 1
    assert [(r["id"], r["small"]) for r in sql_rows(db)] == [(1, -1), (4, 2**40)]
    store.close()


def test_a_value_its_column_refused_is_loaded_by_replay_once_the_column_holds_it(tmp_path) -> None:
    from airflow_provider_eh.ingest import replay_dead_letters

    registry = Registry()
    db = tmp_path / "sink.db"
    with sqlite3.connect(db) as conn:  # a STRICT table whose ref column was declared BLOB by mistake
        conn.execute("CREATE TABLE readings (id INTEGER, ref BLOB, label TEXT) STRICT")
    reading = {"type": "record", "name": "Reading", "fields": [
        {"name": "id", "type": "long"}, {"name": "ref", "type": ["null", {"type": "string", "logicalType": "uuid"}]},
        {"name": "label", "type": "string"}]}
    ref = "12345678-1234-5678-1234-567812345678"
    events = [encoded(registry, n, {"id": n, "ref": ref if n == 2 else None, "label": f"r{n}"}, reading) for n in (1, 2, 3)]
    store = SqlIngestStore(sqlite3.connect(db), STREAM)
    processor = BatchProcessor("readings", json_rows(), decoder=TypedDecoder(Endpoint(registry)))
    with store.transaction() as tx:
        assert processor.process(tx, "0", events).rows == 2
    [letter] = store.dead_letters()
    assert letter.reason == "row_rejected" and letter.event.sequence_number == 2
    assert "event 2 of partition 0: table 'readings'" in letter.error
    assert "cannot store TEXT value in BLOB column readings.ref" in letter.error, letter.error
    store.close()

    with sqlite3.connect(db) as conn:  # the fix: SQLite changes a column's type by copying the table
        conn.executescript("ALTER TABLE readings RENAME TO readings_old; "
                           "CREATE TABLE readings (id INTEGER, ref TEXT, label TEXT) STRICT; "
                           "INSERT INTO readings SELECT * FROM readings_old; DROP TABLE readings_old;")
    store = SqlIngestStore(sqlite3.connect(db), STREAM)
    replay = BatchProcessor("readings", json_rows(), decoder=TypedDecoder(Endpoint(registry)))
    assert replay_dead_letters(store, replay) == {"replayed": [["0", 2]], "failed": []}
    assert [(r["id"], r["ref"], r["label"]) for r in sql_rows(db, "readings")] == [
        (1, None, "r1"), (2, ref, "r2"), (3, None, "r3")]
    assert store.dead_letters(status="dead") == [] and len(store.dead_letters(status="replayed")) == 1
    store.close()
