"""Draining partitions: what the links received ahead taken into batches, and each partition's range.

A run drains its owned partitions' ``(after, target]`` ranges on parallel links, which receive
ahead into one bounded queue while a batch commits. :class:`Arrivals` is that queue with what was
taken off it but not used yet: a transaction takes the chunks of its partition that are already
waiting, within ``batch_size`` and ``batch_bytes``, and keeps every partition's order.
:class:`Drain` holds each partition's range (what is committed, the target), which partitions are
still received, and when each last delivered an event; it turns the next item into the events to
commit, raising a receive error or a partition that stalled. The run commits them
(:meth:`~airflow_provider_eh.ingest.runner.IngestRun.run`).
"""

from __future__ import annotations

import logging
import queue
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from airflow_provider_eh.client.partition_readers import STOP
from airflow_provider_eh.errors import IngestStalledError
from airflow_provider_eh.ingest.events import IngestEvent

log = logging.getLogger(__name__)


def _size(events: list[IngestEvent]) -> int:
    return sum([len(e.body) for e in events])  # a list, not a generator: half the cost per event


class Arrivals:
    """
    What the links delivered, in arrival order: the reader's queue, and the items taken off it while
    filling a batch but not put in it (another partition's, or what did not fit), which come first.

    :param sink: the reader's queue of ``(partition, chunk | error | STOP)``.
    :param batch_size: events per batch at most; ``None``: bounded by ``batch_bytes`` only.
    :param batch_bytes: event bodies per batch at most.
    """

    def __init__(self, sink: queue.Queue[Any], *, batch_size: int | None, batch_bytes: int):
        self.sink = sink
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self.held: deque[tuple[str, Any]] = deque()

    def next(self) -> tuple[str, Any]:
        """The next item: a held one first, else the reader's next (waiting for it)."""
        return self.held.popleft() if self.held else self.sink.get()

    def _fits(self, events: list[IngestEvent], size: int, more: list[IngestEvent], more_size: int) -> bool:
        if self.batch_size is not None and len(events) + len(more) > self.batch_size:
            return False
        return size + more_size <= self.batch_bytes

    def fill(self, partition_id: str, events: list[IngestEvent]) -> bool:
        """
        Add to ``events`` the chunks of ``partition_id`` already waiting, in order, while the batch has
        room; whether any joined. The first of its items that does not join (a chunk too large, an
        error, its end) ends the filling, so nothing after it joins either; the rest is held.
        """
        taken = list(self.held)
        self.held.clear()
        while len(taken) < self.sink.maxsize:
            try:
                taken.append(self.sink.get_nowait())
            except queue.Empty:
                break
        size = _size(events)
        room = True
        joined = False
        for q, item in taken:
            if room and q == partition_id and isinstance(item, list) and item:
                item_size = _size(item)
                if self._fits(events, size, item, item_size):
                    events.extend(item)
                    size += item_size
                    joined = True
                    continue
                room = False
            elif q == partition_id:
                room = False  # keep the partition's order: nothing after this item joins the batch
            self.held.append((q, item))
        return joined


