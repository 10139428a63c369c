"""One publish in its own process, so that tests can SIGKILL it at a crash point.

``python publish_runner.py CONFIG_FILE``: config has ``eh`` (connection string), ``hub``, ``backend``
(``blob``; the Variables backend is exercised through Airflow in-process), ``blob`` and
``container``, ``group``, ``batch_id``, ``events`` (list of input events), ``claim_timeout``, and
optionally ``send_timeout``, ``send_attempts``, ``hub_fencing``, ``lease_only_batch_bytes``.
Prints the results as one JSON line.
"""

from __future__ import annotations

import json
import logging
import sys

from azure.storage.blob import ContainerClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher


def main(config: dict) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("azure").setLevel(logging.WARNING)
    endpoint = EventHubsEndpoint.from_connection_string(config["eh"], config["hub"])
    container = ContainerClient.from_connection_string(config["blob"], config["container"])
    store = BlobProducerStateStore(container, claim_timeout=config.get("claim_timeout", 0))
    publisher = IdempotentPublisher(
        endpoint, store, producer_group=config["group"],
        send_timeout=config.get("send_timeout", 60), send_attempts=config.get("send_attempts", 3),
        hub_fencing=config.get("hub_fencing", "auto"),
        **({"lease_only_batch_bytes": config["lease_only_batch_bytes"]} if "lease_only_batch_bytes" in config else {}),
    )
    results = publisher.publish(config["events"], batch_id=config["batch_id"])
    print(json.dumps({p: r.to_dict() for p, r in results.items()}), flush=True)


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        main(json.load(fh))
