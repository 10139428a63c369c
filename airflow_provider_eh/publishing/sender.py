"""Sending one partition's events for a plan: the part that runs where the data is (a Spark executor).

``send_partition`` needs only the endpoint and the picklable plan, never the state store. It walks
the batch's events once, in index order: every event feeds the fingerprint, and the events the plan
lists are stamped with consecutive producer sequence numbers and sent in SDK batches no larger than
the link's maximum message size, or than the plan's ``lease_only_batch_bytes`` where the send is
fenced by the claim's lease alone (:mod:`~airflow_provider_eh.publishing.in_flight`). It returns a
:class:`SendReport` that the driver commits.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from azure.eventhub import EventData

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.fencing import HUB, LEASE, FencedLink, fenced_error, open_fenced, unfence
from airflow_provider_eh.errors import EventTooLargeError
from airflow_provider_eh.publishing.batching import add_encoded, add_event, fast_path_available, tracing_enabled
from airflow_provider_eh.publishing.fingerprint import Fingerprint
from airflow_provider_eh.publishing.in_flight import batch_cap, bound_in_force
from airflow_provider_eh.publishing.landed import partition_end
from airflow_provider_eh.publishing.records import from_ranges
from airflow_provider_eh.publishing.rulebook import OutgoingEvent
from airflow_provider_eh.publishing.wire import StampedMessageEncoder, StampEncoder, set_stamps
from airflow_provider_eh.steps import reached

if TYPE_CHECKING:
    from azure.eventhub import EventHubProducerClient

    from airflow_provider_eh.publishing.plan import PartitionPlan

log = logging.getLogger(__name__)

PROGRESS_EVERY = 10.0


@dataclass(frozen=True)
class SendReport:
    """What one partition's send did: events seen, sent, their fingerprint, and the service's end after it."""

    partition_id: str
    batch_id: str
    event_count: int
    fingerprint: str
    sent: int
    service_last_sequence_number: int
    seconds: float
    fencing: str = LEASE  # "hub": sent on an idempotent-producer link; "lease": the claim's deadline alone
    lease_only_batch_bytes: int | None = None  # under "lease": the most bytes of one SDK batch; None under "hub"


def _pairs(events: Iterable[Any]) -> Iterable[tuple[bytes, Any]]:
    for event in events:
        if isinstance(event, OutgoingEvent):
            yield event.body, event.properties
        else:
            body, props = event
            yield body, props


def _message_path(group: str, stamp: str, owner: int, fast: bool, fence: FencedLink | None = None,
                  content_type: str | None = None,
                  ) -> tuple[Callable[[bytes, Any, int], Any], Callable[[Any, Any], None]]:
    """``(make, add)``: build one stamped message and add it to an SDK batch (``ValueError`` when full).

    Straight AMQP bytes (:mod:`~airflow_provider_eh.publishing.wire`) when the SDK's layout was proven
    and no tracer needs per-message properties; otherwise ``EventData`` through the SDK's encoder.
    On a fenced link each message also carries the hub's producer annotations, numbered in the order
    the messages are made (each is made once, and sent in that order). A typed batch's ``content_type``
    (the schema id in it) goes on each message, either way.
    """
    encoder = (StampedMessageEncoder.create(group, stamp, owner, annotated=fence is not None, content_type=content_type)
               if fast and not tracing_enabled() else None)
    if encoder is not None:
        if fence is None:
            return encoder.encode, add_encoded
        encode = encoder.encode

        def make_fenced(body: bytes, props: Any, seq: int) -> bytes:
            return encode(body, props, seq, fence.annotation_bytes(fence.take()))

        return make_fenced, add_encoded
    stamps = StampEncoder(group, stamp, owner)

    def make(body: bytes, props: Any, seq: int) -> EventData:
        event = EventData(body)
        if content_type is not None:
            event.content_type = content_type
        set_stamps(event, stamps.properties(props, seq), None if fence is None else fence.annotations(fence.take()))
        return event

    return make, functools.partial(add_event, fast=fast)


class EventWalk:
    """
    The batch's events of one partition walked once in index order: every one feeds the fingerprint
    and the count; :meth:`planned` yields the ones the plan sends.

    :param wanted: the indexes to send (``None``: all).
    :param fingerprint: ``True`` to compute the events' fingerprint while walking them.
    :param content_type: a typed batch's content type, which the fingerprint covers.
    """

    def __init__(self, wanted: set[int] | None, fingerprint: bool, content_type: str | None = None):
        self.wanted = wanted
        self.count = 0
        self.fingerprint = Fingerprint(content_type) if fingerprint else None

    def planned(self, events: Iterable[Any]) -> Iterator[tuple[int, bytes, Any]]:
        """``(index, body, properties)`` of each planned event; the others are only counted."""
        fp, wanted = self.fingerprint, self.wanted
        for index, (body, props) in enumerate(_pairs(events)):
            self.count += 1
            if fp is not None:
                fp.update(body, props)
            if wanted is None or index in wanted:
                yield index, body, props


class Progress:
    """A log line of a partition's send rate every :data:`PROGRESS_EVERY` seconds."""

    def __init__(self, where: str, started: float):
        self.where = where
        self.started = started
        self.last = started

    def note(self, sent: int) -> None:
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY:
            self.last = now
            log.info("%s: %d events sent (%.0f events/s)", self.where, sent, sent / (now - self.started))


