"""Typed events from Spark: ``SparkToEventHubOperator`` with a schema, executors on ``local[2]`` encoding each
row with Microsoft's encoder against the schema the driver resolved once in the local endpoint's registry.

The events read back are byte for byte what Microsoft's ``AvroEncoder`` gives with a registry client, and
decode with it in another process; a re-run sends nothing, a new schema version is changed content; a
bad row and an incompatible schema fail before anything is claimed or sent (the hub read back).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.errors import BatchContentChangedError
from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook
from tests.conftest import connection_env, unique_name
from tests.support.tls import Certificates
from tests.support.typed_events import connection_extra, decode_elsewhere, order_schema, read_back, registry_endpoint

CONN_ID, WASB_ID, GROUP, JSON_GROUP = "eh_spark_typed", "wasb_spark_typed", "orders", "refunds"
PARTITIONS = ("0", "1")


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Certificates]]:
    """The endpoint with its Schema Registry (HTTPS, token auth), an Avro and a JSON Schema group."""
    with registry_endpoint(tmp_path_factory.mktemp("spark-typed"), {GROUP: ("Avro", "None"),
                                                                      JSON_GROUP: ("Json", "None")}) as found:
        yield found


@pytest.fixture
def typed(registry: tuple[Any, Certificates], azurite: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A new hub of 2 partitions, its connection (with the registry), a state container."""
    endpoint, certificates = registry
    hub = unique_name("spark-typed")
    endpoint.admin.create_hub(hub, partitions=len(PARTITIONS))
    container = unique_name("c")
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(container)
    monkeypatch.setenv(*connection_env(CONN_ID, "azure_event_hubs", extra=connection_extra(endpoint, certificates, hub)))
    monkeypatch.setenv(*connection_env(WASB_ID, "wasb", extra={"connection_string": azurite.connection_string}))
    return {"endpoint": endpoint, "hub": hub, "container": container, "blob": azurite.connection_string}


def write_output(spark: Any, path: Path, rows: int, *, null_amount_at: int | None = None) -> str:
    """The upstream job's output: ``rows`` orders (order id, amount, customer, and a region the schemas do not
    name), one amount null if asked."""
    amount = "cast(id * 10 as int)" if null_amount_at is None else \
        f"case when id = {null_amount_at} then null else cast(id * 10 as int) end"
    spark.range(rows).selectExpr("id as order_id", f"{amount} as amount",
                                 "concat('c-', cast(id % 3 as string)) as customer", "cast(id % 7 as int) as region") \
        .repartition(3) \
        .write.mode("overwrite").parquet(str(path))
    return str(path)


def publish(typed: dict[str, Any], path: str, *, generation: int = 0, **schema: Any) -> Any:
    """``SparkToEventHubOperator.execute`` for the 2026-05-01 interval, with the test process's Spark session."""
    from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator

    operator = SparkToEventHubOperator(
        task_id="publish", path=path, key_column="customer", order_by=["order_id"], event_hubs_conn_id=CONN_ID,
        wasb_conn_id=WASB_ID, state_container=typed["container"], producer_group="spark-typed", generation=generation,
        claim_timeout=0, **{"schema_group": GROUP, **schema})
    start = datetime(2026, 5, 1, tzinfo=UTC)
    context = {"ti": SimpleNamespace(try_number=1, map_index=-1), "data_interval_start": start,
               "data_interval_end": start, "logical_date": start, "run_id": "scheduled__2026-05-01"}
    return operator.execute(context)  # type: ignore[arg-type]


def rows_of(spark: Any, path: str) -> list[dict[str, Any]]:
    """The output's rows as the schemas see them (without the region), by order id."""
    rows = spark.read.parquet(path).select("order_id", "amount", "customer").collect()
    return sorted((r.asDict() for r in rows), key=lambda r: r["order_id"])


