"""Recovery's read-back: which of a batch's producer sequence numbers landed on a partition.

Reads one partition from the pending intent's start point (exclusive) to the end it has now (with
:mod:`airflow_provider_eh.client.readback`) and keeps the stamps of our group and batch. Bounded by
the in-doubt batch (one writer per group and partition), not by the partition's size.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.readback import ReadBackStalledError, events_after, partition_span
from airflow_provider_eh.errors import InvalidProducerStateError, ProducerDisconnectedError
from airflow_provider_eh.stamps import read_stamp

log = logging.getLogger(__name__)


def partition_end(client: Any, partition_id: str) -> int:
    """The partition's last service sequence number now, through an open producer ``client``.

    The one reading of "where the partition ends" the protocol compares: an intent records it as its
    start point, a send report as the service's end after the send, and a Spark send task checks
    against it whether its plan was sent before.
    """
    return int(client.get_partition_properties(partition_id)["last_enqueued_sequence_number"])


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
    span = partition_span(endpoint, partition_id)
    end, begin = span.last_enqueued_sequence_number, span.beginning_sequence_number
    if span.is_empty or end <= after_sequence_number:
        return {}
    if begin > after_sequence_number + 1:
        raise InvalidProducerStateError(
            f"partition {partition_id}: recovery of batch {batch_stamp} (group {group!r}) must read from sequence "
            f"number {after_sequence_number + 1}, but retention already removed events up to {begin - 1}; what "
            "landed cannot be proven. Publish with a new generation, and make retention longer than retry delays."
        )
    found: dict[int, int] = {}
    try:
        for event in events_after(endpoint, partition_id, after_sequence_number, end,
                                  consumer_group=consumer_group, idle_timeout=idle_timeout):
            stamp = read_stamp(event.properties)
            if stamp is not None and stamp[0] == group and stamp[2] == batch_stamp:
                found[stamp[1]] = event.sequence_number
    except ReadBackStalledError as exc:
        raise ProducerDisconnectedError(
            f"partition {partition_id}: recovery read of batch {batch_stamp} stalled at sequence number {exc.last} "
            f"of {end}; retry."
        ) from exc
    log.info(
        "group %s partition %s batch %s: read back %s..%s, %d events of the batch landed",
        group, partition_id, batch_stamp, after_sequence_number + 1, end, len(found),
    )
    return found