class Drain:
    """
    The partitions of one drain: each one's range, whether it is still received, and when it last
    delivered an event.

    :param ranges: per partition, ``(after, target)``: its checkpoint and the run's bound.
    :param arrivals: what the links delivered.
    :param close_partition: stops receiving a partition (the reader's ``close_partition``).
    :param stall_timeout: seconds a partition may deliver nothing before :class:`IngestStalledError`.
    :param hub: the hub's name, for messages.
    :param owner_id: this instance's id, for log lines.
    :param clock: monotonic seconds.
    """

    def __init__(
        self, ranges: Mapping[str, tuple[int, int]], arrivals: Arrivals, *, close_partition: Callable[[str], None],
        stall_timeout: float, hub: str, owner_id: str, clock: Callable[[], float] = time.monotonic,
    ):
        self.after = {p: after for p, (after, _) in ranges.items()}  # the last sequence number committed
        self.targets = {p: target for p, (_, target) in ranges.items()}
        self.receiving = set(ranges)
        self.arrivals = arrivals
        self.stall_timeout = stall_timeout
        self.hub = hub
        self.owner_id = owner_id
        self._close_partition = close_partition
        self._clock = clock
        self._delivered_at = {p: clock() for p in ranges}
        self._taken: dict[str, int] = {}  # partition -> the last sequence number taken

    def take(self) -> tuple[str, list[IngestEvent]] | None:
        """
        The next item the links delivered as ``(partition, events to commit)``: the partition's events
        within its range, with its waiting chunks that fit the batch (none after an idle wait); ``None``
        for an item that asks nothing (a stopped partition's, or the end of one). A receive error is
        raised, and :class:`IngestStalledError` for a partition idle for longer than ``stall_timeout``.
        """
        p, item = self.arrivals.next()
        if p not in self.receiving:
            return None  # a batch a closed link had already queued
        if item is STOP:
            self.receiving.discard(p)
            return None
        if isinstance(item, BaseException):
            raise item
        events = list(item)
        if not events:
            self._check_stall(p)
        else:
            self._delivered_at[p] = self._clock()
            if self.arrivals.fill(p, events):
                self._delivered_at[p] = self._clock()
        after = self.after[p]
        # what was taken but is not committed yet (held by a Gathering) counts as delivered
        delivered = max(after, self._taken.get(p, after))
        if events and events[0].sequence_number > delivered + 1:
            log.warning(
                "Instance %s: partition %s resumes at seq %d but its %s %d: events %d-%d are no "
                "longer in the hub (retention) and were never ingested",
                self.owner_id, p, events[0].sequence_number,
                "checkpoint is" if delivered == after else "last event received was", delivered, delivered + 1,
                events[0].sequence_number - 1,
            )
        if not events:
            return p, events
        self._taken[p] = last = events[-1].sequence_number
        target = self.targets[p]
        if after < events[0].sequence_number and last <= target:  # in order: all of them within the range
            return p, events
        return p, [e for e in events if after < e.sequence_number <= target]

    def _check_stall(self, partition_id: str) -> None:
        if self._clock() - self._delivered_at[partition_id] > self.stall_timeout:
            raise IngestStalledError(
                f"Partition {partition_id!r} of {self.hub!r}: no event after seq {self.after[partition_id]} for "
                f"{self.stall_timeout:.0f} s although seq {self.targets[partition_id]} was enqueued when the run "
                "started. Check the hub's retention and that the consumer group exists; a retry resumes from the "
                "SQL checkpoint."
            )

    def committed(self, partition_id: str, last: int) -> None:
        """The partition committed up to ``last``; it stops at its target."""
        self.after[partition_id] = last
        if last >= self.targets[partition_id]:
            self.stop(partition_id)

    def stop(self, partition_id: str) -> None:
        """Stop receiving a partition (its items still queued are then dropped)."""
        if partition_id in self.receiving:
            self.receiving.discard(partition_id)
            self._close_partition(partition_id)


class Gathering:
    """
    Events taken from the links, held per partition until a batch is worth a commit: one commit per partition
    at most every ``seconds``, sooner when it reaches ``batch_size`` events or ``batch_bytes``, or the partition's
    target (a Delta table wants few, large commits; ``seconds`` 0: every take is a batch, as the SQL sinks do).

    :param seconds: how long a partition's first held event waits for more.
    :param batch_size: events per batch at most (``None``: no count bound).
    :param batch_bytes: event bodies per batch that make it due.
    :param clock: monotonic seconds.
    """

    def __init__(self, seconds: float, batch_size: int | None, batch_bytes: int, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self._clock = clock
        self._held: dict[str, tuple[float, list[IngestEvent], int]] = {}  # partition -> (since, events, bytes)

    def add(self, partition_id: str, events: list[IngestEvent]) -> None:
        since, held, size = self._held.get(partition_id) or (self._clock(), [], 0)
        held.extend(events)
        self._held[partition_id] = (since, held, size + _size(events))

    def _is_due(self, since: float, events: list[IngestEvent], size: int, target: int | None, receiving: bool) -> bool:
        if self.seconds <= 0 or not receiving or self._clock() - since >= self.seconds:
            return True
        if self.batch_size is not None and len(events) >= self.batch_size:
            return True
        return size >= self.batch_bytes or (target is not None and events[-1].sequence_number >= target)

    def due(self, targets: Mapping[str, int], receiving: Collection[str]) -> Iterator[tuple[str, list[IngestEvent]]]:
        """The partitions whose held events make a batch now, each with them (no longer held), in batches of at most
        ``batch_size`` events."""
        for p, (since, events, size) in list(self._held.items()):
            if not self._is_due(since, events, size, targets.get(p), p in receiving):
                continue
            del self._held[p]
            step = self.batch_size or len(events)
            for i in range(0, len(events), step):
                yield p, events[i:i + step]

    def rest(self) -> Iterator[tuple[str, list[IngestEvent]]]:
        """Everything still held (the links ended)."""
        held, self._held = self._held, {}
        for p, (_, events, _) in held.items():
            yield p, events
