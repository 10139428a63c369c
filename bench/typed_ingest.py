"""Ingesting Avro events into columns vs. the SDK's plain receive loop decoding each with Microsoft's decoder.

Starts its own local Event Hubs endpoint with its Schema Registry (HTTPS, a private CA, token auth),
publishes ``--events`` (20,000) orders encoded by Microsoft's ``AvroEncoder`` (the schema id in each
content type) over the hub's partitions, then, ``--rounds`` (3) times in turn, over the same events:

- ``plain``: ``EventHubConsumerClient.receive_batch`` over every partition (batches of 500), each
  event decoded by ``AvroEncoder.decode`` and nothing else (no checkpoint, no storage): the floor
  any consumer of typed events pays;
- ``ingest``: one :class:`~airflow_provider_eh.ingest.IngestRun` with the default limits into a fresh
  SQLite file, the default row function mapping the decoded records' fields to three columns (each
  batch one transaction with its checkpoint), every row counted back;
- ``json``: the same ingestion of the same rows published as JSON to a second hub (no decoding): what
  decoding adds to an ingestion.

Each round's ratio is the plain loop's time over the ingestion's, measured back to back, and
``decode_cost`` the typed ingestion's time over the JSON one's; the last line gives the medians:
``ratio=... decode_cost=... ingest_eps=... json_eps=... plain_eps=...``. A run that loaded an event
twice or not at all fails the benchmark.
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _filling import fill  # noqa: E402  (bench/, this script's folder)
from azure.eventhub import EventData, EventHubConsumerClient  # noqa: E402
from azure.schemaregistry.encoder.avroencoder import AvroEncoder  # noqa: E402

from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.client.schema_registry import SchemaRegistryEndpoint  # noqa: E402
from airflow_provider_eh.client.typed_events import TypedDecoder  # noqa: E402
from airflow_provider_eh.ingest import BatchProcessor, IngestRun, RunLimits, SqlIngestStore, Stream, json_rows  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from tests.support.tls import make_certificates  # noqa: E402

KEY_NAME, KEY, GROUP = "RootManageSharedAccessKey", "bench-typed-key", "orders"
ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "bench",
                    "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "int"},
                               {"name": "note", "type": "string"}]})
COLUMNS = ["id", "amount", "note"]


def publish(conn_str: str, registry: SchemaRegistryEndpoint | None, partitions: int, events: int) -> None:
    """Fill each partition with ``events // partitions`` orders: Avro encoded by Microsoft's encoder with a
    ``registry``, else JSON."""
    client = registry.client() if registry is not None else None
    encoder = AvroEncoder(client=client, group_name=GROUP, auto_register=True) if client is not None else None

    def order(p: int, seq: int) -> EventData:
        row = {"id": f"{p}-{seq}", "amount": seq % 97, "note": "x" * 100}
        return encoder.encode(row, schema=ORDER, message_type=EventData) if encoder is not None else EventData(json.dumps(row))

    try:
        fill(conn_str, partitions, events // partitions, order)
    finally:
        if client is not None:
            client.close()


def plain_receive(conn_str: str, registry: SchemaRegistryEndpoint, total: int) -> float:
    """Seconds the plain SDK's consumer takes to receive and decode ``total`` events (the ratio's baseline)."""
    consumer = EventHubConsumerClient.from_connection_string(conn_str, consumer_group="$Default")
    client = registry.client()
    encoder = AvroEncoder(client=client)
    received = 0
    done = threading.Event()
    lock = threading.Lock()

    def on_batch(_ctx: object, events: list[EventData]) -> None:
        nonlocal received
        for event in events:
            encoder.decode(event)
        with lock:
            received += len(events)
            if received >= total:
                done.set()

    started = time.perf_counter()
    worker = threading.Thread(
        target=consumer.receive_batch,
        kwargs={"on_event_batch": on_batch, "starting_position": "-1", "max_batch_size": 500, "prefetch": 500,
                "max_wait_time": 0.5},
        daemon=True,
    )
    worker.start()
    if not done.wait(600):
        raise SystemExit(f"plain receive got only {received} of {total} events")
    elapsed = time.perf_counter() - started
    consumer.close()
    client.close()
    worker.join(30)
    return elapsed


def ingest(conn_str: str, registry: SchemaRegistryEndpoint, path: Path, total: int, *,
           typed: bool = True) -> tuple[float, list[str]]:
    """One ingestion run with default limits into a fresh SQLite file; its seconds and the problems found."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE orders (id TEXT NOT NULL, amount INTEGER, note TEXT)")
    endpoint = EventHubsEndpoint.from_connection_string(conn_str)
    store = SqlIngestStore(sqlite3.connect(path), Stream(endpoint.namespace, endpoint.eventhub_name, "$Default"))
    decoder = TypedDecoder(registry)
    run = IngestRun(endpoint, "$Default", store, BatchProcessor("orders", json_rows(COLUMNS), decoder=decoder),
                    owner_id="bench", limits=RunLimits())
    started = time.perf_counter()
    summary = run.run()
    elapsed = time.perf_counter() - started
    ids = [r[0] for r in store.conn.execute("SELECT id FROM orders")]
    store.close()
    decoder.close()
    problems = []
    if summary["events"] != total or len(ids) != total or len(set(ids)) != total:
        problems.append(f"ingest applied {summary['events']} events and {len(ids)} rows ({len(set(ids))} distinct), "
                        f"expected {total}")
    if typed and decoder.cache.fetched != 1:
        problems.append(f"the schema was fetched {decoder.cache.fetched} times, expected once")
    return elapsed, problems


