"""Read a whole hub back with the SDK's consumer, for tests that count what landed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from airflow_provider_eh.endpoint import EventHubsEndpoint
from airflow_provider_eh.ingest.receive import PartitionReader


@dataclass(frozen=True)
class ReadEvent:
    """One event as read back: partition, body bytes, properties (str keys and values), service sequence number."""

    partition: str
    body: bytes
    properties: dict[str, Any]
    sequence_number: int


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def read_partition(endpoint: EventHubsEndpoint, partition_id: str, consumer_group: str = "$Default") -> list[ReadEvent]:
    """Every event of one partition, from its start to its end at the time of the call."""
    with endpoint.producer() as client:
        props = client.get_partition_properties(partition_id)
    if props.get("is_empty"):
        return []
    end = int(props["last_enqueued_sequence_number"])
    out: list[ReadEvent] = []
    reader = PartitionReader(endpoint, consumer_group, partition_id, -1, max_batch_size=1000, max_wait_time=0.2, prefetch=4000)
    for events in reader.batches():
        for event in events:
            properties = {_text(k): _text(v) for k, v in (event.properties or {}).items()}
            out.append(ReadEvent(str(partition_id), b"".join(event.body), properties, event.sequence_number))
        if out and out[-1].sequence_number >= end:
            break
    reader.close()
    return out


def read_hub(endpoint: EventHubsEndpoint, consumer_group: str = "$Default") -> list[ReadEvent]:
    """Every event of every partition of the hub (partitions read in parallel), partition by partition in log order."""
    with endpoint.producer() as client:
        partition_ids = client.get_partition_ids()
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(partition_ids)) as pool:
        parts = list(pool.map(lambda p: read_partition(endpoint, p, consumer_group), partition_ids))
    return [e for part in parts for e in part]


def duplicates(events: list[ReadEvent], key: str = "id") -> dict[Any, int]:
    """Values of ``key`` in JSON bodies that occur more than once."""
    import json

    counts = Counter(json.loads(e.body)[key] for e in events)
    return {k: n for k, n in counts.items() if n > 1}
