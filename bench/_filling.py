"""How the ingestion benchmarks fill a hub before they measure: each partition's events in as few batches as fit."""

from __future__ import annotations

from collections.abc import Callable

from azure.eventhub import EventData, EventHubProducerClient


def fill(conn_str: str, partitions: int, per_partition: int, event_of: Callable[[int, int], EventData]) -> None:
    """Send ``event_of(partition, seq)`` for ``seq`` in ``range(per_partition)`` to each of partitions ``0..partitions-1``,
    in order, through the plain SDK."""
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        for p in range(partitions):
            batch = producer.create_batch(partition_id=str(p))
            for seq in range(per_partition):
                event = event_of(p, seq)
                try:
                    batch.add(event)
                except ValueError:
                    producer.send_batch(batch)
                    batch = producer.create_batch(partition_id=str(p))
                    batch.add(event)
            producer.send_batch(batch)
