"""The ``eventhubs`` Spark data source vs. a plain SDK ``foreachPartition`` send, on ``local[2]``, same data, same hub.

Starts its own local Event Hubs endpoint and Azurite, writes ``--rows`` orders as parquet with Spark (the rows
of ``bench/spark_publish.py``: id, customer, region, amount, note; ~120 bytes as JSON, 8 files), reads them
into a cached DataFrame and, after a small warm-up of both paths, ``--rounds`` times in turn (which goes
first alternates), sends all of them to one 4-partition hub:

- ``datasource``: ``df.write.format("eventhubs").mode("append")`` with ``keyColumn`` customer, ``orderBy`` id,
  ``propertyColumns`` region and a fresh ``batchId`` per round: tasks map and stage the rows in Azurite, the
  driver's commit publishes them exactly once (claim, ledger, intent, send, commit);
- ``plain``: ``df.foreachPartition``: each task sends its rows with ``EventHubProducerClient.send_batch``,
  the body the row as JSON (the same bytes as the data source's), the property ``region``, the customer as
  the partition key mapped to a partition id by a hash of the user's own (CRC-32), one ``EventDataBatch`` per
  partition filled to its size: the fewest batches a plain send can make, as ``bench/spark_publish.py``'s plain
  side (``--plain-batching key``: one batch per partition key, as the SDK requires when the key is given to it).

Each side's time runs from the write's call to its return (the session up, the DataFrame cached). After each
side, the events it added to the hub are read back: the data source's must hold every id once, the plain
send's every id at least once, and both the same bodies. Then, once, a streaming query reads the parquet
files (``maxFilesPerTrigger``: several micro-batches) into ``writeStream.format("eventhubs")`` with
``trigger(availableNow=True)``, timed from ``start()`` to the query's end and read back the same way.
The endpoint and Azurite share the machine's cores with Spark; each round prints the load average.
The last line is ``datasource_rows_per_s=... plain_rows_per_s=... ratio=<datasource/plain, median of the
rounds> stream_rows_per_s=... stream_batches=... plain_batching=...``; ``bench/README.md`` has the figures and
where the data source's time goes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from azure.storage.blob import BlobServiceClient  # noqa: E402
from spark_publish import CONF, PARTITIONS, write_output  # noqa: E402

from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.client.readback import events_after, partition_span  # noqa: E402
from airflow_provider_eh.spark.datasource import EventHubsDataSource  # noqa: E402
from airflow_provider_eh.spark.session import SparkSettings, get_session  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402

HUB = "bench-datasource"
GROUP = "bench.datasource"
WARM_UP_ROWS = 2_000


def body_of(row: dict[str, Any]) -> bytes:
    """The row as JSON, the bytes the data source sends for it (sorted keys, no spaces)."""
    return json.dumps(row, sort_keys=True, separators=(",", ":")).encode()


def plain_send_partition(rows: Any, connection_string: str, hub: str, by_partition: bool) -> None:
    """What a pipeline without the provider runs per Spark partition: an SDK batch per customer (``by_partition``:
    per partition id, the customer hashed with CRC-32), filled and sent in turn."""
    import zlib

    from azure.eventhub import EventData, EventHubProducerClient

    groups: dict[str, list[Any]] = {}
    for row in rows:
        values = row.asDict()
        event = EventData(body_of(values))
        event.properties = {"region": values["region"]}
        key = str(zlib.crc32(values["customer"].encode()) % PARTITIONS) if by_partition else values["customer"]
        groups.setdefault(key, []).append(event)
    with EventHubProducerClient.from_connection_string(connection_string, eventhub_name=hub) as producer:
        target = "partition_id" if by_partition else "partition_key"
        for key, events in groups.items():
            batch = producer.create_batch(**{target: key})
            for event in events:
                try:
                    batch.add(event)
                except ValueError:
                    producer.send_batch(batch)
                    batch = producer.create_batch(**{target: key})
                    batch.add(event)
            producer.send_batch(batch)


def plain(df: Any, connection_string: str, by_partition: bool = False) -> float:
    """Seconds a plain ``foreachPartition`` send of ``df`` takes."""
    started = time.perf_counter()
    df.foreachPartition(lambda rows: plain_send_partition(rows, connection_string, HUB, by_partition))
    return time.perf_counter() - started


def datasource(df: Any, options: dict[str, str], identity: str) -> float:
    """Seconds ``df.write.format("eventhubs")`` takes to publish ``df`` exactly once as the batch ``identity``."""
    started = time.perf_counter()
    df.write.format("eventhubs").mode("append").options(**options).option("batchId", identity).save()
    return time.perf_counter() - started


def stream(spark: Any, path: str, options: dict[str, str], checkpoint: str, files_per_trigger: int) -> tuple[float, int]:
    """Seconds a streaming query takes to publish the parquet files at ``path``, and its micro-batches with rows."""
    schema = spark.read.parquet(path).schema
    source = spark.readStream.schema(schema).option("maxFilesPerTrigger", files_per_trigger).parquet(path)
    started = time.perf_counter()
    query = (source.writeStream.format("eventhubs").options(**options).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(f"the streaming query failed: {query.exception()}")
    return elapsed, sum(1 for p in query.recentProgress if p["numInputRows"])


def ends(endpoint: EventHubsEndpoint) -> dict[str, int]:
    """Each partition's last sequence number (-1: empty)."""
    spans = [partition_span(endpoint, str(p)) for p in range(PARTITIONS)]
    return {s.partition_id: -1 if s.is_empty else s.last_enqueued_sequence_number for s in spans}


