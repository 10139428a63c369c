"""Transactional ingestion into SQLite, Postgres and MariaDB vs. the SDK's plain receive loop, over the same events.

Starts its own local Event Hubs endpoint, Azurite and throwaway Postgres and MariaDB servers (where
Debian's ``postgresql`` / ``mariadb-server`` are installed), publishes ``--events`` stamped JSON
events over the hub's partitions, then, in the same run, measures:

- ``plain``: ``EventHubConsumerClient.receive_batch`` over every partition (batches of 500), counting
  events and doing nothing else (no checkpoint, no storage): the floor any consumer pays;
- ``ingest`` per database: one :class:`~airflow_provider_eh.ingest.IngestRun` with the default
  limits (no tuning): ownership claims, per batch one transaction (rows, dedupe marks, checkpoint
  compare-and-set), then the standard blob checkpoint on Azurite. Each database reads the same
  events through its own consumer group.

The last line is ``ratio_sqlite=... ratio_postgres=... [ratio_mariadb=...] ingest_eps_sqlite=...
ingest_eps_postgres=... [ingest_eps_mariadb=...] plain_eps=...``.

Where the time went before the changes of issue #16 (20,000 events, 4 partitions, batches of 500,
SQLite; ``python -m cProfile`` of the committing thread, 7.5 s of ingestion under the profiler):

- 1.64 s (22 %) writing the blob checkpoint after every commit (two blob writes per batch: one per
  namespace spelling), with the next batch waiting on it;
- 1.64 s (22 %) turning SDK events into ``IngestEvent`` (body join, property decoding);
- 1.27 s (17 %) the batch in SQL: 0.77 s the row function (``json.loads`` per event), 0.30 s the
  ``executemany`` of rows, the rest marks and the checkpoint;
- 0.84 s the partition properties read once at start, 0.21 s ownership claims;
- the rest waiting for the links (each partition's link received only while its batch was queued).

The changes: the blob checkpoint moved to a background thread (newest per partition, written after
the commit; a crash before it leaves the blob behind the SQL checkpoint, repaired by the next run);
a transaction takes every chunk of its partition already received (batches by bytes and by what
arrived in ``max_wait_time``, not by a fixed count), so per-transaction costs (BEGIN, marks,
checkpoint, blob write) are paid once per several hundred to thousands of events; the links keep
receiving into a bounded queue while a batch commits; received events are turned into
``IngestEvent`` on the receiving threads, and property decoding and row building skip the per-value
ABC checks (``isinstance(x, Mapping)``) that dominated them; Postgres rows go through
``execute_values`` (psycopg2's ``executemany`` is a round trip per row).

What bounds the ratio now: CPU. The receiving threads (the SDK's pure-Python AMQP decoder, the same
work as the plain loop) and the committing thread (``json.loads`` in the row function, building
parameter tuples, the driver) share one interpreter lock and, here, two cores with the local
endpoint, Azurite and the database server. Fixed costs per run add about 1.2 s: the partitions'
last sequence numbers (two rounds of SDK management requests, ~0.4 s each on the local endpoint),
ownership claims and release, and opening a link per partition.
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
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient  # noqa: E402
from azure.storage.blob import BlobServiceClient  # noqa: E402

from airflow_provider_eh.emulator import EmulatorProcess  # noqa: E402
from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.ingest import BatchProcessor, IngestRun, RunLimits, SqlIngestStore, Stream  # noqa: E402
from airflow_provider_eh.testing.azurite import AzuriteProcess  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "ingest"))
from sinks import mariadb_server, postgres_server  # noqa: E402


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


def ingest(conn_str: str, blob_conn_str: str, conn: Any, label: str, total: int) -> float:
    """One ingestion run with default limits into ``conn``'s ``orders``; its seconds."""
    cur = conn.cursor()
    cur.execute("CREATE TABLE orders (id VARCHAR(40) NOT NULL, amount INTEGER, note TEXT)")
    conn.commit()
    container = BlobServiceClient.from_connection_string(blob_conn_str).create_container(f"bench-{label}")
    endpoint = EventHubsEndpoint.from_connection_string(conn_str)
    stream = Stream(endpoint.namespace, endpoint.eventhub_name, label)
    store = SqlIngestStore(conn, stream)
    run = IngestRun(
        endpoint, label, store, BatchProcessor("orders"), owner_id="bench", container_client=container,
        limits=RunLimits(strategy="greedy"),
    )
    started = time.perf_counter()
    summary = run.run()
    elapsed = time.perf_counter() - started
    cur = conn.cursor()
    cur.execute("SELECT count(DISTINCT id) FROM orders")
    rows = cur.fetchone()[0]
    store.close()
    if summary["events"] != total or rows != total:
        raise SystemExit(f"{label}: ingest applied {summary['events']} events and {rows} rows, expected {total}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    total = args.events // args.partitions * args.partitions
    groups = ["sqlite", "postgres", "mariadb"]
    with tempfile.TemporaryDirectory(prefix="eh-bench-ingest-") as tmp, ExitStack() as stack:
        em = stack.enter_context(EmulatorProcess(
            Path(tmp) / "eh", hubs={"bench": args.partitions}, consumer_groups={"bench": groups},
            extra_args=["--log-level", "WARNING"],
        ))
        azurite = stack.enter_context(AzuriteProcess(Path(tmp) / "azurite"))
        dsn = stack.enter_context(postgres_server())
        mariadb = stack.enter_context(mariadb_server())
        if dsn is None:
            raise SystemExit("no Postgres server installed (initdb, postgres); apt-get install postgresql")
        conn_str = em.connection_string("bench")
        publish(conn_str, args.partitions, total)
        plain_s = plain_receive(conn_str, total, 500)
        sqlite_db = Path(tmp) / "sink.db"
        with sqlite3.connect(sqlite_db) as conn:
            conn.execute("PRAGMA journal_mode = WAL")
        seconds = {"sqlite": ingest(conn_str, azurite.connection_string, sqlite3.connect(sqlite_db), "sqlite", total)}
        import psycopg2

        seconds["postgres"] = ingest(conn_str, azurite.connection_string, psycopg2.connect(dsn), "postgres", total)
        if mariadb is not None:
            import pymysql

            seconds["mariadb"] = ingest(conn_str, azurite.connection_string, pymysql.connect(**mariadb), "mariadb", total)
    plain_eps = total / plain_s
    eps = {db: total / s for db, s in seconds.items()}
    print(f"{total} events over {args.partitions} partitions; plain loop in batches of 500, ingestion with default limits")
    print(f"plain SDK receive:        {plain_eps:10.0f} events/s ({plain_s:.2f} s)")
    for db, s in seconds.items():
        print(f"ingestion into {db:9}  {eps[db]:10.0f} events/s ({s:.2f} s)")
    print(
        " ".join(f"ratio_{db}={eps[db] / plain_eps:.3f}" for db in eps) + " "
        + " ".join(f"ingest_eps_{db}={eps[db]:.0f}" for db in eps) + f" plain_eps={plain_eps:.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
