"""``spark.read.format("eventhubs")`` on ``local[2]``: a bounded read of each partition's range, by sequence numbers or
enqueued times, one Spark partition per Event Hubs partition; every column compared with what the SDK sent."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.eventhub import EventData
from spark_kit import SparkSetup

from airflow_provider_eh.spark.datasource import EventHubsDataSource

PARTITIONS = ("0", "1", "2", "3")


def send(setup: SparkSetup, per_partition: int, *, first: int = 0) -> None:
    """``per_partition`` events on each partition: a JSON body, a text, a number and a flag as properties."""
    with setup.endpoint.producer() as producer:
        for p in PARTITIONS:
            batch = producer.create_batch(partition_id=p)
            for i in range(first, first + per_partition):
                event = EventData(json.dumps({"p": p, "i": i}))
                event.properties = {"kind": "order", "n": i, "ok": i % 2 == 0}
                event.content_type = "application/json"
                batch.add(event)
            producer.send_batch(batch)


def options(setup: SparkSetup, **more: Any) -> dict[str, str]:
    return {"connectionString": setup.event_hubs.connection_string(setup.hub), "consumerGroup": "analytics",
            "receiveTimeout": "20", **{k: v if isinstance(v, str) else json.dumps(v) for k, v in more.items()}}


def read(spark: Any, setup: SparkSetup, **more: Any) -> Any:
    spark.dataSource.register(EventHubsDataSource)
    return spark.read.format("eventhubs").options(**options(setup, **more)).load()


def test_a_batch_read_gives_every_event_once_with_its_columns_one_spark_partition_per_hub_partition(
        spark: Any, setup: SparkSetup) -> None:
    send(setup, 25)
    df = read(spark, setup)
    assert df.rdd.getNumPartitions() == len(PARTITIONS)
    assert [f.name for f in df.schema.fields] == ["body", "partition", "offset", "sequenceNumber", "enqueuedTime",
                                                  "contentType", "properties"]
    rows = df.collect()
    assert len(rows) == 100
    for row in rows:
        body = json.loads(bytes(row.body))
        assert body["p"] == row.partition and row.sequenceNumber == body["i"]
        assert row.properties == {"kind": "order", "n": str(body["i"]), "ok": "true" if body["i"] % 2 == 0 else "false"}
        assert row.contentType == "application/json" and row.offset
        assert abs((row.enqueuedTime.astimezone(UTC) - datetime.now(UTC)).total_seconds()) < 300
    assert sorted((r.partition, r.sequenceNumber) for r in rows) == [(p, i) for p in PARTITIONS for i in range(25)]


def test_ranges_by_sequence_numbers_and_by_enqueued_times_read_exactly_their_events(spark: Any, setup: SparkSetup) -> None:
    send(setup, 10)
    time.sleep(1.5)
    middle = datetime.now(UTC)
    time.sleep(1.5)
    send(setup, 10, first=10)

    # the Scala connector's keys and positions, and plain partition ids
    starts = {json.dumps({"ehName": setup.hub, "partitionId": 0}): {"offset": None, "seqNo": 3, "enqueuedTime": None,
                                                                     "isInclusive": True},
              "1": {"seqNo": 3, "isInclusive": False}}
    ends = {"0": {"seqNo": 5}, "1": {"seqNo": 6, "isInclusive": False}}
    picked = read(spark, setup, startingPositions=starts, endingPositions=ends, startingPosition="latest").collect()
    assert sorted((r.partition, r.sequenceNumber) for r in picked) == [("0", 3), ("0", 4), ("0", 5), ("1", 4), ("1", 5)]

    later = read(spark, setup, startingPosition={"enqueuedTime": middle.isoformat()}).collect()
    assert sorted((r.partition, r.sequenceNumber) for r in later) == [(p, i) for p in PARTITIONS for i in range(10, 20)]
    earlier = read(spark, setup, endingPosition={"enqueuedTime": middle.isoformat()}).collect()
    assert sorted((r.partition, r.sequenceNumber) for r in earlier) == [(p, i) for p in PARTITIONS for i in range(10)]


def test_system_properties_on_request_and_options_at_fault_named(spark: Any, setup: SparkSetup) -> None:
    send(setup, 2)
    rows = read(spark, setup, includeSystemProperties="true").collect()
    assert len(rows) == 8
    assert all(r.systemProperties["x-opt-sequence-number"] == str(r.sequenceNumber) for r in rows)

    with pytest.raises(Exception, match="startingPositions.*name partition 9"):
        read(spark, setup, startingPositions={"9": "earliest"}).collect()
    with pytest.raises(Exception, match="option 'startingPosition'.*unknown key 'seq'"):
        read(spark, setup, startingPosition={"seq": 1}).collect()
