"""The event trigger's batches: received events gathered by count and by time.

A batch is handed over at ``size`` records or ``window`` seconds after its first record, whichever
comes first; each batch the filter keeps something of becomes one asset event.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from airflow_provider_eh.client.typed_events import AsyncTypedDecoder
from airflow_provider_eh.triggers.payload import decoded_record


async def gather_batches(
    get: Callable[[float], Any], read_to: dict[str, int], size: int, window: float,
    *, clock: Callable[[], float] = time.monotonic, decoder: AsyncTypedDecoder | None = None,
) -> AsyncIterator[list[dict[str, Any]]]:
    """
    Batches of event records from ``get(timeout)`` (``(partition, [EventData])`` or ``None`` when idle):
    a batch is handed over at ``size`` records or ``window`` seconds (by ``clock``) after its first
    record. ``read_to`` (partition -> last sequence number seen) is updated and drops what a reconnect
    delivers again. Typed events are decoded by ``decoder`` as they are read
    (:func:`~airflow_provider_eh.triggers.payload.decoded_record`).
    """
    pending: list[dict[str, Any]] = []
    started = 0.0
    while True:
        left = window if not pending else started + window - clock()
        item = await get(max(left, 0.0))
        if item is not None:
            pid, events = item
            fresh = [e for e in events if e.sequence_number > read_to.get(pid, -1)]
            if fresh and not pending:
                started = clock()
            for e in fresh:
                pending.append(await decoded_record(e, pid, decoder))
                read_to[pid] = int(e.sequence_number)
        while pending and (len(pending) >= size or clock() - started >= window):
            batch, pending = pending[:size], pending[size:]
            started = clock()
            yield batch
