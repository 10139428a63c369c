"""One publish in its own process that stops itself (SIGSTOP) before its K-th SDK batch goes out.

``python stall_runner.py CONFIG_FILE``: config as :mod:`publish_runner`'s (``eh``, ``hub``, ``blob``,
``container``, ``group``, ``batch_id``, ``events``, ``claim_timeout``, ``hub_fencing``), with
``lease_only_batch_bytes`` and ``stop_before`` (K). The stop is sent to the sending thread itself,
after its claim check of batch K and before ``send_batch``: the moment only the hub's fencing covers.
(:func:`airflow_provider_eh.testing.crash.pause_at` signals the process; the kernel may deliver that
to another thread while the sending one goes on into ``send_batch``, so batch K could land before the
stop.) Prints the results as one JSON line if it ever finishes.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from typing import Any

from azure.storage.blob import ContainerClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher
from airflow_provider_eh.steps import observe


def stop_before_send(batch: int) -> None:
    """SIGSTOP the sending thread (and so the process) when it reaches ``before_send:batch``."""

    def observer(step: str, count: int, _detail: Any) -> None:
        if step == "before_send" and count == batch:
            disarm()
            signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)

    disarm = observe(observer)


def main(config: dict[str, Any]) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("azure").setLevel(logging.WARNING)
    endpoint = EventHubsEndpoint.from_connection_string(config["eh"], config["hub"])
    container = ContainerClient.from_connection_string(config["blob"], config["container"])
    store = BlobProducerStateStore(container, claim_timeout=config.get("claim_timeout", 0))
    publisher = IdempotentPublisher(endpoint, store, producer_group=config["group"],
                                    hub_fencing=config.get("hub_fencing", "auto"),
                                    lease_only_batch_bytes=config["lease_only_batch_bytes"])
    stop_before_send(config["stop_before"])
    results = publisher.publish(config["events"], batch_id=config["batch_id"])
    print(json.dumps({p: r.to_dict() for p, r in results.items()}), flush=True)


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        main(json.load(fh))
