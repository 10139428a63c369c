"""Typed events: ``EventHubPublishOperator`` with a schema, against the local endpoint's Schema Registry.

One endpoint for the module (HTTPS registry with a private CA, ``--require-auth``), Azurite for the
producer state, the operator's ``execute`` as a task runs it. Events read back from the hub decode with
Microsoft's unmodified ``AvroEncoder`` in another process; a bad row fails before anything is sent;
a re-run adds nothing; a re-run under another schema version is refused as changed content.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.errors import BatchContentChangedError
from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook
from eventhubs_local import EmulatorProcess
from tests.conftest import connection_env, unique_name
from tests.support.tls import Certificates
from tests.support.typed_events import (
    connection_extra,
    decode_elsewhere,
    order_schema,
    read_back,
    registry_endpoint,
)

CONN_ID, WASB_ID, GROUP, JSON_GROUP = "eh_typed", "wasb_typed", "orders", "refunds"


def rows(n: int) -> list[dict[str, Any]]:
    """``n`` order rows, keyed by customer."""
    return [{"body": {"order_id": i, "amount": 10 * i, "customer": f"c-{i % 3}"}, "partition_key": f"c-{i % 3}"}
            for i in range(n)]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Certificates]]:
    """The endpoint with its Schema Registry over HTTPS, token auth, the Avro group ``orders`` and the JSON one
    ``refunds``; and its certificates."""
    with registry_endpoint(tmp_path_factory.mktemp("typed"), {GROUP: ("Avro", "None"), JSON_GROUP: ("Json", "None")}) as found:
        yield found


@pytest.fixture(scope="module")
def endpoint(registry: tuple[Any, Certificates]) -> Any:
    """The module's endpoint."""
    return registry[0]


