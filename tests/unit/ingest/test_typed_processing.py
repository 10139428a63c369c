"""Typed events in a batch's transaction on a real SQLite database: decoded before sessions and the row function,
kept with their content type while deferred or dead-lettered, decoded again when released or replayed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_eh.client.typed_events import TypedDecoder
from airflow_provider_eh.ingest import (
    BatchProcessor,
    IngestEvent,
    SessionConfig,
    json_rows,
    replay_dead_letters,
)
from tests.support.sql_batches import apply, sqlite_store

ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "t",
                    "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
                               {"name": "step", "type": "int"}]})
SCHEMA_ID = "a" * 32


class Registry:
    def get_schema(self, schema_id: str, **kwargs: Any) -> Any:
        if schema_id != SCHEMA_ID:
            from azure.core.exceptions import ResourceNotFoundError

            raise ResourceNotFoundError("unknown")
        return type("Schema", (), {"definition": ORDER})()

    def get_schema_properties(self, *args: Any, **kwargs: Any) -> Any:
        return type("Props", (), {"id": SCHEMA_ID})()

    def close(self) -> None:
        pass


class Endpoint:
    fully_qualified_namespace = "ns.example"

    def client(self) -> Registry:
        return Registry()


def typed(seq: int, row: dict[str, Any]) -> IngestEvent:
    from azure.schemaregistry.encoder.avroencoder import AvroEncoder

    message = AvroEncoder(client=Registry(), group_name="g").encode(row, schema=ORDER)
    return IngestEvent("0", seq, str(seq), None, message["content"], {}, message["content_type"])


@pytest.fixture
def store(tmp_path):
    with sqlite_store(tmp_path / "sink.db", "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, step INTEGER)") as store:
        yield store


def test_a_session_keyed_by_a_decoded_field_defers_and_releases_typed_events(store) -> None:
    processor = BatchProcessor("orders", json_rows(["id", "customer", "step"]), decoder=TypedDecoder(Endpoint()),
                               sessions=SessionConfig.of("body:customer", "body:step"))
    first = apply(store, processor, [typed(0, {"id": 1, "customer": "c", "step": 1})])
    assert first.deferred == 1 and first.rows == 0  # step 1 waits for step 0, stored with its content type
    second = apply(store, processor, [typed(1, {"id": 2, "customer": "c", "step": 0})], expected=0)
    assert second.rows == 2 and second.released == 1
    assert store.conn.execute("SELECT id, customer, step FROM orders ORDER BY step").fetchall() == [(2, "c", 0), (1, "c", 1)]


def test_a_typed_dead_letter_keeps_its_content_type_and_a_replay_with_a_registry_loads_it(store) -> None:
    event = typed(0, {"id": 5, "customer": "x", "step": 0})
    assert apply(store, BatchProcessor("orders"), [event]).dead_letters == 1  # no registry configured
    (letter,) = store.dead_letters()
    assert letter.reason == "undecodable" and letter.event.content_type == event.content_type
    assert letter.error.startswith(f"event 0 of partition 0: schema id {SCHEMA_ID} (Avro): the event is typed but no "
                                   "Schema Registry is configured; set schema_registry_conn_id")
    result = replay_dead_letters(store, BatchProcessor("orders", decoder=TypedDecoder(Endpoint())))
    assert result == {"replayed": [["0", 0]], "failed": []}
    assert store.conn.execute("SELECT id, customer, step FROM orders").fetchall() == [(5, "x", 0)]


def test_events_without_a_schema_id_never_reach_the_decoder(store) -> None:
    class Refuses(TypedDecoder):
        def decode(self, body: bytes, content_type: str) -> Any:
            raise AssertionError("decoded")

    plain = [IngestEvent("0", 0, "0", None, b'{"id": 1}', {}, "application/json"),
             IngestEvent("0", 1, "1", None, b'{"id": 2}', {})]
    assert apply(store, BatchProcessor("orders", decoder=Refuses(None)), plain).rows == 2
