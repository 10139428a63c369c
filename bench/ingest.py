"""Transactional ingestion into SQLite vs. the SDK's plain receive loop, over the same events.

Starts its own local Event Hubs endpoint and Azurite, publishes ``--events`` stamped JSON events
over the hub's partitions, then, in the same run, measures:

- ``plain``: ``EventHubConsumerClient.receive_batch`` over every partition, counting events and doing
  nothing else (no checkpoint, no storage): the floor any consumer pays;
- ``ingest``: one :class:`~airflow_provider_eh.ingest.IngestRun` into a SQLite file: ownership claims,
  per batch one transaction (rows, dedupe marks, checkpoint compare-and-set), then the standard blob
  checkpoint on Azurite.

The last line is ``ratio=<ingest/plain> ingest_eps=... plain_eps=...``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient  # noqa: E402
from azure.storage.blob import BlobServiceClient  # noqa: E402

from airflow_provider_eh.emulator import EmulatorProcess  # noqa: E402
from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.ingest import BatchProcessor, IngestRun, RunLimits, SqlIngestStore, Stream  # noqa: E402
from airflow_provider_eh.testing.azurite import AzuriteProcess  # noqa: E402


def publish(conn_str: str, partitions: int, events: int) -> None:
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        for p in range(partitions):
            batch = producer.create_batch(partition_id=str(p))
            for seq in range(events // partitions):
                event = EventData(json.dumps({"id": f"{p}-{seq}", "amount": seq % 97, "note": "x" * 100}))
                event.properties = {"eh.group": "bench", "eh.seq": seq, "eh.batch": "b0", "eh.owner": 1}
                try:
                    batch.add(event)
                except ValueError:
                    producer.send_batch(batch)
                    batch = producer.create_batch(partition_id=str(p))
                    batch.add(event)
            producer.send_batch(batch)


def plain_receive(conn_str: str, total: int, batch_size: int) -> float:
    consumer = EventHubConsumerClient.from_connection_string(conn_str, consumer_group="$Default")
    received = 0
    done = threading.Event()
    lock = threading.Lock()

    def on_batch(_ctx: object, events: list[EventData]) -> None:
        nonlocal received
        with lock:
            received += len(events)
            if received >= total:
                done.set()

    started = time.perf_counter()
    worker = threading.Thread(
        target=consumer.receive_batch,
        kwargs={"on_event_batch": on_batch, "starting_position": "-1", "max_batch_size": batch_size,
                "prefetch": batch_size, "max_wait_time": 0.5},
        daemon=True,
    )
    worker.start()
    if not done.wait(600):
        raise SystemExit(f"plain receive got only {received} of {total} events")
    elapsed = time.perf_counter() - started
    consumer.close()
    worker.join(30)
    return elapsed


def ingest(conn_str: str, blob_conn_str: str, db: Path, total: int, batch_size: int) -> float:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id TEXT NOT NULL, amount INTEGER, note TEXT)")
        conn.execute("PRAGMA journal_mode = WAL")
    container = BlobServiceClient.from_connection_string(blob_conn_str).create_container("bench")
    endpoint = EventHubsEndpoint.from_connection_string(conn_str)
    stream = Stream(endpoint.namespace, endpoint.eventhub_name, "$Default")
    store = SqlIngestStore(sqlite3.connect(db), stream)
    run = IngestRun(
        endpoint, "$Default", store, BatchProcessor("orders"), owner_id="bench", container_client=container,
        limits=RunLimits(batch_size=batch_size, max_wait_time=0.5, strategy="greedy"),
    )
    started = time.perf_counter()
    summary = run.run()
    elapsed = time.perf_counter() - started
    store.close()
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT count(DISTINCT id) FROM orders").fetchone()[0]
    if summary["events"] != total or rows != total:
        raise SystemExit(f"ingest applied {summary['events']} events and {rows} rows, expected {total}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=500)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    total = args.events // args.partitions * args.partitions
    with tempfile.TemporaryDirectory(prefix="eh-bench-ingest-") as tmp:
        with (
            EmulatorProcess(Path(tmp) / "eh", hubs={"bench": args.partitions}, extra_args=["--log-level", "WARNING"]) as em,
            AzuriteProcess(Path(tmp) / "azurite") as azurite,
        ):
            conn_str = em.connection_string("bench")
            publish(conn_str, args.partitions, total)
            plain_s = plain_receive(conn_str, total, args.batch_size)
            ingest_s = ingest(conn_str, azurite.connection_string, Path(tmp) / "sink.db", total, args.batch_size)
    plain_eps, ingest_eps = total / plain_s, total / ingest_s
    print(f"{total} events over {args.partitions} partitions, batches of {args.batch_size}")
    print(f"plain SDK receive:        {plain_eps:10.0f} events/s ({plain_s:.2f} s)")
    print(f"transactional ingestion:  {ingest_eps:10.0f} events/s ({ingest_s:.2f} s)")
    print(f"ratio={ingest_eps / plain_eps:.3f} ingest_eps={ingest_eps:.0f} plain_eps={plain_eps:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
