"""Reading a partition back: every event after a sequence number, up to the partition's end when asked.

Used by publishing's recovery (which of an in-doubt batch's events landed:
:func:`airflow_provider_eh.publishing.landed.landed_stamps`) and by tests and scripts that count what
landed in a whole hub (:func:`read_hub`, :func:`duplicates`). The read is bounded by the partition's
last enqueued sequence number at the time of the call, so it ends although producers keep sending.

The SDK's errors are raised as the error map's (:mod:`airflow_provider_eh.client.failures`), at the
site of the connection the endpoint was read from (:func:`~airflow_provider_eh.client.failures.site_of`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

from airflow_provider_eh.client.connection import held
from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.failures import provider_errors, site_of
from airflow_provider_eh.client.partition_readers import PartitionReader
from airflow_provider_eh.errors import ReadBackStalledError  # raised here, importable from here as before


@dataclass(frozen=True)
class PartitionSpan:
    """What a partition holds now: its first and last sequence numbers (``is_empty``: it holds none)."""

    partition_id: str
    beginning_sequence_number: int
    last_enqueued_sequence_number: int
    is_empty: bool


def partition_span(endpoint: EventHubsEndpoint, partition_id: str) -> PartitionSpan:
    """One partition-properties request."""
    with provider_errors(site_of(endpoint).during(f"reading partition {partition_id}'s properties")):
        with endpoint.producer() as client:
            props = client.get_partition_properties(partition_id)
    return PartitionSpan(
        partition_id=str(partition_id),
        beginning_sequence_number=int(props["beginning_sequence_number"]),
        last_enqueued_sequence_number=int(props["last_enqueued_sequence_number"]),
        is_empty=bool(props.get("is_empty")),
    )


def events_after(
    endpoint: EventHubsEndpoint,
    partition_id: str,
    after_sequence_number: int,
    end: int,
    *,
    consumer_group: str = "$Default",
    idle_timeout: float | None = None,
    shared: bool = True,
) -> Iterator[Any]:
    """
    SDK ``EventData`` of ``partition_id`` after ``after_sequence_number`` (``-1``: from the start) up to ``end``.

    Reads with a large prefetch, one link, on the process's shared connection to the hub (``shared``;
    ``False``: a connection of its own, as the SDK's consumer opens). ``idle_timeout``: raise
    :class:`ReadBackStalledError` when no event arrives for that long (``None``: wait as long as it takes).
    """
    if end <= after_sequence_number:
        return
    site = site_of(endpoint).during(f"reading partition {partition_id} back")
    with provider_errors(replace(site, consumer_group=consumer_group)):
        reader = PartitionReader(
            endpoint, consumer_group, partition_id, after_sequence_number,
            max_batch_size=1000, max_wait_time=0.2, prefetch=4000, shared=shared,
        )
        idle_since = time.monotonic()
        last = after_sequence_number
        try:
            for events in reader.batches():
                if not events:
                    if idle_timeout is not None and time.monotonic() - idle_since > idle_timeout:
                        raise ReadBackStalledError(str(partition_id), last, end, idle_timeout)
                    continue
                idle_since = time.monotonic()
                yield from events
                last = events[-1].sequence_number
                if last >= end:
                    return
        finally:
            reader.close()


@dataclass(frozen=True)
class ReadEvent:
    """One event as read back: partition, body bytes, properties (str keys and values), service sequence
    number, and content type (``avro/binary+<schema id>`` for a typed event; ``None`` when it has none)."""

    partition: str
    body: bytes
    properties: dict[str, Any]
    sequence_number: int
    content_type: str | None = None


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def read_partition(endpoint: EventHubsEndpoint, partition_id: str, consumer_group: str = "$Default", *,
                   shared: bool = True) -> list[ReadEvent]:
    """Every event of one partition, from its start to its end at the time of the call (``shared``: as
    :func:`events_after`'s)."""
    span = partition_span(endpoint, partition_id)
    if span.is_empty:
        return []
    return [
        ReadEvent(
            str(partition_id),
            b"".join(event.body),
            {_text(k): _text(v) for k, v in (event.properties or {}).items()},
            event.sequence_number,
            event.content_type,
        )
        for event in events_after(endpoint, partition_id, -1, span.last_enqueued_sequence_number,
                                  consumer_group=consumer_group, shared=shared)
    ]


def read_hub(endpoint: EventHubsEndpoint, consumer_group: str = "$Default", *, shared: bool = True) -> list[ReadEvent]:
    """Every event of every partition of the hub (partitions read in parallel), partition by partition in
    log order; ``shared``: all on the process's one connection to the hub, else a connection per
    partition (the SDK's way, the benchmarks' plain read)."""
    with held(endpoint) if shared else nullcontext():
        with provider_errors(site_of(endpoint).during("reading the hub's partition ids")):
            with endpoint.producer(retry_total=1) as client:  # a missing hub or refused key fails at once
                partition_ids = client.get_partition_ids()
        with ThreadPoolExecutor(max_workers=len(partition_ids)) as pool:
            futures = [pool.submit(read_partition, endpoint, p, consumer_group, shared=shared) for p in partition_ids]
            parts = [future.result() for future in futures]
    return [e for part in parts for e in part]


def duplicates(events: list[ReadEvent], key: str = "id") -> dict[Any, int]:
    """Values of ``key`` in JSON bodies that occur more than once."""
    counts = Counter(json.loads(e.body)[key] for e in events)
    return {k: n for k, n in counts.items() if n > 1}