def test_spark_rows_are_microsofts_avro_bytes_and_reruns_follow_the_schema_version(
        spark: Any, typed: dict[str, Any], tmp_path: Path) -> None:
    """40 rows against a registered schema: Microsoft's bytes, decoded elsewhere, the schema in result and ledger;
    the same interval again sends nothing; under a new version it is changed content until generation is raised."""
    from azure.schemaregistry.encoder.avroencoder import AvroEncoder

    from airflow.providers.common.compat.sdk import AirflowFailException

    endpoint, hub = typed["endpoint"], typed["hub"]
    path = write_output(spark, tmp_path / "orders", 40)
    v1 = order_schema(name="SparkOrder")
    with SchemaRegistryHook(CONN_ID).get_client() as client:
        registered = client.register_schema(GROUP, "com.example.SparkOrder", json.dumps(v1), "Avro")
        rows = rows_of(spark, path)
        # what Microsoft's encoder gives for each row, with a real registry client
        expected = sorted(AvroEncoder(client=client, group_name=GROUP).encode(row, schema=json.dumps(v1))["content"]
                          for row in rows)

    first = publish(typed, path, schema=v1)
    used = {"group": GROUP, "name": "com.example.SparkOrder", "id": registered.id, "version": registered.version,
            "format": "Avro"}
    assert {r["status"] for r in first.values()} == {"published"} and sum(r["events"] for r in first.values()) == 40
    assert all(r["schema"] == used for r in first.values())

    landed = read_back(endpoint, hub)
    assert {e.content_type for e in landed} == {f"avro/binary+{registered.id}"}
    assert sorted(b"".join(e.body) for e in landed) == expected  # byte for byte Microsoft's encoding
    assert sorted(decode_elsewhere(landed, SchemaRegistryHook(CONN_ID).get_endpoint(), tmp_path),
                  key=lambda r: r["order_id"]) == rows

    from airflow_provider_eh.hooks.producer_state import ProducerStateHook
    from airflow_provider_eh.publishing.document import StateKey

    store = ProducerStateHook("blob", wasb_conn_id=WASB_ID, container=typed["container"]).get_store()
    namespace = EventHubsEndpoint.from_connection_string(endpoint.connection_string(hub), hub).namespace
    for pid in first:
        state = store.read(StateKey(namespace, hub, "spark-typed", pid))
        assert state is not None and state.ledger.last is not None and state.ledger.last.schema == used

    again = publish(typed, path, schema_name="com.example.SparkOrder")  # the same schema, by its name
    assert {r["status"] for r in again.values()} == {"already_committed"}
    assert len(read_back(endpoint, hub)) == 40

    # v2: an optional field more (null when a row lacks it); the same rows encode to other bytes under another id
    v2 = order_schema({"name": "note", "type": ["null", "string"], "default": None}, name="SparkOrder")
    with pytest.raises(AirflowFailException) as refused:
        publish(typed, path, schema=v2, auto_register_schema=True)
    assert isinstance(refused.value.__cause__, BatchContentChangedError), repr(refused.value.__cause__)
    assert len(read_back(endpoint, hub)) == 40

    raised = publish(typed, path, schema=v2, generation=1)
    assert {r["schema"]["version"] for r in raised.values()} == {2}
    landed = read_back(endpoint, hub)
    assert len(landed) == 80 and len({e.content_type for e in landed}) == 2


def test_a_bad_row_or_an_incompatible_schema_fails_before_anything_is_claimed_or_sent(
        spark: Any, typed: dict[str, Any], tmp_path: Path) -> None:
    """Order 7's amount is null: the task fails naming the row by key and order, the field and the version, with
    no state written and nothing sent; so does a schema not backward compatible; JSON Schema rows then publish."""
    from azure.schemaregistry.encoder.jsonencoder import JsonSchemaEncoder

    from airflow.providers.common.compat.sdk import AirflowFailException

    endpoint, hub = typed["endpoint"], typed["hub"]
    container = ContainerClient.from_connection_string(typed["blob"], typed["container"])
    schema = order_schema(name="SparkBadOrder")
    bad = write_output(spark, tmp_path / "bad", 12, null_amount_at=7)
    with pytest.raises(AirflowFailException) as failed:
        publish(typed, bad, schema=schema, auto_register_schema=True)
    text = str(failed.value)
    assert "row with customer='c-1', order_id=7 does not fit schema orders/com.example.SparkBadOrder version 1" in text, text
    assert '"amount"' in text, text
    assert read_back(endpoint, hub) == [] and list(container.list_blobs()) == []

    good = write_output(spark, tmp_path / "good", 12)
    added = order_schema({"name": "channel", "type": "string"}, name="SparkBadOrder")  # no default
    with pytest.raises(AirflowFailException) as incompatible:
        publish(typed, good, schema=added, auto_register_schema=True, schema_compatibility="Backward")
    text = str(incompatible.value)
    assert "not backward compatible with the latest registered version 1" in text, text
    assert "field 'channel' is in this schema without a default and not in version 1" in text, text
    assert SchemaRegistryHook(CONN_ID).get_endpoint().schema_versions(GROUP, "com.example.SparkBadOrder") == [1]
    assert read_back(endpoint, hub) == [] and list(container.list_blobs()) == []

    # JSON Schema: the content type names the schema id, Microsoft's JSON decoder reads the events
    refund = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "SparkRefund", "type": "object",
              "properties": {"order_id": {"type": "integer"}, "amount": {"type": "integer"}, "customer": {"type": "string"}},
              "required": ["order_id", "amount", "customer"]}
    result = publish(typed, good, schema_group=JSON_GROUP, schema=refund, schema_format="Json", auto_register_schema=True)
    schema_id = result["0"]["schema"]["id"]
    landed = read_back(endpoint, hub)
    assert {e.content_type for e in landed} == {f"application/json;serialization=Json+{schema_id}"}
    with SchemaRegistryHook(CONN_ID).get_client() as client:
        decoder = JsonSchemaEncoder(client=client, validate=refund["$schema"])
        decoded = [decoder.decode({"content": b"".join(e.body), "content_type": e.content_type}) for e in landed]
    assert sorted(decoded, key=lambda r: r["order_id"]) == rows_of(spark, good)