@pytest.fixture
def typed(registry: tuple[Any, Certificates], azurite: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A new hub of 2 partitions, the Event Hubs connection (with the registry) and a state container."""
    endpoint, certificates = registry
    hub = unique_name("typed")
    endpoint.admin.create_hub(hub, partitions=2)
    container = unique_name("c")
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(container)
    monkeypatch.setenv(*connection_env(CONN_ID, "azure_event_hubs", extra=connection_extra(endpoint, certificates, hub)))
    monkeypatch.setenv(*connection_env(WASB_ID, "wasb", extra={"connection_string": azurite.connection_string}))
    return {"hub": hub, "container": container}


def publish(typed: dict[str, str], events: list[Any], *, group: str = "typed", generation: int = 0,
            **schema: Any) -> Any:
    """``EventHubPublishOperator.execute``, as the 2026-05-01 interval's first try runs it."""
    from airflow_provider_eh.operators.publish import EventHubPublishOperator

    operator = EventHubPublishOperator(
        task_id="publish", event_hubs_conn_id=CONN_ID, wasb_conn_id=WASB_ID, state_container=typed["container"],
        producer_group=group, generation=generation, events=events, **{"schema_group": GROUP, **schema})
    start = datetime(2026, 5, 1, tzinfo=UTC)
    context = {"ti": SimpleNamespace(try_number=1, map_index=-1), "data_interval_start": start,
               "data_interval_end": start, "logical_date": start, "run_id": "scheduled__2026-05-01"}
    return operator.execute(context)  # type: ignore[arg-type]


def test_typed_rows_decode_with_microsofts_encoder_and_a_rerun_adds_nothing(
        endpoint: EmulatorProcess, typed: dict[str, str], tmp_path: Path) -> None:
    """Rows against a registered schema: Microsoft's decoder reads them; result and ledger name the schema."""
    schema = order_schema()
    with SchemaRegistryHook(CONN_ID).get_client() as client:
        registered = client.register_schema(GROUP, "com.example.Order", json.dumps(schema), "Avro")
    events = rows(12)
    first = publish(typed, events, schema=schema)
    used = {"group": GROUP, "name": "com.example.Order", "id": registered.id, "version": registered.version,
            "format": "Avro"}
    assert {r["status"] for r in first.values()} == {"published"}
    assert all(r["schema"] == used for r in first.values()) and sum(r["events"] for r in first.values()) == 12

    landed = read_back(endpoint, typed["hub"])
    assert {e.content_type for e in landed} == {f"avro/binary+{registered.id}"}
    decoded = decode_elsewhere(landed, SchemaRegistryHook(CONN_ID).get_endpoint(), tmp_path)
    assert sorted(decoded, key=lambda r: r["order_id"]) == [e["body"] for e in events]

    # the ledger entry records the schema
    from airflow_provider_eh.hooks.producer_state import ProducerStateHook
    from airflow_provider_eh.publishing.document import StateKey

    store = ProducerStateHook("blob", wasb_conn_id=WASB_ID, container=typed["container"]).get_store()
    for pid in first:
        state = store.read(StateKey(EventHubsEndpoint.from_connection_string(
            endpoint.connection_string(typed["hub"]), typed["hub"]).namespace, typed["hub"], "typed", pid))
        assert state is not None and state.ledger.last is not None and state.ledger.last.schema == used

    # the same interval again, by the registered name this time: the same schema, the same bytes, nothing sent
    again = publish(typed, events, schema_name="com.example.Order")
    assert {r["status"] for r in again.values()} == {"already_committed"}
    assert all(r["schema"] == used for r in again.values())
    assert len(read_back(endpoint, typed["hub"])) == 12


def test_a_row_that_does_not_fit_fails_naming_row_field_and_schema_and_nothing_is_sent(
        endpoint: EmulatorProcess, typed: dict[str, str]) -> None:
    """Row 5's amount is text: the task fails naming it and the schema, and the hub stays empty."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    schema = order_schema(name="BadRowOrder")
    with SchemaRegistryHook(CONN_ID).get_client() as client:
        registered = client.register_schema(GROUP, "com.example.BadRowOrder", json.dumps(schema), "Avro")
    events = rows(8)
    events[5] = {**events[5], "body": {**events[5]["body"], "amount": "ten"}}
    with pytest.raises(AirflowFailException) as failed:
        publish(typed, events, schema=schema)
    text = str(failed.value)
    assert "event 5 (partition_key 'c-2')" in text and '"amount"' in text, text
    assert f"schema {GROUP}/com.example.BadRowOrder version 1 (id {registered.id})" in text, text
    assert read_back(endpoint, typed["hub"]) == []


def test_an_unregistered_schema_fails_unless_auto_registered(endpoint: EmulatorProcess, typed: dict[str, str]) -> None:
    """A definition the group does not hold: refused, naming group and schema; registered when asked."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    schema = order_schema(name="NewOrder")
    with pytest.raises(AirflowFailException) as failed:
        publish(typed, rows(3), schema=schema)
    text = str(failed.value)
    assert f"'com.example.NewOrder' (Avro) is not registered in schema group '{GROUP}'" in text, text
    assert "auto_register_schema=True" in text
    assert read_back(endpoint, typed["hub"]) == []
    result = publish(typed, rows(3), schema=schema, auto_register_schema=True)
    assert {r["schema"]["version"] for r in result.values()} == {1}
    assert len(read_back(endpoint, typed["hub"])) == 3


def test_a_rerun_under_a_new_schema_version_is_refused_unless_generation_is_raised(
        endpoint: EmulatorProcess, typed: dict[str, str]) -> None:
    """The fingerprint covers the encoded bytes and the schema id: a new version is changed content."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    v1 = order_schema(name="VersionedOrder")
    # v2: one more field with a default; the rows are the same, their encoding and the schema id are not
    v2 = order_schema({"name": "channel", "type": "string", "default": "web"}, name="VersionedOrder")
    events = rows(6)
    first = publish(typed, events, schema=v1, auto_register_schema=True)
    with pytest.raises(AirflowFailException) as refused:
        publish(typed, [{**e, "body": {**e["body"], "channel": "web"}} for e in events], schema=v2,
                auto_register_schema=True)
    assert isinstance(refused.value.__cause__, BatchContentChangedError), repr(refused.value.__cause__)
    assert "generation" in str(refused.value), str(refused.value)
    assert len(read_back(endpoint, typed["hub"])) == 6
    raised = publish(typed, [{**e, "body": {**e["body"], "channel": "web"}} for e in events], schema=v2,
                     generation=1)
    assert {r["schema"]["version"] for r in raised.values()} == {2}
    assert {r["schema"]["version"] for r in first.values()} == {1}
    landed = read_back(endpoint, typed["hub"])
    assert len(landed) == 12 and len({e.content_type for e in landed}) == 2


def test_avro_encoding_is_byte_identical_for_the_same_row_and_schema(typed: dict[str, str]) -> None:
    """What a re-run's fingerprint relies on: ``AvroEncoder`` gives the same bytes for the same row and schema."""
    from azure.schemaregistry.encoder.avroencoder import AvroEncoder

    schema = json.dumps(order_schema(name="StableOrder"))
    row = {"order_id": 2**40, "amount": -7, "customer": "ü-17"}
    with SchemaRegistryHook(CONN_ID).get_client() as client:
        encoded = {AvroEncoder(client=client, group_name=GROUP, auto_register=True).encode(dict(row), schema=schema)[
            "content"] for _ in range(3)}
    assert len(encoded) == 1


def test_json_schema_rows_carry_the_schema_id_and_a_bad_one_names_the_field(
        endpoint: EmulatorProcess, typed: dict[str, str]) -> None:
    """``schema_format="Json"``: Microsoft's JSON Schema encoder validates and encodes; its decoder reads the events."""
    from azure.schemaregistry.encoder.jsonencoder import JsonSchemaEncoder

    from airflow.providers.common.compat.sdk import AirflowFailException

    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Refund", "type": "object",
              "properties": {"refund_id": {"type": "string"}, "cents": {"type": "integer"}},
              "required": ["refund_id", "cents"]}
    bad = [{"body": {"refund_id": "r-0", "cents": "ten"}, "partition_id": "0"}]
    with pytest.raises(AirflowFailException) as failed:
        publish(typed, bad, schema_group=JSON_GROUP, schema=schema, schema_format="Json", auto_register_schema=True)
    assert "event 0 does not fit schema refunds/Refund version 1" in str(failed.value), str(failed.value)
    assert "field $.cents" in str(failed.value), str(failed.value)
    assert read_back(endpoint, typed["hub"]) == []

    events = [{"body": {"refund_id": f"r-{i}", "cents": i}, "partition_id": str(i % 2)} for i in range(4)]
    result = publish(typed, events, schema_group=JSON_GROUP, schema=schema, schema_format="Json")
    schema_id = result["0"]["schema"]["id"]
    landed = read_back(endpoint, typed["hub"])
    assert {e.content_type for e in landed} == {f"application/json;serialization=Json+{schema_id}"}
    with SchemaRegistryHook(CONN_ID).get_client() as client:
        decoder = JsonSchemaEncoder(client=client, validate=schema["$schema"])
        decoded = [decoder.decode({"content": b"".join(e.body), "content_type": e.content_type}) for e in landed]
    assert sorted(decoded, key=lambda r: r["cents"]) == [e["body"] for e in events]


