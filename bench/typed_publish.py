"""Avro publishing: the operator's typed path vs. Microsoft's encoder and the plain SDK, in one run.

Starts its own local Event Hubs endpoint (with its Schema Registry over HTTPS and token auth, a
private CA) and Azurite, registers an Avro schema of orders, then publishes the same ``--events``
rows spread over 4 partitions, in ``--rounds`` interleaved rounds, two ways:

- ``sdk``: what a plain pipeline does: per partition (one thread and one ``EventHubProducerClient``
  each), every row encoded by Microsoft's ``AvroEncoder`` (``message_type=EventData``, the schema id in
  the content type; the encoder's registry client asks once and caches) and sent in SDK batches
  filled to the link's limit;
- ``operator``: ``EventHubPublishOperator.execute`` with ``schema_group`` and the schema, as a task
  runs it: the schema resolved in the registry, every row encoded by Microsoft's encoder before
  anything is sent, then the exactly-once publish (blob state on Azurite, claim, intent, fenced
  send, commit).

The last line is ``ratio=<operator/sdk events per second, median of the rounds> operator_eps=...
sdk_eps=... rounds=...``; the events of both sides are read back and counted once.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.storage.blob import BlobServiceClient  # noqa: E402

from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.client.readback import read_hub  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402
from tests.support.tls import make_certificates  # noqa: E402

PARTITIONS = 4
GROUP = "orders"
CONN_ID, WASB_ID = "bench_typed", "bench_typed_wasb"
SCHEMA = {"type": "record", "name": "Order", "namespace": "com.example", "fields": [
    {"name": "order_id", "type": "long"}, {"name": "amount", "type": "int"}, {"name": "customer", "type": "string"},
    {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "note", "type": ["null", "string"], "default": None}]}


def make_rows(n: int) -> list[dict[str, Any]]:
    """``n`` orders, each with its partition (spread in turn)."""
    placed = datetime(2026, 5, 1, tzinfo=UTC)
    return [{"body": {"order_id": i, "amount": (i * 37) % 10_000, "customer": f"customer-{i % 1009}", "placed_at": placed,
                      "note": None if i % 3 else f"gift wrap {i}"}, "partition_id": str(i % PARTITIONS)}
            for i in range(n)]


def plain_sdk(endpoint: EventHubsEndpoint, registry: Any, rows: list[dict[str, Any]]) -> float:
    """Seconds a plain pipeline takes: per partition thread, Microsoft's encoder and the SDK's producer."""
    from azure.eventhub import EventData
    from azure.schemaregistry.encoder.avroencoder import AvroEncoder

    definition = json.dumps(SCHEMA)
    per_partition = {str(p): [r["body"] for r in rows if r["partition_id"] == str(p)] for p in range(PARTITIONS)}

    def send(pid: str) -> None:
        with registry.client() as client, endpoint.plain_producer() as producer:
            encoder = AvroEncoder(client=client, group_name=GROUP)
            batch = producer.create_batch(partition_id=pid)
            for row in per_partition[pid]:
                event = encoder.encode(row, schema=definition, message_type=EventData)
                try:
                    batch.add(event)
                except ValueError:
                    producer.send_batch(batch)
                    batch = producer.create_batch(partition_id=pid)
                    batch.add(event)
            producer.send_batch(batch)

    started = time.perf_counter()
    threads = [threading.Thread(target=send, args=(str(p),)) for p in range(PARTITIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def operator(rows: list[dict[str, Any]], container: str, group: str) -> float:
    """Seconds ``EventHubPublishOperator.execute`` takes to publish ``rows`` against the schema, one new batch."""
    from airflow_provider_eh.operators.publish import EventHubPublishOperator

    task = EventHubPublishOperator(task_id="publish", event_hubs_conn_id=CONN_ID, wasb_conn_id=WASB_ID,
                                   state_container=container, producer_group=group, events=rows, schema_group=GROUP,
                                   schema=SCHEMA)
    start = datetime(2026, 5, 1, tzinfo=UTC)
    context = {"ti": SimpleNamespace(try_number=1, map_index=-1), "data_interval_start": start,
               "data_interval_end": start, "logical_date": start, "run_id": "scheduled__2026-05-01"}
    started = time.perf_counter()
    result = task.execute(context)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    assert sum(r["events"] for r in result.values()) == len(rows) and {r["status"] for r in result.values()} == {"published"}
    return elapsed


def main() -> None:
    """Print the operator's typed throughput against Microsoft's encoder with the plain SDK."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    rows = make_rows(args.events)
    with tempfile.TemporaryDirectory(prefix="bench-typed-") as tmp:
        certificates = make_certificates(Path(tmp) / "tls")
        with EmulatorProcess(Path(tmp) / "eh", key_name="RootManageSharedAccessKey", key="bench-typed-key",
                             require_auth=True, registry_port=0, tls=(certificates.cert, certificates.key),
                             schema_groups={GROUP: ("Avro", "None")}, websocket_port=None) as eh, \
                AzuriteProcess(Path(tmp) / "azurite") as azurite:
            blob = BlobServiceClient.from_connection_string(azurite.connection_string)
            blob.create_container("typed-state")
            os.environ[f"AIRFLOW_CONN_{WASB_ID.upper()}"] = json.dumps(
                {"conn_type": "wasb", "extra": {"connection_string": azurite.connection_string}})
            from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook

            sdk_times, operator_times = [], []
            for round_ in range(args.rounds):
                hubs = {side: f"bench-typed-{side}-{round_}" for side in ("sdk", "operator")}
                for hub in hubs.values():
                    eh.admin.create_hub(hub, partitions=PARTITIONS)
                endpoints = {side: EventHubsEndpoint.from_connection_string(eh.connection_string(hub), hub)
                             for side, hub in hubs.items()}
                os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps({"conn_type": "azure_event_hubs", "extra": {
                    "connection_string": eh.connection_string(hubs["operator"]),
                    "schema_registry_namespace": eh.registry_namespace, "ca_bundle": str(certificates.ca)}})
                registry = SchemaRegistryHook(CONN_ID).get_endpoint()
                if round_ == 0:
                    with registry.client() as client:
                        client.register_schema(GROUP, "com.example.Order", json.dumps(SCHEMA), "Avro")
                sides = [("sdk", functools.partial(plain_sdk, endpoints["sdk"], registry, rows)),
                         ("operator", functools.partial(operator, rows, "typed-state", f"bench-{round_}"))]
                for side, run in sides if round_ % 2 == 0 else reversed(sides):
                    (sdk_times if side == "sdk" else operator_times).append(run())
                    logging.getLogger("azure").setLevel(logging.WARNING)  # Airflow's logging, set up by the operator
                for side, endpoint in endpoints.items():
                    read = read_hub(endpoint, shared=False)
                    assert len(read) == len(rows), f"{side}: {len(read)} events, not {len(rows)}"
    sdk_eps = [len(rows) / s for s in sdk_times]
    operator_eps = [len(rows) / s for s in operator_times]
    ratios = [o / s for o, s in zip(operator_eps, sdk_eps, strict=True)]
    for i, (s, o) in enumerate(zip(sdk_times, operator_times, strict=True)):
        print(f"round {i}: Microsoft's encoder + plain SDK {s:.2f}s, operator {o:.2f}s ({len(rows)} events)")
    print(f"ratio={statistics.median(ratios):.3f} operator_eps={statistics.median(operator_eps):.0f} "
          f"sdk_eps={statistics.median(sdk_eps):.0f} rounds={','.join(f'{r:.3f}' for r in ratios)}")


if __name__ == "__main__":
    main()