class BatchSender:
    """
    Sends a partition's SDK batches one after the other, counting them, with the lease check before each.

    :param client: the producer client.
    :param stop_check: called before each SDK batch; raises to stop (the driver's lease check).
    :param fenced: the sends go on an idempotent-producer link: a refusal is mapped to
        :class:`~airflow_provider_eh.errors.ProducerDisconnectedError`.
    """

    def __init__(self, client: Any, *, send_timeout: float, stop_check: Callable[[], None] | None, fenced: bool):
        self.client = client
        self.send_timeout = send_timeout
        self.stop_check = stop_check
        self.fenced = fenced
        self.sent = 0
        self.batches = 0

    def send(self, batch: Any, events_in_batch: int) -> None:
        if self.stop_check is not None:
            self.stop_check()
        reached("before_send", self.batches + 1)
        try:
            self.client.send_batch(batch, timeout=self.send_timeout)
        except Exception as exc:
            refused = fenced_error(exc) if self.fenced else None
            if refused is not None:
                raise refused from exc
            raise
        self.batches += 1
        self.sent += events_in_batch
        reached("mid_send", self.batches)


class BatchFiller:
    """
    Fills SDK batches of one partition with made messages, handing each full one to a :class:`BatchSender`.

    Where the send is fenced by the lease alone, each SDK batch holds at most the plan's
    ``lease_only_batch_bytes`` (:func:`~airflow_provider_eh.publishing.in_flight.batch_cap`): what a
    stalled publisher can land twice. An event larger than that bound is sent alone, in an SDK batch
    of the link's size, so the bound never refuses an event the hub takes.

    :param client: the producer client (``create_batch``).
    :param plan: the partition's plan (for its stamps, its bound and the error text).
    :param sender: sends the full batches.
    :param progress: told after each full batch.
    :param fence: the idempotent-producer link, if any (its annotations go on every message).
    """

    def __init__(self, client: Any, plan: PartitionPlan, sender: BatchSender, progress: Progress,
                 fence: FencedLink | None):
        self.client = client
        self.plan = plan
        self.sender = sender
        self.progress = progress
        first = client.create_batch(partition_id=plan.partition_id)
        self.link_max: int = first.max_size_in_bytes
        self.cap = batch_cap(plan.lease_only_batch_bytes, self.link_max, fence is not None)
        #: the bytes a stalled send can have in flight under the lease alone (None: the hub fences)
        self.in_force = bound_in_force(plan.lease_only_batch_bytes, self.link_max, fence is not None)
        self.batch = first if self.cap is None else self._new_batch()
        self.make, self.add = _message_path(plan.group, plan.batch_stamp, plan.owner_level,
                                            fast_path_available(self.batch), fence, plan.content_type)
        self.in_batch = 0
        self.alone = 0  # events over the bound, each sent in an SDK batch of its own

    def _new_batch(self, capped: bool = True) -> Any:
        if self.cap is None or not capped:
            return self.client.create_batch(partition_id=self.plan.partition_id)
        return self.client.create_batch(partition_id=self.plan.partition_id, max_size_in_bytes=self.cap)

    def _fits(self, batch: Any, message: Any) -> bool:
        try:
            self.add(batch, message)
        except ValueError:
            return False
        return True

    def put(self, index: int, body: bytes, props: Any, seq: int) -> None:
        """Add one event, sending the batch first when it is full."""
        message = self.make(body, props, seq)
        if self._fits(self.batch, message):
            self.in_batch += 1
            return
        if self.in_batch:
            self.sender.send(self.batch, self.in_batch)
            self.batch = self._new_batch()
            self.in_batch = 0
            self.progress.note(self.sender.sent)
            if self._fits(self.batch, message):
                self.in_batch = 1
                return
        self._send_alone(index, body, message)

    def _send_alone(self, index: int, body: bytes, message: Any) -> None:
        """An event that does not fit an empty batch: alone in a batch of the link's size, else too large."""
        alone = self._new_batch(capped=False) if self.cap is not None else None
        if alone is None or not self._fits(alone, message):
            raise EventTooLargeError(
                f"partition {self.plan.partition_id} batch {self.plan.batch_stamp}: event {index} does not fit in "
                f"one message ({len(body)} body bytes); split it. The batch's intent stays pending; fix the input "
                "and retry with a new generation."
            )
        if not self.alone:
            log.info("partition %s batch %s: event %d (%d body bytes) is larger than lease_only_batch_bytes=%d; "
                     "it goes out alone, in an SDK batch of its own (and so does every such event)",
                     self.plan.partition_id, self.plan.batch_stamp, index, len(body), self.cap)
        self.alone += 1
        self.sender.send(alone, 1)
        self.progress.note(self.sender.sent)

    def finish(self) -> None:
        """Send the last, partly filled batch."""
        if self.in_batch:
            self.sender.send(self.batch, self.in_batch)
            self.in_batch = 0


