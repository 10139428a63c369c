"""A PySpark application that reads a hub with the ``eventhubs`` data source into a lakehouse table, each event once.

What ``eh_spark_backfill_read`` submits with ``SparkSubmitOperator``; it runs on any cluster with the
provider's wheel and the Azure SDKs (no Apache Airflow there), by ``spark-submit`` or as a Spark Connect client
(``SPARK_REMOTE=sc://...``: the queries then run in the Connect server, which needs the provider, the
Azure SDKs and, for ``delta``, ``deltalake`` and PySpark's ``connect`` extra). One argument: a JSON file (or a JSON
text) with

- ``options``: the reader's options (the hub, ``consumerGroup``, ``startingPosition``, ``endingPosition``,
  ``maxEventsPerTrigger``, ``checkpointContainer``, ...);
- ``checkpoint``: the folder of the queries' Spark checkpoints (one sub-folder per sink);
- ``parquet`` (optional): a folder: Spark's file sink, exactly once through its own commit log;
- ``delta`` (optional): a Delta table's URI, written by ``foreachBatch`` with
  :class:`~airflow_provider_eh.spark.datasource.delta_batches.DeltaBatchSink`, each micro-batch once by its id;
- ``trigger`` (optional): ``"availableNow"`` (the default: what the hub holds up to the end position, then stop)
  or a processing-time interval (``"2 seconds"``: run until stopped);
- ``name``: the stream's stable name (the Delta table's application id).

The events are stored with their partition, sequence number, offset, enqueued time, properties and body.
With an ``endingPosition`` (an enqueued time: the end of a backfilled interval), the stream stops there.
Secrets may come from the environment: ``EH_CONNECTION_STRING`` fills ``connectionString`` and
``EH_CHECKPOINT_CONNECTION_STRING`` fills ``checkpointConnectionString`` when ``checkpointContainer`` is given.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

COLUMNS = ("partition", "sequenceNumber", "offset", "enqueuedTime", "properties", "cast(body as string) as body")


def read_config(arg: str) -> dict[str, Any]:
    """The app's settings from a JSON file's path or a JSON text, secrets filled from the environment."""
    config: dict[str, Any] = json.loads(Path(arg).read_text() if not arg.lstrip().startswith("{") else arg)
    options = config.setdefault("options", {})
    if "connectionString" not in options and os.environ.get("EH_CONNECTION_STRING"):
        options["connectionString"] = os.environ["EH_CONNECTION_STRING"]
    if options.get("checkpointContainer") and "checkpointConnectionString" not in options and "checkpointAccountUrl" \
            not in options and os.environ.get("EH_CHECKPOINT_CONNECTION_STRING"):
        options["checkpointConnectionString"] = os.environ["EH_CHECKPOINT_CONNECTION_STRING"]
    return config


def main(arg: str) -> None:
    """Start a query per sink, wait for them (``availableNow``) and print what the sinks hold."""
    from pyspark.sql import SparkSession

    from airflow_provider_eh.spark.datasource import EventHubsDataSource
    from airflow_provider_eh.spark.datasource.delta_batches import DeltaBatchSink

    config = read_config(arg)
    name = config.get("name", "read-event-hubs")
    spark = SparkSession.builder.appName(name).config("spark.sql.session.timeZone", "UTC").getOrCreate()
    spark.dataSource.register(EventHubsDataSource)
    trigger = config.get("trigger", "availableNow")
    checkpoint = config["checkpoint"]
    queries = []
    if config.get("parquet"):
        writer = _rows(spark, config).writeStream.format("parquet").option("path", config["parquet"]).queryName(f"{name}-parquet")
        queries.append(_triggered(writer, trigger).option("checkpointLocation", f"{checkpoint}/parquet").start())
    if config.get("delta"):
        sink = DeltaBatchSink(config["delta"], app_id=name)
        writer = _rows(spark, config).writeStream.foreachBatch(sink).queryName(f"{name}-delta")
        queries.append(_triggered(writer, trigger).option("checkpointLocation", f"{checkpoint}/delta").start())
    _await_all(spark, queries)
    held = {}
    if config.get("parquet"):
        held["parquet"] = spark.read.parquet(config["parquet"]).count()
    if config.get("delta"):
        from deltalake import DeltaTable

        held["delta"] = DeltaTable(config["delta"]).to_pyarrow_table(columns=["sequenceNumber"]).num_rows
    print(json.dumps({"read": held, "airflow_imported": "airflow" in sys.modules or _airflow_on_workers(spark)}),
          flush=True)
    spark.stop()


def _airflow_on_workers(spark: Any) -> bool:
    """Whether a Python worker of the cluster has Airflow loaded: through a UDF, which a Spark Connect session
    runs as a classic one does."""
    from pyspark.sql.functions import udf

    loaded = udf(lambda _: "airflow" in sys.modules, "boolean")
    return any(row[0] for row in spark.range(0, 2, 1, 2).select(loaded("id")).collect())


def _await_all(spark: Any, queries: list[Any]) -> None:
    """Wait until every query has ended; the first to fail stops the others and fails the application (rather than
    leaving the others running while one table stays behind)."""
    while any(query.isActive for query in queries):
        try:
            spark.streams.awaitAnyTermination()
        except Exception:
            for query in queries:
                query.stop()
            raise
        spark.streams.resetTerminated()
    failed = [query.exception() for query in queries if query.exception() is not None]
    if failed:
        raise failed[0]


def _rows(spark: Any, config: dict[str, Any]) -> Any:
    """The hub's events as the sinks store them: a DataFrame of its own for each query, so that two queries running
    at once share no plan (Spark serializes a query's plan into its tasks while the other's thread works on it)."""
    return spark.readStream.format("eventhubs").options(**config["options"]).load().selectExpr(*COLUMNS)


def _triggered(writer: Any, trigger: str) -> Any:
    if trigger == "availableNow":
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=trigger)


if __name__ == "__main__":
    main(sys.argv[1])