def test_an_incompatible_schema_fails_before_anything_is_registered_or_sent(
        endpoint: EmulatorProcess, typed: dict[str, str]) -> None:
    """``schema_compatibility="Full"``: amount turned from int to string is refused, naming the field and the
    version, before the new version is registered or an event sent; a compatible version publishes."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    v1 = order_schema(name="CheckedOrder")
    with SchemaRegistryHook(CONN_ID).get_client() as client:
        client.register_schema(GROUP, "com.example.CheckedOrder", json.dumps(v1), "Avro")
    changed = {**v1, "fields": [*v1["fields"][:1], {"name": "amount", "type": "string"}, *v1["fields"][2:]]}
    events = [{**e, "body": {**e["body"], "amount": str(e["body"]["amount"])}} for e in rows(4)]
    with pytest.raises(AirflowFailException) as refused:
        publish(typed, events, schema=changed, auto_register_schema=True, schema_compatibility="Full")
    text = str(refused.value)
    assert "schema orders/com.example.CheckedOrder: the definition given is not full compatible with the latest " \
           "registered version 1" in text, text
    assert "field 'amount': int in version 1 cannot be read as string in this schema" in text, text
    assert "field 'amount': string in this schema cannot be read as int in version 1" in text, text
    assert SchemaRegistryHook(CONN_ID).get_endpoint().schema_versions(GROUP, "com.example.CheckedOrder") == [1]
    assert read_back(endpoint, typed["hub"]) == []

    widened = {**v1, "fields": [*v1["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}
    result = publish(typed, rows(4), schema=widened, auto_register_schema=True, schema_compatibility="Full")
    assert {r["schema"]["version"] for r in result.values()} == {2}
    assert len(read_back(endpoint, typed["hub"])) == 4
