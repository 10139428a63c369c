"""Waiting for one event: read a hub until an event the filter keeps, or a deadline.

:func:`await_match` is the wait of ``EventHubAwaitEventSensor``: run by its trigger
(:class:`~airflow_provider_eh.triggers.event.EventHubAwaitEventTrigger`) when deferrable, and by the
sensor's own pokes when not. It reads through the event trigger's producer, so a partition starts
where the trigger's would (``start_after``, the group's checkpoint, ``start_at``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_eh.triggers.producer import EventHubBatchProducer


async def await_match(
    kwargs: Mapping[str, Any], keep: Callable[[dict[str, Any]], Any] | None, deadline: float | None,
    *, checkpoint: bool = False, since: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """
    Read until an event the filter keeps (any event without one) or ``deadline`` (POSIX time).

    The deadline applies once the hub was opened (a slow connection does not eat the wait).
    Returns ``{"status": "found", "event": record, "result": what the filter returned}`` or
    ``{"status": "timeout", "message": ..., "read_to": {partition: last sequence number read}}``; the
    message names the hub, the consumer group and how far each partition was read (from ``since``,
    ``{partition: sequence number}`` where an earlier read began, else from where this one began).
    With ``checkpoint`` the found event's partition is checkpointed at it (standard layout).

    :param kwargs: the trigger's serialised kwargs (:class:`~airflow_provider_eh.triggers.producer.HubReading`).
    """
    producer = EventHubBatchProducer(kwargs)
    stream = producer.open_stream()
    try:
        await producer.prepare()
        while True:
            left = None if deadline is None else deadline - time.time()
            if left is not None and left <= 0:
                break
            try:
                raw, _ = await asyncio.wait_for(anext(stream), timeout=left)
            except TimeoutError:
                break
            for record in raw["events"]:
                result = keep(record) if keep is not None else record
                if result:
                    if checkpoint:
                        await producer.write_checkpoints({record["partition"]: (record["sequence_number"], record["offset"])})
                    return {"status": "found", "event": record, "result": record if result is True else result}
        reading = producer.reading
        return {
            "status": "timeout",
            "message": f"no matching event in Event Hub {reading.eventhub_name!r} (consumer group "
            f"{reading.consumer_group!r}) before the deadline; read {producer.read_summary(since)}",
            "read_to": producer.read_to,
        }
    finally:
        await stream.aclose()
        await producer.aclose()
