"""Pull-style reading of one partition with the SDK's public consumer API.

``EventHubConsumerClient.receive_batch`` pushes batches to a callback and blocks until the client is
closed. :class:`PartitionReader` runs it on a thread and hands each batch over a small bounded queue,
so the caller pulls batches at its own pace (the callback waits while the caller commits; nothing is
received far ahead of what is committed) and stops by closing the client. Readers of several
partitions may share one queue (``sink``): their links then receive in parallel while one thread
commits whichever batch is ready.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any

from airflow_provider_eh.client.endpoint import EventHubsEndpoint

log = logging.getLogger(__name__)

STOP = object()


class PartitionReader:
    """
    Batches of one partition, after a sequence number.

    :param endpoint: the hub.
    :param consumer_group: the consumer group to read as.
    :param partition_id: the partition.
    :param after_sequence_number: read events after this one; ``-1`` reads from the start of the partition.
    :param max_batch_size: events per batch at most.
    :param max_wait_time: seconds the SDK waits before handing over a smaller (possibly empty) batch.
    :param prefetch: the link's prefetch count.
    :param owner_level: an epoch: the service disconnects readers of the same group with a lower one.
    :param sink: a queue shared with other readers; items are ``(partition_id, batch | error | STOP)``.
    """

    def __init__(
        self,
        endpoint: EventHubsEndpoint,
        consumer_group: str,
        partition_id: str,
        after_sequence_number: int,
        *,
        max_batch_size: int = 500,
        max_wait_time: float = 5.0,
        prefetch: int | None = None,
        owner_level: int | None = None,
        sink: queue.Queue[Any] | None = None,
    ):
        self.endpoint = endpoint
        self.consumer_group = consumer_group
        self.partition_id = str(partition_id)
        self.after = int(after_sequence_number)
        self.max_batch_size = max_batch_size
        self.max_wait_time = max_wait_time
        self.prefetch = prefetch or max(300, 2 * max_batch_size)
        self.owner_level = owner_level
        self._queue: queue.Queue[Any] = sink if sink is not None else queue.Queue(maxsize=2)
        self._stopping = threading.Event()
        self._client: Any = None
        self._thread: threading.Thread | None = None

    def _put(self, item: Any) -> None:
        while not self._stopping.is_set():
            try:
                self._queue.put((self.partition_id, item), timeout=0.2)
                return
            except queue.Full:
                continue

    def _run(self) -> None:
        kwargs: dict[str, Any] = {}
        if self.owner_level is not None:
            kwargs["owner_level"] = self.owner_level
        try:
            self._client.receive_batch(
                on_event_batch=lambda _ctx, events: self._put(list(events)),
                on_error=lambda _ctx, error: self._put(error),
                partition_id=self.partition_id,
                starting_position="-1" if self.after < 0 else self.after,
                starting_position_inclusive=False,
                max_batch_size=self.max_batch_size,
                max_wait_time=self.max_wait_time,
                prefetch=self.prefetch,
                **kwargs,
            )
        except Exception as exc:  # the caller re-raises it
            self._put(exc)
        finally:
            self._put(STOP)

    def start(self) -> PartitionReader:
        """Open the link in the background (readers of several partitions open in parallel)."""
        if self._thread is None:
            self._client = self.endpoint.consumer(self.consumer_group)
            self._thread = threading.Thread(
                target=self._run, name=f"eh-ingest-receive-{self.partition_id}", daemon=True
            )
            self._thread.start()
        return self

    def batches(self) -> Iterator[list[Any]]:
        """SDK ``EventData`` lists in partition order; an empty list when ``max_wait_time`` passed idle."""
        self.start()
        try:
            while True:
                _, item = self._queue.get()
                if item is STOP:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.close()

    def close(self, wait: bool = False) -> None:
        """Stop receiving; the link is detached in the background unless ``wait``."""
        self._stopping.set()
        client, thread, self._client, self._thread = self._client, self._thread, None, None

        def shut() -> None:
            if client is not None:
                try:
                    client.close()
                except Exception:  # closing a client that failed to open
                    log.debug("closing the consumer of partition %s failed", self.partition_id, exc_info=True)
            if thread is not None:
                thread.join(timeout=10)

        if wait:
            shut()
        else:
            threading.Thread(target=shut, name=f"eh-ingest-close-{self.partition_id}", daemon=True).start()
