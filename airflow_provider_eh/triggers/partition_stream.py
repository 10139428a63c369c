"""The partitions of one hub received into one queue, for the triggers (asyncio, the SDK's async consumer).

:class:`PartitionStream` opens one async consumer client per partition, each reading after a given
sequence number or enqueued time, and hands ``(partition, events)`` to one reader through
:meth:`PartitionStream.get`. The event trigger's producer reads its batches from it, and
:func:`~airflow_provider_eh.triggers.payload.read_events` reads a payload's events back with it.
A receiver's error comes out of ``get`` as what it means: the package's error for it from the one
error map (:mod:`airflow_provider_eh.client.failures`) at the stream's ``site`` (the connection, the
address, the consumer group), else :func:`receive_error`: an unknown consumer group is an argument
error, not a connection to retry for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from airflow_provider_eh.client.failures import FailureSite, provider_error
from airflow_provider_eh.errors import EventTriggerConfigError


def not_found(exc: BaseException) -> bool:
    """Whether the service (or the local endpoint) answered that an entity does not exist (``amqp:not-found``, 404)."""
    text = str(exc).lower()
    return "could not be found" in text or "amqp:not-found" in text


def receive_error(exc: BaseException, eventhub_name: str, consumer_group: str, partition_id: str) -> BaseException:
    """
    What a receiver's error means: a config error when the service says the consumer group does not exist.

    The service (and the local endpoint) refuses a receiver on an unknown consumer group with
    ``amqp:not-found`` naming ``<hub>/ConsumerGroups/<group>``; the SDK reports it as a connection
    error and would retry for ever. Any other error is returned unchanged.
    """
    text = str(exc)
    if not_found(exc) and "consumergroups" in text.lower():
        return EventTriggerConfigError(
            f"Event Hub {eventhub_name!r} has no consumer group {consumer_group!r} (partition {partition_id}: "
            f"{text.splitlines()[0] if text else type(exc).__name__}); create the consumer group on the hub "
            "(Azure portal, `az eventhubs eventhub consumer-group create`, or the local endpoint's admin API) "
            "or fix consumer_group"
        )
    return exc


class PartitionStream:
    """
    Receive several partitions after given sequence numbers (or enqueued times) into one queue (one client per partition).

    :param site: where a receiver's failure happens (its connection id, address and consumer group), for the
        error map; ``None``: errors as :func:`receive_error` words them.
    """

    def __init__(
        self, endpoint: Any, consumer_group: str, after: Mapping[str, int | datetime], *, max_batch_size: int = 300,
        site: FailureSite | None = None,
    ):
        self.endpoint, self.consumer_group, self.after = endpoint, consumer_group, dict(after)
        self.max_batch_size = max_batch_size
        self.site = site
        self.queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=8)
        self._clients: list[Any] = []
        self._tasks: list[asyncio.Task] = []

    async def __aenter__(self) -> PartitionStream:
        for pid, after in self.after.items():
            client = self.endpoint.async_consumer(self.consumer_group)
            self._clients.append(client)
            self._tasks.append(asyncio.create_task(self._receive(client, pid, after)))
        return self

    async def _receive(self, client: Any, pid: str, after: int | datetime) -> None:
        async def on_batch(_ctx: Any, events: list[Any]) -> None:
            if events:
                await self.queue.put((pid, list(events)))

        async def on_error(_ctx: Any, error: Exception) -> None:
            await self.queue.put((pid, self._error(error, pid)))

        position: Any = after
        if isinstance(after, int) and after < 0:
            position = "-1"  # the start of the partition
        try:
            await client.receive_batch(
                on_event_batch=on_batch, on_error=on_error, partition_id=pid,
                starting_position=position, starting_position_inclusive=False,
                max_batch_size=self.max_batch_size, max_wait_time=1.0,
                track_last_enqueued_event_properties=True,  # each batch's lag, from the stream itself
            )
        except Exception as exc:
            await self.queue.put((pid, self._error(exc, pid)))

    def _error(self, exc: BaseException, pid: str) -> BaseException:
        if self.site is not None:
            mapped = provider_error(exc, self.site)
            if mapped is not None:
                return mapped
        return receive_error(exc, self.endpoint.eventhub_name, self.consumer_group, pid)

    async def get(self, timeout: float) -> tuple[str, list[Any]] | None:
        """The next ``(partition, events)``; ``None`` when nothing arrived within ``timeout``; errors raise."""
        for task in self._tasks:
            if task.done() and self.queue.empty():
                raise RuntimeError(f"receiving stopped: {task.exception() or 'the link closed'}")
        try:
            pid, item = await asyncio.wait_for(self.queue.get(), timeout=max(timeout, 0.01))
        except TimeoutError:
            return None
        if isinstance(item, BaseException):
            raise item
        return pid, item

    async def __aexit__(self, *exc: Any) -> None:
        async def close(client: Any) -> None:
            try:
                await asyncio.wait_for(client.close(), timeout=10)
            except Exception:  # closing a link that failed to open
                pass

        await asyncio.gather(*(close(c) for c in self._clients))
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._clients, self._tasks = [], []