def main() -> int:
    """Compare typed ingestion with a plain receive-and-decode of the same events; print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="plain and ingestion runs, interleaved; medians are reported")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    total = args.events // args.partitions * args.partitions
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="eh-bench-typed-") as tmp:
        certificates = make_certificates(Path(tmp) / "tls")
        with EmulatorProcess(Path(tmp) / "eh", key_name=KEY_NAME, key=KEY,
                             require_auth=True, registry_port=0, tls=(certificates.cert, certificates.key),
                             schema_groups={GROUP: ("Avro", "None")}, websocket_port=None,
                             hubs={"bench": args.partitions, "json": args.partitions},
                             extra_args=["--log-level", "WARNING"]) as em:
            conn_str = em.connection_string("bench")
            registry = SchemaRegistryEndpoint(em.registry_namespace, "shared_access_key", key_name=KEY_NAME, key=KEY,
                                              ca_bundle=str(certificates.ca))
            json_str = em.connection_string("json")
            publish(conn_str, registry, args.partitions, total)
            publish(json_str, None, args.partitions, total)
            plain_s: list[float] = []
            ingest_s: list[float] = []
            json_s: list[float] = []
            for r in range(args.rounds):
                plain_s.append(plain_receive(conn_str, registry, total))
                took, found = ingest(conn_str, registry, Path(tmp) / f"sink-{r}.db", total)
                ingest_s.append(took)
                untyped, more = ingest(json_str, registry, Path(tmp) / f"json-{r}.db", total, typed=False)
                json_s.append(untyped)
                problems += found + more
                print(f"round {r + 1}: plain receive and decode {total / plain_s[-1]:.0f} events/s; typed ingestion "
                      f"{total / took:.0f} events/s (ratio {plain_s[-1] / took:.3f}); JSON ingestion "
                      f"{total / untyped:.0f} events/s (decode cost {took / untyped:.3f})", flush=True)
    ratios = [p / i for p, i in zip(plain_s, ingest_s, strict=True)]
    costs = [i / j for i, j in zip(ingest_s, json_s, strict=True)]
    print(f"{total} Avro events over {args.partitions} partitions, {args.rounds} rounds; medians")
    print(f"ratio={statistics.median(ratios):.3f} decode_cost={statistics.median(costs):.3f} "
          f"ingest_eps={total / statistics.median(ingest_s):.0f} json_eps={total / statistics.median(json_s):.0f} "
          f"plain_eps={total / statistics.median(plain_s):.0f}")
    for problem in problems:
        print(f"MISMATCH {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