def added(endpoint: EventHubsEndpoint, before: dict[str, int]) -> list[tuple[bytes, dict[str, Any]]]:
    """The events the hub took since ``before``: ``(body, properties)``."""
    after = ends(endpoint)

    def read(partition: str) -> list[tuple[bytes, dict[str, Any]]]:
        return [(b"".join(e.body), {(k.decode() if isinstance(k, bytes) else k): v for k, v in (e.properties or {}).items()})
                for e in events_after(endpoint, partition, before[partition], after[partition])]

    with ThreadPoolExecutor(PARTITIONS) as pool:
        return [event for part in pool.map(read, after) for event in part]


def check(events: list[tuple[bytes, dict[str, Any]]], rows: int, *, once: bool, what: str) -> set[bytes]:
    """Every id of ``range(rows)`` landed once (``once``) or at least once, each with its region; the bodies."""
    ids = Counter()
    for body, props in events:
        row = json.loads(body)
        if props.get("region") != row["region"]:
            raise AssertionError(f"{what}: id {row['id']} has region property {props.get('region')!r}, row {row['region']}")
        ids[row["id"]] += 1
    missing = rows - sum(1 for i in range(rows) if ids[i])
    extra = sum(ids.values()) - rows
    if missing or set(ids) - set(range(rows)) or (once and extra):
        raise AssertionError(f"{what}: {len(events)} events for {rows} rows, {missing} ids missing, {extra} extra")
    return {body for body, _ in events}


def main() -> None:
    """Publish the same rows both ways to the same hub, then as a stream; print rows/s and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=1, help="data source and plain runs, interleaved; medians")
    parser.add_argument("--files-per-trigger", type=int, default=2, help="the stream's maxFilesPerTrigger (8 files)")
    parser.add_argument("--plain-batching", choices=("key", "partition"), default="partition",
                        help="the plain send's SDK batches: per partition key (default) or per partition id")
    args = parser.parse_args()
    by_partition = args.plain_batching == "partition"
    logging.basicConfig(level=logging.WARNING)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-datasource-") as tmp, \
            EmulatorProcess(Path(tmp) / "eh", hubs={HUB: PARTITIONS}, extra_args=["--log-level", "WARNING"]) as eh, \
            AzuriteProcess(Path(tmp) / "azurite") as azurite:
        BlobServiceClient.from_connection_string(azurite.connection_string).create_container("spark-state")
        connection_string = eh.connection_string(HUB)
        endpoint = EventHubsEndpoint.from_connection_string(connection_string, HUB)
        options = {"connectionString": connection_string, "stateConnectionString": azurite.connection_string,
                   "stateContainer": "spark-state", "producerGroup": GROUP, "keyColumn": "customer",
                   "orderBy": "id", "propertyColumns": "region"}
        path = str(Path(tmp) / "orders")
        spark, owned = get_session(SparkSettings(master="local[2]", conf=CONF))
        spark.sparkContext.setLogLevel("ERROR")
        try:
            spark.dataSource.register(EventHubsDataSource)
            write_output(spark, path, args.rows)
            df = spark.read.parquet(path).cache()
            assert df.count() == args.rows
            warm = df.limit(WARM_UP_ROWS).cache()
            warm.count()
            plain(warm, connection_string, by_partition)
            datasource(warm, options, "warm-up")
            seconds: dict[str, list[float]] = {"datasource": [], "plain": []}
            ratios: list[float] = []
            loads: list[float] = []
            for r in range(args.rounds):
                loads.append(os.getloadavg()[0])
                bodies: dict[str, set[bytes]] = {}
                for side in (("datasource", "plain") if r % 2 == 0 else ("plain", "datasource")):
                    before = ends(endpoint)
                    took = (datasource(df, options, f"round-{r}") if side == "datasource"
                            else plain(df, connection_string, by_partition))
                    seconds[side].append(took)
                    bodies[side] = check(added(endpoint, before), args.rows, once=side == "datasource", what=side)
                if bodies["datasource"] != bodies["plain"]:
                    raise AssertionError("the data source and the plain send sent different bodies")
                ratios.append(seconds["plain"][-1] / seconds["datasource"][-1])
                print(f"round {r + 1} (load {loads[-1]:.2f}): datasource {args.rows / seconds['datasource'][-1]:.0f} "
                      f"rows/s ({seconds['datasource'][-1]:.1f}s), plain {args.rows / seconds['plain'][-1]:.0f} rows/s "
                      f"({seconds['plain'][-1]:.1f}s), ratio {ratios[-1]:.3f}", flush=True)
            loads.append(os.getloadavg()[0])
            before = ends(endpoint)
            stream_s, batches = stream(spark, path, options, str(Path(tmp) / "checkpoint"), args.files_per_trigger)
            check(added(endpoint, before), args.rows, once=True, what="stream")
            loads.append(os.getloadavg()[0])
            print(f"stream: {args.rows / stream_s:.0f} rows/s ({stream_s:.1f}s, {batches} micro-batches); "
                  f"load average {min(loads):.2f} to {max(loads):.2f}; {df.rdd.getNumPartitions()} Spark partitions",
                  flush=True)
        finally:
            if owned:
                spark.stop()
    datasource_rps = args.rows / statistics.median(seconds["datasource"])
    plain_rps = args.rows / statistics.median(seconds["plain"])
    if args.rounds > 1:
        print("ratios: " + ", ".join(f"{r:.3f}" for r in ratios) + f"; median {statistics.median(ratios):.3f}")
    print(f"datasource_rows_per_s={datasource_rps:.0f} plain_rows_per_s={plain_rps:.0f} "
          f"ratio={statistics.median(ratios):.3f} stream_rows_per_s={args.rows / stream_s:.0f} stream_batches={batches} "
          f"plain_batching={args.plain_batching}")


if __name__ == "__main__":
    main()
