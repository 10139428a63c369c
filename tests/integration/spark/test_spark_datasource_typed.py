"""Typed events through the ``eventhubs`` data source: the driver resolves the schema once in the local endpoint's
registry, executors encode each row with Microsoft's encoder; the events are ``AvroEncoder``'s bytes and decode
with it in another process; a row that does not fit fails the write naming it before anything is published."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient

from airflow_provider_eh.client.schema_registry import registry_endpoint as registry_of
from airflow_provider_eh.spark.datasource import EventHubsDataSource
from tests.conftest import unique_name
from tests.support.tls import Certificates
from tests.support.typed_events import decode_elsewhere, order_schema, read_back, registry_endpoint

GROUP = "orders"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Certificates]]:
    with registry_endpoint(tmp_path_factory.mktemp("ds-typed"), {GROUP: ("Avro", "None")}) as found:
        yield found


@pytest.fixture
def typed(registry: tuple[Any, Certificates], azurite: Any) -> dict[str, Any]:
    endpoint, certificates = registry
    hub = unique_name("ds-typed")
    endpoint.admin.create_hub(hub, partitions=2)
    container = unique_name("c")
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(container)
    return {"endpoint": endpoint, "hub": hub, "options": {
        "connectionString": endpoint.connection_string(hub), "caBundle": str(certificates.ca),
        "schemaRegistryNamespace": endpoint.registry_namespace, "schemaGroup": GROUP,
        "stateConnectionString": azurite.connection_string, "stateContainer": container,
        "producerGroup": "ds-typed", "batchId": "2026-05-01/2026-05-02", "keyColumn": "customer", "orderBy": "order_id",
        "claimTimeout": "0",
    }}


def orders(spark: Any, rows: int, *, null_amount_at: int = -1) -> Any:
    return spark.range(rows).selectExpr(
        "id as order_id", f"case when id = {null_amount_at} then null else cast(id * 10 as int) end as amount",
        "concat('c-', cast(id % 3 as string)) as customer", "cast(id % 7 as int) as region").repartition(3)


def write(spark: Any, df: Any, options: dict[str, str]) -> None:
    spark.dataSource.register(EventHubsDataSource)
    df.write.format("eventhubs").mode("append").options(**options).save()


def test_rows_land_as_microsofts_avro_bytes_decoded_elsewhere_and_a_rerun_sends_nothing(
        spark: Any, typed: dict[str, Any], tmp_path: Path) -> None:
    from azure.schemaregistry.encoder.avroencoder import AvroEncoder

    endpoint, hub, options = typed["endpoint"], typed["hub"], typed["options"]
    schema = json.dumps(order_schema(name="DataSourceOrder"))
    registry = registry_of(namespace=endpoint.registry_namespace, connection_string=endpoint.connection_string(hub),
                           host=None, ca_bundle=options["caBundle"])
    with registry.client() as client:
        registered = client.register_schema(GROUP, "com.example.DataSourceOrder", schema, "Avro")
        rows = sorted((r.asDict() for r in orders(spark, 40).select("order_id", "amount", "customer").collect()),
                      key=lambda r: r["order_id"])
        expected = sorted(AvroEncoder(client=client, group_name=GROUP).encode(row, schema=schema)["content"] for row in rows)

    write(spark, orders(spark, 40), {**options, "schema": schema})
    landed = read_back(endpoint, hub)
    assert {e.content_type for e in landed} == {f"avro/binary+{registered.id}"}
    assert sorted(b"".join(e.body) for e in landed) == expected  # byte for byte Microsoft's encoding
    assert sorted(decode_elsewhere(landed, registry, tmp_path), key=lambda r: r["order_id"]) == rows

    write(spark, orders(spark, 40), {**options, "schemaName": "com.example.DataSourceOrder"})  # the same, by name
    assert len(read_back(endpoint, hub)) == 40


def test_a_row_that_does_not_fit_the_schema_fails_the_write_naming_it_and_nothing_is_published(
        spark: Any, typed: dict[str, Any]) -> None:
    endpoint, hub, options = typed["endpoint"], typed["hub"], typed["options"]
    schema = json.dumps(order_schema(name="DataSourceBadOrder"))
    with pytest.raises(Exception, match="order_id=7 does not fit schema orders/com.example.DataSourceBadOrder") as bad:
        write(spark, orders(spark, 12, null_amount_at=7), {**options, "schema": schema, "autoRegisterSchema": "true"})
    assert '"amount"' in str(bad.value)
    assert read_back(endpoint, hub) == []

    with pytest.raises(Exception, match="option 'schemaGroup' is 'orders': give the schema too"):
        write(spark, orders(spark, 2), options)
