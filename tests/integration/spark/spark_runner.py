"""One Spark publish in its own process (it owns its SparkSession), so that tests can SIGKILL it.

``python spark_runner.py CONFIG_FILE``: config has ``eh`` (connection string), ``hub``, ``blob`` and
``container``, ``group``, ``batch_id``, ``path`` (parquet), ``mapping`` (RowMapping kwargs),
``master`` (default ``local[2]``), ``claim_timeout``, ``on_empty``, ``hold_relay`` (default ``True``), ``network`` (the connection's network fields), ``publisher``
(more ``IdempotentPublisher`` arguments). Prints the results as one JSON
line, or ``{"error": type, "message": ...}`` and exits 3 on a provider error.
"""

from __future__ import annotations

import json
import logging
import sys

from azure.storage.blob import ContainerClient
from spark_kit import TEST_CONF

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.network import NetworkOptions
from airflow_provider_eh.errors import EventHubsProviderError
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher
from airflow_provider_eh.spark.job import SparkPublishJob, SparkSource
from airflow_provider_eh.spark.mapping import RowMapping
from airflow_provider_eh.spark.session import SparkSettings, get_session



def main(config: dict) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("azure").setLevel(logging.WARNING)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    endpoint = EventHubsEndpoint.from_connection_string(config["eh"], config["hub"],
                                                        network=NetworkOptions.from_fields(config.get("network") or {}))
    container = ContainerClient.from_connection_string(config["blob"], config["container"])
    store = BlobProducerStateStore(container, claim_timeout=config.get("claim_timeout", 0))
    publisher = IdempotentPublisher(endpoint, store, producer_group=config["group"],
                                    **config.get("publisher", {}))
    spark, _ = get_session(SparkSettings(master=config.get("master", "local[2]"), conf=TEST_CONF))
    spark.sparkContext.setLogLevel("ERROR")
    try:
        job = SparkPublishJob(spark, publisher, RowMapping(**config["mapping"]), on_empty=config.get("on_empty", "succeed"),
                              hold_relay=config.get("hold_relay", True))
        results = job.publish(SparkSource(path=config["path"], format=config.get("format", "parquet")), config["batch_id"])
    except EventHubsProviderError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc), "retryable": exc.retryable}), flush=True)
        return 3
    finally:
        spark.stop()
    print(json.dumps({p: r.to_dict() for p, r in results.items()}), flush=True)
    return 0


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        sys.exit(main(json.load(fh)))
