"""The ``eventhubs`` streaming source on ``local[2]`` vs. the SDK's bare receive loop in one process, over the same hub.

Starts its own local Event Hubs endpoint, fills one 4-partition hub with ``--events`` (100,000) JSON events of about
150 bytes with four application properties (``bench/ingest.py``'s events and its plain loop), then, after a small
warm-up of both sides, ``--rounds`` (3) times in turn (which goes first alternates):

- ``plain``: ``EventHubConsumerClient.receive_batch`` over every partition (batches of 500), counting the events and
  doing nothing else: the floor any consumer pays, on one process (one core for the SDK's pure-Python AMQP);
- ``spark``: ``spark.readStream.format("eventhubs")`` from the earliest events into Spark's parquet file sink with
  ``trigger(availableNow=True)`` (every column: body, partition, offset, sequence number, enqueued time, content type,
  properties), timed from ``start()`` to the query's end, a new checkpoint and folder each round; read back through
  the sink's log, every (partition, sequence number) once;
- ``delta`` (unless ``--no-delta``): the same stream through ``foreachBatch`` into a Delta table on local disk with
  :class:`~airflow_provider_eh.spark.datasource.delta_batches.DeltaBatchSink`, read back the same way.

Spark has two cores to receive and convert on (one task per hub partition, two at a time), the plain loop one. The
endpoint shares the machine's cores; each round prints the load average. The last line is ``ratio=<spark/plain events
per second, median of the rounds> delta_ratio=... spark_eps=... delta_eps=... plain_eps=... micro_batches=...
load_min=... load_max=...``.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import plain_receive, publish  # noqa: E402

from airflow_provider_eh.spark.datasource import EventHubsDataSource  # noqa: E402
from airflow_provider_eh.spark.datasource.delta_batches import DeltaBatchSink  # noqa: E402
from airflow_provider_eh.spark.session import SparkSettings, get_session  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402

HUB = "bench-read"
PARTITIONS = 4
CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g",
        "spark.sql.session.timeZone": "UTC"}


def spark_read(spark: Any, conn_str: str, folder: Path, *, delta: bool, limit: int | None = None) -> tuple[float, int]:
    """Seconds an ``availableNow`` query takes to read the hub into the parquet sink (``delta``: the Delta table), and
    its micro-batches."""
    stream = (spark.readStream.format("eventhubs").option("connectionString", conn_str)
              .option("startingPosition", "earliest").load())
    if limit is not None:
        stream = stream.where(f"sequenceNumber < {limit}")
    if delta:
        writer = stream.writeStream.foreachBatch(DeltaBatchSink(str(folder / "table"), app_id="bench"))
    else:
        writer = stream.writeStream.format("parquet").option("path", str(folder / "table"))
    started = time.perf_counter()
    query = writer.option("checkpointLocation", str(folder / "checkpoint")).trigger(availableNow=True).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    if query.exception() is not None:
        raise SystemExit(f"the streaming query failed: {query.exception()}")
    return elapsed, sum(1 for p in query.recentProgress if p["numInputRows"])


def held(spark: Any, folder: Path, *, delta: bool) -> tuple[int, int]:
    """``(rows, distinct (partition, sequence number))`` the table holds."""
    if delta:
        from deltalake import DeltaTable

        rows = DeltaTable(str(folder / "table")).to_pyarrow_table(columns=["partition", "sequenceNumber"]).to_pylist()
        return len(rows), len({(r["partition"], r["sequenceNumber"]) for r in rows})
    df = spark.read.parquet(str(folder / "table"))
    return df.count(), df.select("partition", "sequenceNumber").distinct().count()


def main() -> int:
    """Read the same hub both ways in turns; print events per second and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-delta", action="store_true", help="leave out the foreachBatch side into Delta")
    args = parser.parse_args()
    total = args.events - args.events % PARTITIONS
    logging.basicConfig(level=logging.WARNING)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    sides = ["spark", "plain"] + ([] if args.no_delta else ["delta"])
    eps: dict[str, list[float]] = {side: [] for side in sides}
    loads: list[float] = []
    batches = 0
    with tempfile.TemporaryDirectory(prefix="bench-read-") as tmp, \
            EmulatorProcess(Path(tmp) / "eh", hubs={HUB: PARTITIONS}, extra_args=["--log-level", "WARNING"]) as eh:
        conn_str = eh.connection_string(HUB)
        publish(conn_str, PARTITIONS, total)
        spark, owned = get_session(SparkSettings(master="local[2]", conf=CONF))
        spark.sparkContext.setLogLevel("ERROR")
        try:
            spark.dataSource.register(EventHubsDataSource)
            for delta in (False, True)[: 1 if args.no_delta else 2]:  # warm-up: workers, imports, delta-rs
                spark_read(spark, conn_str, Path(tmp) / f"warm-{delta}", delta=delta, limit=200)
            plain_receive(conn_str, min(total, 2_000), 500)
            for r in range(args.rounds):
                loads.append(os.getloadavg()[0])
                for side in (sides if r % 2 == 0 else list(reversed(sides))):
                    if side == "plain":
                        eps[side].append(total / plain_receive(conn_str, total, 500))
                        continue
                    folder = Path(tmp) / f"{side}-{r}"
                    seconds, batches = spark_read(spark, conn_str, folder, delta=side == "delta")
                    rows, distinct = held(spark, folder, delta=side == "delta")
                    if rows != total or distinct != total:
                        print(f"MISMATCH {side} round {r}: {rows} rows, {distinct} distinct, {total} events", flush=True)
                        return 1
                    eps[side].append(total / seconds)
                print(f"round {r}: " + " ".join(f"{s}_eps={eps[s][-1]:.0f}" for s in sides)
                      + f" load={loads[-1]:.2f}", flush=True)
        finally:
            if owned:
                spark.stop()
    median = {side: statistics.median(values) for side, values in eps.items()}
    ratios = f"ratio={median['spark'] / median['plain']:.3f}"
    if "delta" in median:
        ratios += f" delta_ratio={median['delta'] / median['plain']:.3f}"
    print(f"{ratios} " + " ".join(f"{s}_eps={median[s]:.0f}" for s in sides)
          + f" micro_batches={batches} load_min={min(loads):.2f} load_max={max(loads):.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
