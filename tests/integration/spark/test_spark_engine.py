"""The Spark path and the local path are one engine: the same retry setting, the same event rules, the
same events on the hub for the same row."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pytest
from spark_kit import SparkSetup, batch

from airflow_provider_eh.errors import InvalidEventError, SparkPublishError
from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator
from airflow_provider_eh.stamps import RESERVED_PREFIX
from airflow_provider_eh.spark.job import SparkPublishJob, SparkSource
from airflow_provider_eh.spark.mapping import RowMapping

MAPPING = RowMapping(key_column="customer", property_columns=("region",), order_by=("id",))


def test_send_attempts_of_the_operator_govern_the_spark_path(spark: Any, setup: SparkSetup) -> None:
    path = str(setup.tmp / "busy")
    spark.range(0, 20).selectExpr("id", "concat('c', cast(id % 2 as string)) as customer", "1 as region").write.parquet(path)
    # Hub fencing off: on an idempotent-producer link the SDK's own resend after the timeout carries the
    # same producer sequence numbers, the hub acknowledges them as already stored, and the attempt succeeds.
    publisher = setup.publisher(send_attempts=1, send_timeout=2.0, hub_fencing=False)
    # Sends land but are never acknowledged: the attempt fails; a second attempt would find them by
    # read-back and succeed, so only send_attempts=1 raises (the job's own default of 3 did not).
    setup.event_hubs.admin.set_fault("store_no_ack", hub=setup.hub)
    try:
        with pytest.raises(SparkPublishError, match=r"failed to send.* Nothing committed, partitions? [0-9, ]+ pending: a retry resumes"):
            SparkPublishJob(spark, publisher, MAPPING).publish(SparkSource(path=path), batch("busy"))
    finally:
        setup.event_hubs.admin.clear_faults()
    # one attempt: each partition claimed once (owner level 1), the intent left for recovery
    levels = {p: publisher.get_partition_publishing_properties(p)["owner_level"] for p in "0123"}
    results = SparkPublishJob(spark, publisher, MAPPING).publish(SparkSource(path=path), batch("busy"))
    assert {levels[p] for p in results} == {1}
    assert sum(r.events for r in results.values()) == 20 and {r.status for r in results.values()} == {"recovered"}
    assert sorted(json.loads(e.body)["id"] for e in setup.read_back()) == list(range(20))  # each row once
    # the operator hands its setting to the job it runs (it used to leave the job at its own default)
    operator = SparkToEventHubOperator(task_id="publish", path=path, key_column="customer", send_attempts=1,
                                       state_container=setup.container_name)
    assert operator.publish_job(spark, setup.publisher(), MAPPING).send_attempts == 1


def test_a_property_column_in_the_reserved_prefix_is_refused_as_on_the_local_path(spark: Any, setup: SparkSetup) -> None:
    path = str(setup.tmp / "reserved")
    spark.range(0, 10).selectExpr("id", "concat('c', cast(id as string)) as customer", "id as `eh.seq`").write.parquet(path)
    mapping = RowMapping(key_column="customer", property_columns=("eh.seq",))
    with pytest.raises(InvalidEventError) as spark_error:
        SparkPublishJob(spark, setup.publisher(), mapping).publish(SparkSource(path=path), batch("reserved"))
    with pytest.raises(InvalidEventError) as local_error:
        setup.publisher().publish([{"body": "x", "partition_id": "0", "properties": {"eh.seq": 1}}], batch_id=batch("r"))
    rule = f"property 'eh.seq' uses the reserved prefix '{RESERVED_PREFIX}' of the publishing stamps"
    assert rule in str(spark_error.value) and rule in str(local_error.value)
    assert str(spark_error.value).endswith("; rename it") and str(local_error.value).endswith("; rename it")
    assert f"parquet output {path}: property column 'eh.seq'" in str(spark_error.value)
    assert list(setup.publisher().store.container.list_blobs()) == []  # refused before any claim
    assert set(setup.ends().values()) == {-1}


def test_the_same_row_gives_byte_identical_events_on_both_paths(spark: Any, setup: SparkSetup) -> None:
    rows = [
        {"id": 1, "customer": "c-1", "amount": decimal.Decimal("12.50"), "day": dt.date(2026, 5, 1),
         "note": "café ☕", "region": 3, "big": 2**40, "tag": "a", "gift": None},
        {"id": 2, "customer": "c-2", "amount": decimal.Decimal("-0.05"), "day": dt.date(2026, 5, 2),
         "note": "", "region": -7, "big": -(2**62), "tag": "b", "gift": "wrapped"},
    ]
    path = str(setup.tmp / "same")
    spark.createDataFrame(
        rows, "id long, customer string, amount decimal(10,2), day date, note string, region int, big long, tag string, "
        "gift string"
    ).write.parquet(path)
    mapping = RowMapping(key_column="customer", property_columns=("region", "big", "tag", "gift"), order_by=("id",))
    spark_publisher = setup.publisher(group="spark")
    SparkPublishJob(spark, spark_publisher, mapping).publish(SparkSource(path=path), batch("same"))
    local = [{"body": row, "partition_key": row["customer"],
              "properties": {"region": row["region"], "big": row["big"], "tag": row["tag"], "gift": row["gift"]}}
             for row in rows]
    setup.publisher(group="local").publish(local, batch_id=batch("same"))

    def events_of(group: str) -> list[tuple[str, bytes, dict[str, Any]]]:
        return sorted((e.partition, e.body, {k: v for k, v in e.properties.items() if not k.startswith(RESERVED_PREFIX)})
                      for e in setup.read_back() if e.properties.get("eh.group") == group)

    from_spark, from_local = events_of("spark"), events_of("local")
    assert len(from_spark) == 2 and from_spark == from_local
    assert [type(v) for k, v in from_spark[0][2].items() if k != "gift"] == [int, int, str]
    # a null property column is an AMQP null on both paths (the Spark path used to drop it)
    assert sorted((e[2]["gift"] is None, e[2]["gift"]) for e in from_spark) == [(False, "wrapped"), (True, None)]
    assert json.loads(from_spark[0][1])["amount"] in ("12.50", "-0.05") and b'"day":"2026-05-0' in from_spark[0][1]
