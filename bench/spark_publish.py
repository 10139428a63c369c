"""Publishing a Spark job's output exactly once vs. a plain SDK ``foreachPartition`` send, on ``local[1]`` and ``local[2]``.

Starts its own local Event Hubs endpoint and Azurite, writes ``--rows`` orders (id, customer, region,
amount, note; ~120 bytes as JSON) as parquet with Spark, then, for each master, publishes the same
output to a fresh 4-partition hub twice:

- ``plain``: ``df.foreachPartition``: each task maps its rows with the same :class:`RowMapping` (row as
  JSON, partition by the customer key) and sends them with one ``EventHubProducerClient``, one SDK
  batch per partition filled with ``EventDataBatch.add``: what a pipeline without exactly-once does;
- ``idempotent``: :class:`~airflow_provider_eh.spark.job.SparkPublishJob` with the blob state store:
  routing and ordering, two passes over the persisted rows, claim, intent, stamped send on executors,
  commit.

Rows/s count from reading the output to the last acknowledgement (the session is already up). The
endpoint and Azurite run on the same machine and share its cores with Spark. On ``local[2]`` both
run once more over WebSockets (the endpoint's WebSocket listener, the connection's
``transport=websocket``): ``ws_ratio`` is the idempotent publish's rows/s over the plain send's there,
``ws_cost`` the idempotent publish's time over WebSockets over its time over TCP.
The last line is ``ratio=<idempotent/plain rows/s on local[2]> scale_2_over_1=<idempotent local[2]/local[1]>
rows_per_s_1=... rows_per_s_2=... ws_ratio=... ws_cost=...``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.storage.blob import BlobServiceClient  # noqa: E402

from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.client.network import NetworkOptions  # noqa: E402
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher, derive_batch_id  # noqa: E402
from airflow_provider_eh.spark.job import SparkPublishJob, SparkSource  # noqa: E402
from airflow_provider_eh.spark.mapping import RowMapping  # noqa: E402
from airflow_provider_eh.spark.session import SparkSettings, get_session  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402

PARTITIONS = 4
MAPPING = RowMapping(key_column="customer", property_columns=("region",), order_by=("id",))
CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": str(PARTITIONS),
    "spark.driver.memory": "2g",
    "spark.ui.showConsoleProgress": "false",
}


def write_output(spark: Any, path: str, rows: int) -> None:
    """``rows`` order rows as parquet at ``path``, in 8 Spark partitions."""
    spark.range(0, rows).selectExpr(
        "id", "concat('customer-', cast(id % 10007 as string)) as customer", "cast(id % 7 as int) as region",
        "round(rand(7) * 1000, 2) as amount", "concat('order ', cast(id as string), ' of the day, packed and sent') as note",
    ).repartition(8).write.mode("overwrite").parquet(path)


def plain_send_partition(rows: Any, endpoint: EventHubsEndpoint, partition_ids: list[str]) -> None:
    """What a plain pipeline runs per Spark partition: map each row, fill one SDK batch per partition, send."""
    from azure.eventhub import EventData

    with endpoint.plain_producer() as producer:
        batches: dict[str, Any] = {}
        for row in rows:
            pid, body, props = MAPPING.event_of(row.asDict(), partition_ids)
            event = EventData(body)
            if props:
                event.properties = props
            batch = batches.get(pid) or batches.setdefault(pid, producer.create_batch(partition_id=pid))
            try:
                batch.add(event)
            except ValueError:
                producer.send_batch(batch)
                batch = batches[pid] = producer.create_batch(partition_id=pid)
                batch.add(event)
        for batch in batches.values():
            if len(batch):
                producer.send_batch(batch)


def plain(spark: Any, path: str, endpoint: EventHubsEndpoint) -> float:
    """Seconds a plain pipeline takes to send the output from the executors (the ratio's baseline)."""
    with endpoint.producer() as client:
        partition_ids = [str(p) for p in client.get_partition_ids()]
    started = time.perf_counter()
    spark.read.parquet(path).foreachPartition(
        lambda rows: plain_send_partition(rows, endpoint, partition_ids)
    )
    return time.perf_counter() - started


def idempotent(spark: Any, path: str, endpoint: EventHubsEndpoint, container: Any, rows: int) -> float:
    """Seconds :class:`SparkPublishJob` takes to publish the output exactly once."""
    publisher = IdempotentPublisher(endpoint, BlobProducerStateStore(container), producer_group="bench")
    batch_id = derive_batch_id("bench", "bench", endpoint.eventhub_name, logical_date="2026-01-01")
    started = time.perf_counter()
    results = SparkPublishJob(spark, publisher, MAPPING).publish(SparkSource(path=path), batch_id)
    elapsed = time.perf_counter() - started
    assert sum(r.events for r in results.values()) == rows, results
    return elapsed


def hub_total(endpoint: EventHubsEndpoint) -> int:
    """How many events the hub holds over all its partitions."""
    with endpoint.producer() as client:
        return sum(int(client.get_partition_properties(p)["last_enqueued_sequence_number"]) + 1
                   for p in client.get_partition_ids())


def main() -> None:
    """Publish the same output both ways and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp, \
            EmulatorProcess(Path(tmp) / "eh") as eh, AzuriteProcess(Path(tmp) / "azurite") as azurite:
        container = BlobServiceClient.from_connection_string(azurite.connection_string).create_container("spark-state")
        path = str(Path(tmp) / "orders")
        figures: dict[int, dict[str, float]] = {}
        for cores in (1, 2):
            spark, owned = get_session(SparkSettings(master=f"local[{cores}]", conf=CONF))
            spark.sparkContext.setLogLevel("ERROR")
            try:
                if cores == 1:
                    write_output(spark, path, args.rows)
                hubs = {}
                for kind in ("plain", "idempotent"):
                    name = f"bench-{kind}-{cores}"
                    eh.admin.create_hub(name, partitions=PARTITIONS)
                    hubs[kind] = EventHubsEndpoint.from_connection_string(eh.connection_string(name), name)
                plain_s = plain(spark, path, hubs["plain"])
                idem_s = idempotent(spark, path, hubs["idempotent"], container, args.rows)
                assert hub_total(hubs["plain"]) == args.rows and hub_total(hubs["idempotent"]) == args.rows
                if cores == 2:
                    websocket = NetworkOptions.from_fields({"transport": "websocket",
                                                            "custom_endpoint_address": eh.websocket_address})
                    for kind in ("plain", "idempotent"):
                        name = f"bench-ws-{kind}"
                        eh.admin.create_hub(name, partitions=PARTITIONS)
                        hubs[f"ws-{kind}"] = EventHubsEndpoint.from_connection_string(
                            eh.connection_string(name), name, network=websocket)
                    ws_plain_s = plain(spark, path, hubs["ws-plain"])
                    ws_idem_s = idempotent(spark, path, hubs["ws-idempotent"], container, args.rows)
                    assert hub_total(hubs["ws-plain"]) == args.rows and hub_total(hubs["ws-idempotent"]) == args.rows
                    print(f"local[2] over WebSockets: plain {ws_plain_s:.1f}s, idempotent {ws_idem_s:.1f}s", flush=True)
            finally:
                if owned:
                    spark.stop()
            figures[cores] = {"plain": args.rows / plain_s, "idempotent": args.rows / idem_s}
            print(f"local[{cores}]: plain foreachPartition {args.rows} rows in {plain_s:.1f}s = "
                  f"{args.rows / plain_s:.0f} rows/s; idempotent {idem_s:.1f}s = {args.rows / idem_s:.0f} rows/s; "
                  f"ratio {plain_s / idem_s:.3f}", flush=True)
    ratio = figures[2]["idempotent"] / figures[2]["plain"]
    scale = figures[2]["idempotent"] / figures[1]["idempotent"]
    idem_2_s = args.rows / figures[2]["idempotent"]
    print(f"ratio={ratio:.3f} scale_2_over_1={scale:.2f} rows_per_s_1={figures[1]['idempotent']:.0f} "
          f"rows_per_s_2={figures[2]['idempotent']:.0f} ws_ratio={ws_plain_s / ws_idem_s:.3f} "
          f"ws_cost={ws_idem_s / idem_2_s:.3f}")


if __name__ == "__main__":
    main()
