"""Typed columns through ``spark.read.format("eventhubs")``: events produced by Microsoft's ``AvroEncoder`` arrive as
the ``decoded`` struct, each field compared; JSON bodies typed by a JSON Schema without a registry; an event that does
not decode fails the read naming it, or is kept with its reason on request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from azure.eventhub import EventData

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.schema_registry import registry_endpoint as registry_of
from airflow_provider_eh.spark.datasource import EventHubsDataSource
from tests.conftest import unique_name
from tests.support.tls import Certificates
from tests.support.typed_events import order_schema, registry_endpoint

GROUP = "orders"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Certificates]]:
    with registry_endpoint(tmp_path_factory.mktemp("read-typed"), {GROUP: ("Avro", "None")}) as found:
        yield found


def test_avro_events_of_microsofts_encoder_arrive_as_typed_columns(spark: Any, registry: tuple[Any, Certificates]) -> None:
    from azure.schemaregistry.encoder.avroencoder import AvroEncoder

    endpoint, certificates = registry
    hub = unique_name("read-typed")
    endpoint.admin.create_hub(hub, partitions=2)
    schema = json.dumps(order_schema({"name": "note", "type": ["null", "string"], "default": None},
                                     {"name": "tags", "type": {"type": "array", "items": "string"}},
                                     name="ReadOrder"))
    reg = registry_of(namespace=endpoint.registry_namespace, connection_string=endpoint.connection_string(hub),
                      host=None, ca_bundle=str(certificates.ca))
    sent = [{"order_id": i, "amount": i * 10, "customer": f"c-{i % 3}", "note": None if i % 2 else f"n{i}",
             "tags": [f"t{j}" for j in range(i % 3)]} for i in range(12)]
    eh = EventHubsEndpoint.from_connection_string(endpoint.connection_string(hub), hub)
    with reg.client() as client, eh.producer() as producer:
        encoder = AvroEncoder(client=client, group_name=GROUP, auto_register=True)
        batch = producer.create_batch(partition_id="1")
        for order in sent:
            batch.add(encoder.encode(order, schema=schema, message_type=EventData))
        batch.add(EventData(b"not avro"))  # no schema id
        producer.send_batch(batch)

    spark.dataSource.register(EventHubsDataSource)
    opts = {"connectionString": endpoint.connection_string(hub), "caBundle": str(certificates.ca),
            "schemaRegistryNamespace": endpoint.registry_namespace, "schema": schema, "receiveTimeout": "20"}
    with pytest.raises(Exception, match="partition 1, sequence number 12: content type None names no Schema Registry id"):
        spark.read.format("eventhubs").options(**opts).load().collect()

    df = spark.read.format("eventhubs").options(**opts, decodeErrors="null").load()
    assert df.schema["decoded"].dataType.simpleString() == (
        "struct<order_id:bigint,amount:int,customer:string,note:string,tags:array<string>>")
    rows = df.orderBy("sequenceNumber").collect()
    assert [r.decoded.asDict() if r.decoded else None for r in rows] == [*sent, None]
    assert rows[-1].decodeError and "names no Schema Registry id" in rows[-1].decodeError
    assert {r.contentType.split("+")[0] for r in rows[:-1]} == {"avro/binary"}


def test_json_bodies_typed_by_a_json_schema_without_a_registry(spark: Any, setup: Any) -> None:
    with setup.endpoint.producer() as producer:
        producer.send_batch([EventData(json.dumps({"id": i, "price": i / 2, "who": {"name": f"n{i}"}, "extra": [i]}))
                             for i in range(5)], partition_id="2")
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "price": {"type": "number"},
                                               "who": {"type": "object", "properties": {"name": {"type": "string"}}},
                                               "extra": {"type": "string"}}}
    spark.dataSource.register(EventHubsDataSource)
    rows = (spark.read.format("eventhubs").option("connectionString", setup.event_hubs.connection_string(setup.hub))
            .option("schema", json.dumps(schema)).option("schemaFormat", "Json").load()
            .selectExpr("decoded.*").orderBy("id").collect())
    assert [r.asDict(recursive=True) for r in rows] == [
        {"id": i, "price": i / 2, "who": {"name": f"n{i}"}, "extra": f"[{i}]"} for i in range(5)]
