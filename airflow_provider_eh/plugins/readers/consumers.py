"""Consumer groups as the view shows them: found in the checkpoint container, each partition's checkpoint and lag.

Checkpoints are read through :class:`~airflow_provider_eh.checkpoints.blob_layout.CheckpointReader`,
whichever SDK wrote them; the lag in time comes from :mod:`~airflow_provider_eh.plugins.readers.lag`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_provider_eh.errors import CheckpointStoreError
from airflow_provider_eh.plugins.readers.lag import first_unprocessed_times, lag_events, lag_seconds
from airflow_provider_eh.plugins.readers.reading import CONTAINER_HINT, Reading, iso, partition_sort_key, read_failure


def consumer_row(partition: str, last_enqueued: int, checkpoint: Any, owner: Any,
                 first_unprocessed: datetime | None, now: datetime) -> dict[str, Any]:
    """One partition of one consumer group: checkpointed and last enqueued sequence numbers, lag in events and time."""
    seq = checkpoint.sequence_number if checkpoint else None
    behind = lag_events(last_enqueued, seq)
    return {
        "partition": partition, "checkpointed": seq, "last_enqueued": last_enqueued, "lag_events": behind,
        "lag_seconds": lag_seconds(behind, first_unprocessed, now),
        "oldest_unprocessed_enqueued_at": iso(first_unprocessed) if behind else None,
        "checkpointed_at": iso(checkpoint.last_modified if checkpoint else None),
        "owner": owner.owner_id if owner else None,
    }


def consumer_groups(
    reading: Reading, props: Mapping[str, Mapping[str, Any]], now: datetime | None = None
) -> list[dict[str, Any]]:
    """Per consumer group and partition: checkpointed and last enqueued sequence numbers, lag in events and time."""
    from airflow_provider_eh.checkpoints.blob_layout import CheckpointReader

    source = reading.source
    if not source.checkpoint_container:
        return []
    now = now or datetime.now(UTC)
    endpoint = reading.endpoint
    container = reading.container(source.checkpoint_container)
    what = f"reading checkpoints in container {source.checkpoint_container!r} (connection {source.wasb_conn_id!r})"
    try:
        reader = CheckpointReader(container, endpoint.fully_qualified_namespace, endpoint.eventhub_name)
        # one listing of the hub's blobs for every group, found or named
        reads = {read.consumer_group.lower(): read for read in reader.read_hub(list(source.consumer_groups) or None)}
    except Exception as exc:
        cause = exc.__cause__ if isinstance(exc, CheckpointStoreError) and exc.__cause__ is not None else exc
        raise read_failure(what, cause, reading.blob_site(source.checkpoint_container, "checkpoint_container",
                                                          "checkpoints"), CONTAINER_HINT) from None
    positions = set()
    for read in reads.values():
        for pid, prop in props.items():
            seq = read.sequence_number(pid)
            if lag_events(prop["last_enqueued_sequence_number"], seq) > 0:
                positions.add((pid, -1 if seq is None else seq))
    times = first_unprocessed_times(endpoint, source.lag_consumer_group, positions)
    out = []
    for read in reads.values():
        rows = []
        for pid in sorted(props, key=partition_sort_key):
            seq = read.sequence_number(pid)
            rows.append(consumer_row(
                pid, props[pid]["last_enqueued_sequence_number"], read.checkpoints.get(pid), read.ownership.get(pid),
                times.get((pid, -1 if seq is None else seq)), now,
            ))
        out.append({"consumer_group": read.consumer_group, "partitions": rows})
    return out
