"""Pull-style reading of partitions: batches handed over a bounded queue, at the caller's pace.

:class:`PartitionsReader` reads several partitions of one hub on **one receiving thread**: it opens
a link per partition and turns round them, as the SDK's own ``EventProcessor`` loop does, handing
each partition's batches to a queue shared with the caller (``(partition_id, batch | error | STOP)``).
The thread waits while the queue is full, so nothing is received far ahead of what the caller has
taken; the caller stops a partition, or all of them, by closing it. :class:`PartitionReader` is the
same over one partition, iterated with :meth:`PartitionReader.batches`.

Why links of our own rather than ``EventHubConsumerClient.receive_batch(partition_id=...)`` per
partition (the figures: ``bench/README.md``, "Design figures"):

- each ``receive_batch`` starts an ``EventProcessor`` whose receiving loop spins on the interpreter
  lock, doing nothing, until its load-balancing thread has listed the hub's partitions, a
  management request (the SDK polls each handshake frame every 50 ms): the partitions' loops burnt the
  lock while the links were not even open;
- one receiving thread per partition delivered fewer events per second than one thread turning round
  the links, the threads' hand-overs of the lock costing more than the parallel waits on the sockets saved.

The links come from ``EventHubConsumerClient``'s private receiver factory
(:func:`~airflow_provider_eh.client.sdk_internals.create_consumer`), the call the SDK's processor makes
for each partition it owns, driven with the consumer's ``receive(batch=True, ...)`` exactly as the
processor drives it (retries, reconnection after a lost link and ``owner_level`` steals are the
consumer's). Should an SDK release lack that call, the reader falls back to ``receive_batch`` on a
thread per partition, slower and otherwise the same.

With ``convert``, batches are the caller's own event objects, built on the receiving thread from
:class:`~airflow_provider_eh.client.received_fields.ReceivedFields`; on the direct links they are read straight
from the decoded AMQP messages, without the SDK's ``EventData`` (see :mod:`~airflow_provider_eh.client.received_fields`).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from airflow_provider_eh.client import sdk_internals
from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.received_fields import Converter, MessageFields, fields_of_event_data

log = logging.getLogger(__name__)

STOP = object()


def _position(after: int) -> Any:
    return "-1" if after < 0 else after


class PartitionsReader:
    """
    Batches of several partitions of one hub, each after its own sequence number, on one thread.

    :param endpoint: the hub.
    :param consumer_group: the consumer group to read as.
    :param starts: per partition id, read events after this sequence number (``-1``: from the start).
    :param sink: the queue items go to: ``(partition_id, batch)`` (a list of SDK ``EventData``, empty
        when ``max_wait_time`` passed idle), ``(partition_id, error)`` and, last for each partition,
        ``(partition_id, STOP)``.
    :param max_batch_size: events per batch at most, for every partition or per partition id.
    :param max_wait_time: seconds a partition's batch waits to fill before it is handed over smaller.
    :param prefetch: each link's prefetch count.
    :param owner_level: an epoch: the service disconnects readers of the same group with a lower one.
    :param direct: ``False`` reads through ``receive_batch`` on a thread per partition; ``None``
        (default) reads on one thread where the SDK allows it.
    :param convert: ``convert(partition_id, fields)`` makes each event of a batch; ``None``: batches
        are the SDK's ``EventData``.
    :param shared: open the links on the process's one connection to the hub
        (:meth:`EventHubsEndpoint.consumer`'s ``shared``); ``False``: a connection of their own.
    """

    def __init__(
        self,
        endpoint: EventHubsEndpoint,
        consumer_group: str,
        starts: Mapping[str, int],
        *,
        sink: queue.Queue[Any],
        max_batch_size: int | Mapping[str, int] = 500,
        max_wait_time: float = 5.0,
        prefetch: int | None = None,
        owner_level: int | None = None,
        direct: bool | None = None,
        convert: Converter | None = None,
        shared: bool = False,
    ):
        self.endpoint = endpoint
        self.consumer_group = consumer_group
        self.shared = shared
        self.starts = {str(p): int(after) for p, after in starts.items()}
        if isinstance(max_batch_size, Mapping):
            self.max_batch_size = {str(p): int(n) for p, n in max_batch_size.items()}
        else:
            self.max_batch_size = {p: int(max_batch_size) for p in self.starts}
        self.max_wait_time = max_wait_time
        self.prefetch = prefetch or max(300, 2 * max(self.max_batch_size.values(), default=1))
        self.owner_level = owner_level
        self.direct = direct
        self.convert = convert
        self._queue = sink
        self._stopping = threading.Event()
        self._closing: set[str] = set()  # partitions the caller closed, for the receiving thread to drop
        self._lock = threading.Lock()
        self._clients: dict[str, Any] = {}  # one client for all partitions when direct, else one each
        self._threads: list[threading.Thread] = []

    # -- the caller's side -----------------------------------------------------------------

    def start(self) -> PartitionsReader:
        """Open the links in the background."""
        if self._threads or not self.starts:
            return self
        first = self.endpoint.consumer(self.consumer_group, shared=self.shared)
        direct = self.direct if self.direct is not None else sdk_internals.can_create_consumers(first)
        if direct:
            self._clients = {"*": first}
            self._threads = [threading.Thread(target=self._run_direct, args=(first,), name="eh-receive", daemon=True)]
        else:
            for i, p in enumerate(self.starts):
                client = first if i == 0 else self.endpoint.consumer(self.consumer_group, shared=self.shared)
                self._clients[p] = client
                self._threads.append(
                    threading.Thread(target=self._run_public, args=(client, p), name=f"eh-receive-{p}", daemon=True)
                )
        for thread in self._threads:
            thread.start()
        return self

    def close_partition(self, partition_id: str) -> None:
        """Stop receiving ``partition_id`` (its link is detached by the receiving thread)."""
        partition_id = str(partition_id)
        with self._lock:
            self._closing.add(partition_id)
            client = self._clients.pop(partition_id, None)  # the fallback's own client
        if client is not None:
            _close_in_background(client, partition_id)

    def close(self, wait: bool = False) -> None:
        """Stop receiving every partition; the links are detached in the background unless ``wait``."""
        self._stopping.set()
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        threads, self._threads = self._threads, []

        def shut() -> None:
            for thread in threads:
                thread.join(timeout=10)
            for client in clients:
                _close_quietly(client)

        if wait:
            shut()
        else:
            threading.Thread(target=shut, name="eh-receive-close", daemon=True).start()

    # -- the receiving side ----------------------------------------------------------------

    def _put(self, partition_id: str, item: Any) -> None:
        while not self._stopping.is_set() and partition_id not in self._closing:
            try:
                self._queue.put((partition_id, item), timeout=0.2)
                return
            except queue.Full:
                continue

    def _on_batch(self, partition_id: str) -> Any:
        """The callback for a batch of SDK ``EventData``."""
        convert = self.convert

        def deliver(events: Any) -> None:
            events = list(events)
            self._put(partition_id, events if convert is None else [convert(partition_id, fields_of_event_data(e))
                                                                      for e in events])
        return deliver

    def _on_messages(self, partition_id: str) -> Any:
        """The callback for a batch of decoded AMQP messages (see :func:`_hand_over_messages`)."""
        convert = self.convert
        assert convert is not None
        fields = MessageFields(f"partition {partition_id} of {self.endpoint.eventhub_name!r}")

        def deliver(messages: Any) -> None:
            self._put(partition_id, [convert(partition_id, f) for f in fields.many(messages)])
        return deliver

    def _run_direct(self, client: Any) -> None:
        consumers: dict[str, Any] = {}
        ended: set[str] = set()
        try:
            for p, after in self.starts.items():
                consumer = sdk_internals.create_consumer(
                    client, self.consumer_group, p, _position(after), self._on_batch(p),
                    event_position_inclusive=False, owner_level=self.owner_level, prefetch=self.prefetch,
                )
                if self.convert is not None:
                    sdk_internals.hand_over_messages(consumer, self._on_messages(p))
                consumers[p] = consumer
            failures = {p: _Failures(consumer, client) for p, consumer in consumers.items()}
            while consumers and not self._stopping.is_set():
                for p in list(consumers):
                    if p in self._closing:
                        _close_quietly(consumers.pop(p))
                        continue
                    try:
                        consumers[p].receive(
                            batch=True, max_batch_size=self.max_batch_size[p], max_wait_time=self.max_wait_time
                        )
                        failures[p].check()
                    except Exception as exc:  # the consumer's retries are spent: the caller decides
                        _close_quietly(consumers.pop(p))
                        self._put(p, exc)
                        self._put(p, STOP)
                        ended.add(p)
        except Exception as exc:  # a link could not even be created: every partition hears of it
            for p in self.starts:
                if p not in ended:
                    self._put(p, exc)
        finally:
            for consumer in consumers.values():
                _close_quietly(consumer)
            for p in self.starts:
                if p not in ended:
                    self._put(p, STOP)

    def _run_public(self, client: Any, partition_id: str) -> None:
        kwargs: dict[str, Any] = {}
        if self.owner_level is not None:
            kwargs["owner_level"] = self.owner_level
        try:
            deliver = self._on_batch(partition_id)
            client.receive_batch(
                on_event_batch=lambda _ctx, events: deliver(events),
                on_error=lambda _ctx, error: self._put(partition_id, error),
                partition_id=partition_id,
                starting_position=_position(self.starts[partition_id]),
                starting_position_inclusive=False,
                max_batch_size=self.max_batch_size[partition_id],
                max_wait_time=self.max_wait_time,
                prefetch=self.prefetch,
                **kwargs,
            )
        except Exception as exc:  # the caller re-raises it
            self._put(partition_id, exc)
        finally:
            self._put(partition_id, STOP)


class LastEnqueued:
    """A partition's last enqueued event as the hub reported it with a delivery (the receiver runtime metric).

    :param sequence_number: the partition's last enqueued sequence number.
    """

    __slots__ = ("sequence_number",)
    _SEQUENCE = b"last_enqueued_sequence_number"

    def __init__(self, sequence_number: int):
        self.sequence_number = sequence_number

    @classmethod
    def of(cls, message: Any) -> LastEnqueued | None:
        """From a received AMQP message's delivery annotations; ``None`` where the hub sent none."""
        annotations = getattr(message, "delivery_annotations", None)
        if not annotations:
            return None
        sequence = annotations.get(cls._SEQUENCE)
        return cls(sequence) if isinstance(sequence, int) else None

    def lag(self, after: int) -> int:
        """Events enqueued after sequence number ``after`` (0 when none)."""
        return max(0, self.sequence_number - after)


class PartitionReader:
    """
    Batches of one partition, after a sequence number: a :class:`PartitionsReader` of one.

    :param endpoint: the hub.
    :param consumer_group: the consumer group to read as.
    :param partition_id: the partition.
    :param after_sequence_number: read events after this one; ``-1`` reads from the start of the partition.
    :param max_batch_size: events per batch at most.
    :param max_wait_time: seconds the SDK waits before handing over a smaller (possibly empty) batch.
    :param prefetch: the link's prefetch count.
    :param owner_level: an epoch: the service disconnects readers of the same group with a lower one.
    :param convert: as :class:`PartitionsReader`'s.
    :param shared: as :class:`PartitionsReader`'s.
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
        direct: bool | None = None,
        convert: Converter | None = None,
        shared: bool = False,
    ):
        self.partition_id = str(partition_id)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=2)
        self._reader = PartitionsReader(
            endpoint, consumer_group, {self.partition_id: after_sequence_number}, sink=self._queue,
            max_batch_size=max_batch_size, max_wait_time=max_wait_time, prefetch=prefetch,
            owner_level=owner_level, direct=direct, convert=convert, shared=shared,
        )

    def start(self) -> PartitionReader:
        self._reader.start()
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
        self._reader.close(wait=wait)


class _Failures:
    """
    The errors of one consumer's link, counted across ``receive`` calls.

    ``EventHubConsumer.receive`` retries within one call only: an error that arrives while the link
    opens (an attach the service refuses: no such partition or consumer group) closes the handler,
    and the call returns as if nothing had been received, so a loop of calls would reopen the link
    for ever. The SDK's processor reports such errors to ``on_error`` and reopens; this reader raises
    the error once ``max_retries`` + 1 of them came in a row with no event in between (the client's
    retry budget, counted the way the SDK counts it within a call).
    """

    def __init__(self, consumer: Any, client: Any):
        self._consumer = consumer
        self._budget = sdk_internals.client_max_retries(client) + 1
        self._in_a_row = 0
        self._last: BaseException | None = None
        self._buffered = sdk_internals.buffered_count(consumer)

        def recording(handle: Any) -> Any:
            def recorded(exception: BaseException, **kwargs: Any) -> Any:
                self._in_a_row += 1
                try:
                    mapped = handle(exception, **kwargs)
                except BaseException as raised:  # the SDK raises what it will not retry
                    self._last = raised
                    raise
                self._last = mapped if isinstance(mapped, BaseException) else exception
                return mapped
            return recorded

        def counting(delivered: Any) -> Any:
            def on_events(events: Any) -> None:
                if events:
                    self._in_a_row = 0
                delivered(events)
            return on_events

        sdk_internals.wrap_consumer_errors(consumer, recording)
        sdk_internals.wrap_consumer_delivery(consumer, counting)

    def check(self) -> None:
        """Raise the last error once the link has failed ``max_retries`` + 1 times in a row."""
        if self._in_a_row >= self._budget and self._last is not None and not self._buffered():
            raise self._last


def _close_quietly(handle: Any) -> None:
    try:
        handle.close()
    except Exception:  # closing a client or link that failed to open
        log.debug("closing %r failed", handle, exc_info=True)


def _close_in_background(client: Any, partition_id: str) -> None:
    threading.Thread(target=_close_quietly, args=(client,), name=f"eh-receive-close-{partition_id}", daemon=True).start()