def attach(client: Any, plan: PartitionPlan, send_timeout: float) -> FencedLink | None:
    """Attach the partition's sender link as the plan's ``hub_fencing`` says; the fenced link, if any."""
    fence: FencedLink | None = None
    if plan.hub_fencing is not False:
        fence = open_fenced(client, plan.partition_id, group=plan.group, owner_level=plan.owner_level,
                            send_timeout=send_timeout, mode=plan.hub_fencing)
        if fence is not None:
            fence.reserve(plan.send_count)
    else:
        unfence(client, plan.partition_id)
    log.info("group %s partition %s batch %s: %s", plan.group, plan.partition_id, plan.batch_stamp,
             f"fenced at the hub (owner level {plan.owner_level}, producer group id {fence.producer_id})"
             if fence is not None else "fenced by the claim's deadline alone (no idempotent-producer link); SDK "
             f"batches of at most {plan.lease_only_batch_bytes} bytes (lease_only_batch_bytes)")
    return fence


def send_partition(
    endpoint: EventHubsEndpoint,
    plan: PartitionPlan,
    events: Iterable[OutgoingEvent | tuple[bytes, dict[str, Any] | None]],
    *,
    producer: EventHubProducerClient | None = None,
    stop_check: Callable[[], None] | None = None,
    send_timeout: float = 60.0,
    fingerprint: str | None = None,
) -> SendReport:
    """
    Stamp and send the plan's events of one partition; pure of any state store.

    :param endpoint: the hub (each caller builds its own producer from it unless ``producer`` is given).
    :param plan: from the driver's ``begin``; ``plan.action`` must be ``"send"``.
    :param events: ALL of the batch's events of this partition in index order, as ``OutgoingEvent``s or
        ``(body bytes, properties)`` pairs; an iterator is read once.
    :param producer: an open producer client to reuse.
    :param stop_check: called before each SDK batch; raises to stop (the driver's lease check).
    :param send_timeout: seconds one SDK batch may take before the send counts as failed.
    :param fingerprint: the events' fingerprint when the caller has just computed it over the same
        in-memory events (the driver-side ``publish``); executors leave it None so the report proves
        what they iterated.

    Unless ``plan.hub_fencing`` is ``False``, the partition's link is attached as an idempotent producer
    (:mod:`~airflow_provider_eh.client.fencing`) with the plan's owner level, where the hub offers it:
    once a publisher with a higher owner level attaches, the hub refuses this one's sends. Otherwise
    the claim's lease alone fences, and each SDK batch holds at most ``plan.lease_only_batch_bytes``.
    One SDK batch at a time: each ``send_batch`` returns (acknowledged, or failed) before the next is
    filled, so at most one batch per partition is ever in flight.

    The producer it builds has the SDK's own retries off: a retried SDK send after a lost
    acknowledgement would land the same stamps twice. Failures surface; the publisher recovers
    by read-back instead.
    """
    if plan.action != "send":
        raise ValueError(f"partition {plan.partition_id} batch {plan.batch_stamp}: plan says {plan.action!r}, nothing to send")
    started = time.monotonic()
    client = endpoint.producer(retry_total=0) if producer is None else producer
    walk = EventWalk(None if plan.indexes is None else set(from_ranges(plan.indexes)), fingerprint is None,
                     plan.content_type)
    where = f"group {plan.group} partition {plan.partition_id} batch {plan.batch_stamp}"
    try:
        fence = attach(client, plan, send_timeout)
        sender = BatchSender(client, send_timeout=send_timeout, stop_check=stop_check, fenced=fence is not None)
        filler = BatchFiller(client, plan, sender, Progress(where, started), fence)
        for seq, (index, body, props) in enumerate(walk.planned(events), start=plan.first_seq):
            filler.put(index, body, props, seq)
        filler.finish()
        end = partition_end(client, plan.partition_id)
    finally:
        if producer is None:
            client.close()
    seconds = time.monotonic() - started
    log.info("%s: %d events sent in %d SDK batches, %.2fs (%.0f events/s)%s",
             where, sender.sent, sender.batches, seconds, sender.sent / seconds if seconds else 0.0,
             "" if filler.in_force is None else f"; fenced by the lease, SDK batches of at most {filler.in_force} bytes")
    fp = walk.fingerprint.hexdigest() if walk.fingerprint is not None else str(fingerprint)
    return SendReport(plan.partition_id, plan.batch_id, walk.count, fp, sender.sent, end, seconds,
                      HUB if fence is not None else LEASE, filler.in_force)
