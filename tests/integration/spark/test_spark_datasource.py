"""The ``eventhubs`` data source on ``local[2]``: ``df.write.format("eventhubs")`` publishes each row once on
its key's partition, in the declared order, whatever the DataFrame's partitioning; a re-run with the same
identity sends nothing, changed content is refused, a new generation publishes again."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest
from spark_kit import ORDERS_SQL, SparkSetup

from airflow_provider_eh.publishing import partition_for_key
from airflow_provider_eh.spark.datasource import EventHubsDataSource, identity_batch_id
from airflow_provider_eh.spark.datasource.options import WriteOptions
from airflow_provider_eh.spark.datasource.publish import committed_results
from airflow_provider_eh.spark.datasource.staging import staging_prefix

PARTITIONS = ["0", "1", "2", "3"]
INTERVAL = "2026-05-01T00:00:00+00:00/2026-05-02T00:00:00+00:00"


def options(setup: SparkSetup, **more: Any) -> dict[str, str]:
    return {
        "connectionString": setup.event_hubs.connection_string(setup.hub),
        "stateConnectionString": setup.azurite.connection_string, "stateContainer": setup.container_name,
        "producerGroup": "orders.daily", "batchId": INTERVAL, "keyColumn": "customer", "orderBy": "id",
        "propertyColumns": "region", "claimTimeout": "0", **{k: str(v) for k, v in more.items()},
    }


def orders(spark: Any, rows: int, *, start: int = 0, partitions: int = 4) -> Any:
    return spark.range(start, start + rows).selectExpr(*ORDERS_SQL).repartition(partitions)


def write(spark: Any, df: Any, setup: SparkSetup, **more: Any) -> None:
    spark.dataSource.register(EventHubsDataSource)
    df.write.format("eventhubs").mode("append").options(**options(setup, **more)).save()


def staged_blobs(setup: SparkSetup) -> list[str]:
    from azure.storage.blob import ContainerClient

    container = ContainerClient.from_connection_string(setup.azurite.connection_string, setup.container_name)
    return [b.name for b in container.list_blobs() if b.name.startswith("_staging/")]


def staged_blobs_once_tasks_end(setup: SparkSetup, wait: float = 30.0) -> list[str]:
    """The staged blobs once a failed job's cancelled tasks are over: an attempt still uploading when the job
    aborted deletes its own run when it finds the job's writing marker gone."""
    deadline = time.monotonic() + wait
    while (left := staged_blobs(setup)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def test_write_lands_each_row_once_on_its_key_partition_in_declared_order(spark: Any, setup: SparkSetup) -> None:
    write(spark, orders(spark, 20_000), setup, commitProcesses=2)  # the driver's commit from two processes

    read = setup.read_back()
    rows = [json.loads(e.body) for e in read]
    assert Counter(r["id"] for r in rows) == Counter(range(20_000))
    for event, row in zip(read, rows, strict=True):
        assert event.partition == partition_for_key(row["customer"], PARTITIONS)
        assert event.properties["region"] == row["region"] == row["id"] % 7
        assert event.properties["eh.group"] == "orders.daily"
    for pid in PARTITIONS:
        ids = [row["id"] for event, row in zip(read, rows, strict=True) if event.partition == pid]
        assert ids == sorted(ids), f"partition {pid}: events not in the declared order"
        assert [int(e.properties["eh.seq"]) for e in read if e.partition == pid] == list(range(len(ids)))
    assert staged_blobs(setup) == [], "the staged rows stay behind after the commit"

    # what an Airflow task waits for: the ledger's record of the identity, read without Spark
    results = committed_results(WriteOptions.from_options(options(setup)), identity_batch_id("orders.daily", INTERVAL))
    assert sum(r.events for r in results.values()) == 20_000
    assert setup.ends() == {p: r.service_last_sequence_number for p, r in results.items()}


def test_rerun_with_other_partitioning_sends_nothing_changed_rows_are_refused_generation_republishes(
    spark: Any, setup: SparkSetup
) -> None:
    write(spark, orders(spark, 3000, partitions=3), setup)
    ends = setup.ends()

    write(spark, orders(spark, 3000, partitions=7), setup)  # same rows, split otherwise: the same batch
    write(spark, orders(spark, 3000, partitions=1).coalesce(1), setup, commitProcesses=3)  # committed by others
    assert setup.ends() == ends, "a re-run of the same identity sent events"

    with pytest.raises(Exception, match="BatchContentChangedError") as refused:  # refused by a commit process
        write(spark, orders(spark, 3000, start=1), setup, commitProcesses=2)
    assert "bump `generation`" in str(refused.value)
    assert setup.ends() == ends

    write(spark, orders(spark, 3000, start=1), setup, generation=1)
    ids = Counter(json.loads(e.body)["id"] for e in setup.read_back())
    assert sum(ids.values()) == 6000 and ids[0] == 1 and ids[3000] == 1 and ids[1] == 2
    assert staged_blobs(setup) == []


def test_bad_options_and_bad_rows_fail_before_anything_is_published(spark: Any, setup: SparkSetup) -> None:
    df = orders(spark, 100)
    with pytest.raises(Exception, match="option 'producerGroup' is missing"):
        write(spark, df, setup, producerGroup="")
    with pytest.raises(Exception, match="the output has no column 'account'"):
        write(spark, df, setup, keyColumn="account")
    with pytest.raises(Exception, match="container 'Bad_Name' cannot be used .HttpResponseError: The specified resource "
                                        "name contains invalid characters"):
        write(spark, df, setup, stateContainer="Bad_Name")
    with pytest.raises(Exception, match="mode\\('append'\\)"):
        spark.dataSource.register(EventHubsDataSource)
        df.write.format("eventhubs").mode("overwrite").options(**options(setup)).save()

    nulls = spark.range(0, 100).selectExpr(
        "id", "case when id = 42 then null else concat('c-', cast(id as string)) end as customer", "1 as region")
    with pytest.raises(Exception, match="row with customer=None, id=42: key column 'customer' is null"):
        write(spark, nulls, setup)
    assert setup.ends() == {p: -1 for p in PARTITIONS}
    assert staged_blobs_once_tasks_end(setup) == [], "a failed write leaves staged rows behind"
    prefix = staging_prefix(WriteOptions.from_options(options(setup)).endpoint, "orders.daily",
                            identity_batch_id("orders.daily", INTERVAL))
    assert prefix.endswith(f"/orders.daily/{identity_batch_id('orders.daily', INTERVAL)}/")


def test_the_data_source_sends_what_the_operators_spark_path_sends_in_the_same_order(
        spark: Any, setup: SparkSetup, event_hubs: Any) -> None:
    from spark_kit import batch

    from airflow_provider_eh.client.endpoint import EventHubsEndpoint
    from airflow_provider_eh.client.readback import read_hub
    from tests.conftest import unique_name

    # order values with nulls and ties: the content hash breaks ties, nulls come first, as Spark sorts them
    df = spark.range(0, 3000).selectExpr(
        "concat('customer-', cast(id % 13 as string)) as customer", "case when id % 10 = 0 then null else id % 50 end as rank",
        "cast(id % 7 as int) as region", "concat('order-', cast(id as string)) as order_id")
    path = str(setup.tmp / "orders")
    df.repartition(5).write.parquet(path)
    mapping = {"key_column": "customer", "order_by": ["rank"], "property_columns": ["region"]}
    setup.publish(spark, path, batch("same-bytes"), mapping)

    other = unique_name("hub")
    event_hubs.admin.create_hub(other, partitions=4)
    write(spark, spark.read.parquet(path).repartition(3), setup, connectionString=event_hubs.connection_string(other),
          orderBy="rank")

    def sent(events: list[Any]) -> dict[str, list[tuple[bytes, dict[str, Any]]]]:
        out: dict[str, list[tuple[bytes, dict[str, Any]]]] = {}
        for e in events:
            user = {k: v for k, v in e.properties.items() if not k.startswith("eh.")}
            out.setdefault(e.partition, []).append((e.body, user))
        return out

    operator = sent(setup.read_back())
    source = sent(read_hub(EventHubsEndpoint.from_connection_string(event_hubs.connection_string(other), other)))
    assert sum(len(v) for v in source.values()) == 3000
    assert source == operator, "the data source's events differ from the operator's (bodies, properties or order)"


def test_write_over_websockets_through_an_http_proxy_lands_each_row_once(spark: Any, setup: SparkSetup) -> None:
    from tests.support.proxy import HttpProxy

    websockets_before = int(setup.event_hubs.admin.stats()["websocket_connections_total"])
    with HttpProxy(setup.tmp / "proxy", username="svc", password="proxy-secret") as proxy:
        write(spark, orders(spark, 2000), setup, proxyHost="127.0.0.1", proxyPort=proxy.port, proxyUsername="svc",
              proxyPassword="proxy-secret", customEndpointAddress=setup.event_hubs.websocket_address)
        tunnels = proxy.tunnels()
    assert f"127.0.0.1:{setup.event_hubs.websocket_port}" in tunnels  # the driver's sends went through the proxy
    assert int(setup.event_hubs.admin.stats()["websocket_connections_total"]) > websockets_before
    assert Counter(json.loads(e.body)["id"] for e in setup.read_back()) == Counter(range(2000))


def test_an_attempt_that_outlives_its_job_deletes_what_it_staged(setup: SparkSetup) -> None:
    """The writing marker, without Spark's timing: attempts that finish after their job's abort or commit (a
    cancelled task still uploading, a speculative twin) find it gone and delete their runs."""
    import pyarrow as pa
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    schema = StructType([StructField("id", LongType()), StructField("customer", StringType()),
                         StructField("region", IntegerType())])
    rows = pa.record_batch({"id": pa.array([1, 2, 3], pa.int64()), "customer": ["c-1", "c-2", "c-3"],
                            "region": pa.array([1, 2, 3], pa.int32())})

    failed = EventHubsDataSource(options(setup)).writer(schema, False)
    kept = failed.write(iter([rows]))
    assert sorted(staged_blobs(setup)) == sorted([kept.run.blob, failed.marker.name])
    failed.abort([])  # a job whose failed task sent no message: its kept attempts' runs go all the same
    assert staged_blobs(setup) == []
    late = failed.write(iter([rows]))
    assert late.run.blob == "" and staged_blobs(setup) == [], "an attempt after the abort left its run behind"

    committed = EventHubsDataSource(options(setup)).writer(schema, False)
    committed.commit([committed.write(iter([rows]))])
    assert committed.write(iter([rows])).run.blob == "" and staged_blobs(setup) == []
    assert sorted(json.loads(e.body)["id"] for e in setup.read_back()) == [1, 2, 3]
