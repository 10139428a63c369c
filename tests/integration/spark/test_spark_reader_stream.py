"""``spark.readStream.format("eventhubs")`` on ``local[2]`` into Spark's parquet sink: admission control per trigger and
per partition, ``Trigger.AvailableNow``, a restart reading only what is new, start positions, and the query's progress
written as the consumer group's checkpoints, which the SDK's own ``BlobCheckpointStore`` consumer starts after."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from azure.eventhub import EventData, EventHubConsumerClient
from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore
from azure.storage.blob import ContainerClient
from spark_kit import SparkSetup

from airflow_provider_eh.checkpoints.blob_layout import CheckpointReader
from airflow_provider_eh.spark.datasource import EventHubsDataSource

PARTITIONS = ("0", "1", "2", "3")


def send(setup: SparkSetup, per_partition: int, first: int = 0) -> None:
    with setup.endpoint.producer() as producer:
        for p in PARTITIONS:
            producer.send_batch([EventData(f"{p}:{i}") for i in range(first, first + per_partition)], partition_id=p)


def start_query(spark: Any, setup: SparkSetup, tmp_path: Path, trigger: dict[str, Any], **options: str) -> Any:
    """The query from the hub into ``tmp_path/out`` (its checkpoint in ``tmp_path/checkpoint``), started."""
    spark.dataSource.register(EventHubsDataSource)
    stream = (spark.readStream.format("eventhubs")
              .option("connectionString", setup.event_hubs.connection_string(setup.hub))
              .option("consumerGroup", "analytics").option("receiveTimeout", "20").options(**options).load()
              .selectExpr("partition", "sequenceNumber", "cast(body as string) as body"))
    return (stream.writeStream.format("parquet").option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(**trigger).start())


def run_available_now(spark: Any, setup: SparkSetup, tmp_path: Path, **options: str) -> list[int]:
    """One ``Trigger.AvailableNow`` run of the query into ``tmp_path/out``; the rows of each micro-batch."""
    query = start_query(spark, setup, tmp_path, {"availableNow": True}, **options)
    query.awaitTermination(240)
    assert query.exception() is None, query.exception()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def landed(spark: Any, tmp_path: Path) -> list[tuple[str, int]]:
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert all(r.body == f"{r.partition}:{r.sequenceNumber}" for r in rows)
    return sorted((r.partition, r.sequenceNumber) for r in rows)


def sdk_consumer_first_events(setup: SparkSetup, wanted: int, timeout: float = 60) -> dict[str, int]:
    """The first sequence number an SDK consumer of ``analytics`` with ``BlobCheckpointStore`` receives per partition."""
    store = BlobCheckpointStore.from_connection_string(setup.azurite.connection_string, setup.container_name)
    client = EventHubConsumerClient.from_connection_string(
        setup.event_hubs.connection_string(setup.hub), consumer_group="analytics", eventhub_name=setup.hub,
        checkpoint_store=store, load_balancing_strategy="greedy", load_balancing_interval=1)
    first: dict[str, int] = {}

    def on_event(context: Any, event: Any) -> None:
        if event is not None:
            first.setdefault(context.partition_id, event.sequence_number)

    thread = threading.Thread(target=client.receive, kwargs={"on_event": on_event, "max_wait_time": 1}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while len(first) < wanted and time.monotonic() < deadline:
        time.sleep(0.2)
    client.close()
    thread.join(30)
    return first


def test_available_now_in_limited_micro_batches_then_a_restart_reads_only_the_new_events(
        spark: Any, setup: SparkSetup, tmp_path: Path) -> None:
    send(setup, 30)
    checkpoints = {"checkpointConnectionString": setup.azurite.connection_string,
                   "checkpointContainer": setup.container_name}
    batches = run_available_now(spark, setup, tmp_path, maxEventsPerTrigger="50", **checkpoints)
    assert batches == [50, 50, 20]
    assert landed(spark, tmp_path) == [(p, i) for p in PARTITIONS for i in range(30)]

    send(setup, 2, first=30)
    assert run_available_now(spark, setup, tmp_path, maxEventsPerTrigger="50", **checkpoints) == [8]
    assert landed(spark, tmp_path) == [(p, i) for p in PARTITIONS for i in range(32)]

    # the query's progress, in the SDK's checkpoint layout: read by the package's reader and started after by the SDK
    container = ContainerClient.from_connection_string(setup.azurite.connection_string, setup.container_name)
    group = CheckpointReader(container, setup.endpoint.fully_qualified_namespace, setup.hub).read("analytics")
    assert {p: group.sequence_number(p) for p in PARTITIONS} == {p: 31 for p in PARTITIONS}
    send(setup, 1, first=32)
    assert sdk_consumer_first_events(setup, len(PARTITIONS)) == {p: 32 for p in PARTITIONS}


def test_a_query_starting_at_latest_skips_what_was_there_and_caps_each_partition(
        spark: Any, setup: SparkSetup, tmp_path: Path) -> None:
    send(setup, 10)
    assert run_available_now(spark, setup, tmp_path, startingPosition="latest") == []
    send(setup, 7, first=10)
    assert run_available_now(spark, setup, tmp_path, startingPosition="latest", maxEventsPerPartition="3") == [12, 12, 4]
    assert landed(spark, tmp_path) == [(p, i) for p in PARTITIONS for i in range(10, 17)]


def test_partitions_added_to_the_hub_while_the_query_runs_are_read_from_their_beginning(
        spark: Any, setup: SparkSetup, tmp_path: Path) -> None:
    send(setup, 5)
    query = start_query(spark, setup, tmp_path, {"processingTime": "1 second"})
    try:
        query.processAllAvailable()
        assert landed(spark, tmp_path) == [(p, i) for p in PARTITIONS for i in range(5)]
        setup.event_hubs.admin.add_partitions(setup.hub, 6)  # as on a Premium or Dedicated namespace
        with setup.endpoint.producer() as producer:
            for p in ("0", "4", "5"):
                producer.send_batch([EventData(f"{p}:{i}") for i in range(5 if p == "0" else 0, 8)], partition_id=p)
        query.processAllAvailable()
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    added = [(p, i) for p in ("4", "5") for i in range(8)]
    assert landed(spark, tmp_path) == sorted([(p, i) for p in PARTITIONS for i in range(5)] + [("0", i) for i in (5, 6, 7)]
                                             + added)
