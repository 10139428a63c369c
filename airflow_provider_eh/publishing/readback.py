"""Recovery's read-back: which of a batch's producer sequence numbers landed on a partition.

Reads one partition from the pending intent's start point (exclusive) to the end it has now, with a
large prefetch, and keeps the stamps of our group and batch. Bounded by the in-doubt batch (one
writer per group and partition), not by the partition's size.
"""

from __future__ import annotations

import logging
import time

from airflow_provider_eh.endpoint import EventHubsEndpoint
from airflow_provider_eh.errors import InvalidProducerStateError, ProducerDisconnectedError
from airflow_provider_eh.ingest.receive import PartitionReader
from airflow_provider_eh.publishing.stamps import read_stamp

log = logging.getLogger(__name__)


def landed_stamps(
    endpoint: EventHubsEndpoint,
    partition_id: str,
    *,
    after_sequence_number: int,
    group: str,
    batch_stamp: str,
    consumer_group: str = "$Default",
    idle_timeout: float = 60.0,
) -> dict[int, int]:
    """
    ``{producer seq: service sequence number}`` of the events of ``(group, batch_stamp)`` on the partition
    after ``after_sequence_number``, up to the partition's current end.

    :raises InvalidProducerStateError: when retention already trimmed events after the start point.
    """
    with endpoint.producer() as client:
        props = client.get_partition_properties(partition_id)
    end = int(props["last_enqueued_sequence_number"])
    begin = int(props["beginning_sequence_number"])
    if props.get("is_empty") or end <= after_sequence_number:
        return {}
    if begin > after_sequence_number + 1:
        raise InvalidProducerStateError(
            f"partition {partition_id}: recovery of batch {batch_stamp} (group {group!r}) must read from sequence "
            f"number {after_sequence_number + 1}, but retention already removed events up to {begin - 1}; what "
            "landed cannot be proven. Publish with a new generation, and make retention longer than retry delays."
        )
    found: dict[int, int] = {}
    reader = PartitionReader(
        endpoint, consumer_group, partition_id, after_sequence_number,
        max_batch_size=1000, max_wait_time=0.2, prefetch=4000,
    )
    idle_since = time.monotonic()
    last = after_sequence_number
    for events in reader.batches():
        if not events:
            if time.monotonic() - idle_since > idle_timeout:
                reader.close()
                raise ProducerDisconnectedError(
                    f"partition {partition_id}: recovery read of batch {batch_stamp} stalled at sequence number {last} "
                    f"of {end}; retry."
                )
            continue
        idle_since = time.monotonic()
        for event in events:
            stamp = read_stamp(event.properties)
            if stamp is not None and stamp[0] == group and stamp[2] == batch_stamp:
                found[stamp[1]] = event.sequence_number
        last = events[-1].sequence_number
        if last >= end:
            break
    reader.close()
    log.info(
        "group %s partition %s batch %s: read back %s..%s, %d events of the batch landed",
        group, partition_id, batch_stamp, after_sequence_number + 1, end, len(found),
    )
    return found
