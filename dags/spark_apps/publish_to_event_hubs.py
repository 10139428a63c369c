"""A PySpark application that publishes a job's output to Event Hubs exactly once with the ``eventhubs`` data source.

What ``eh_spark_submit_publish`` submits with ``SparkSubmitOperator``; it runs on any cluster with the
provider's wheel and the Azure SDKs (no Apache Airflow there). One argument: a JSON file (or a JSON
text) with

- ``input``: the materialised output to publish (parquet);
- ``options``: the data source's options (the hub, the state container, ``producerGroup``, ``batchId``
  (the interval), the key and order columns, ...);
- ``stream`` (optional): ``{"checkpoint": path, "files_per_trigger": n}`` to publish the input folder as a
  stream instead, each micro-batch exactly once, until everything there is published (``availableNow``).

Secrets may come from the environment instead of the file: ``EH_CONNECTION_STRING`` and
``EH_STATE_CONNECTION_STRING`` fill ``connectionString`` and ``stateConnectionString`` when those are absent.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def read_config(arg: str) -> dict[str, Any]:
    """The app's settings from a JSON file's path or a JSON text, secrets filled from the environment."""
    config: dict[str, Any] = json.loads(Path(arg).read_text() if not arg.lstrip().startswith("{") else arg)
    options = config.setdefault("options", {})
    for option, variable in (("connectionString", "EH_CONNECTION_STRING"),
                             ("stateConnectionString", "EH_STATE_CONNECTION_STRING")):
        if option not in options and os.environ.get(variable):
            options[option] = os.environ[variable]
    return config


def main(arg: str) -> None:
    """Publish ``input`` with the data source (once, or as a stream), then print what was published."""
    from pyspark.sql import SparkSession

    from airflow_provider_eh.spark.datasource import EventHubsDataSource

    config = read_config(arg)
    spark = SparkSession.builder.appName(config.get("name", "publish-to-event-hubs")).getOrCreate()
    spark.dataSource.register(EventHubsDataSource)
    stream = config.get("stream")
    if stream is None:
        df = spark.read.parquet(config["input"])
        df.write.format("eventhubs").mode("append").options(**config["options"]).save()
    else:
        schema = spark.read.parquet(config["input"]).schema
        source = (spark.readStream.schema(schema).option("maxFilesPerTrigger", int(stream.get("files_per_trigger", 1)))
                  .parquet(config["input"]))
        query = (source.writeStream.format("eventhubs").options(**config["options"])
                 .option("checkpointLocation", stream["checkpoint"]).trigger(availableNow=True).start())
        query.awaitTermination()
    print(json.dumps({"published": config["options"].get("batchId") or "stream",
                      "airflow_imported": "airflow" in sys.modules}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
