"""Sending one partition's events for a plan: the part that runs where the data is (a Spark executor).

``send_partition`` needs only the endpoint and the picklable plan, never the state store. It walks
the batch's events once, in index order: every event feeds the fingerprint, and the events the plan
lists are stamped with consecutive producer sequence numbers and sent in SDK batches no larger than
the link's maximum message size. It returns a :class:`SendReport` that the driver commits.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from azure.eventhub import EventData

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.fencing import HUB, LEASE, FencedLink, fenced_error, open_fenced, unfence
from airflow_provider_eh.errors import EventTooLargeError
from airflow_provider_eh.publishing.batching import add_encoded, add_event, fast_path_available, tracing_enabled
from airflow_provider_eh.publishing.fingerprint import Fingerprint
from airflow_provider_eh.publishing.landed import partition_end
from airflow_provider_eh.publishing.rulebook import OutgoingEvent
from airflow_provider_eh.publishing.state import from_ranges
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


def _pairs(events: Iterable[Any]) -> Iterable[tuple[bytes, Any]]:
    for event in events:
        if isinstance(event, OutgoingEvent):
            yield event.body, event.properties
        else:
            body, props = event
            yield body, props


def _message_path(group: str, stamp: str, owner: int, fast: bool, fence: FencedLink | None = None,
                  ) -> tuple[Callable[[bytes, Any, int], Any], Callable[[Any, Any], None]]:
    """``(make, add)``: build one stamped message and add it to an SDK batch (``ValueError`` when full).

    Straight AMQP bytes (:mod:`~airflow_provider_eh.publishing.wire`) when the SDK's layout was proven
    and no tracer needs per-message properties; otherwise ``EventData`` through the SDK's encoder.
    On a fenced link each message also carries the hub's producer annotations, numbered in the order
    the messages are made (each is made once, and sent in that order).
    """
    encoder = (StampedMessageEncoder.create(group, stamp, owner, annotated=fence is not None)
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
        set_stamps(event, stamps.properties(props, seq), None if fence is None else fence.annotations(fence.take()))
        return event

    return make, functools.partial(add_event, fast=fast)


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

    Unless ``plan.hub_fencing`` is off, the partition's link is attached as an idempotent producer
    (:mod:`~airflow_provider_eh.client.fencing`) with the plan's owner level, where the hub offers it:
    once a publisher with a higher owner level attaches, the hub refuses this one's sends.

    The producer it builds has the SDK's own retries off: a retried SDK send after a lost
    acknowledgement would land the same stamps twice. Failures surface; the publisher recovers
    by read-back instead.
    """
    if plan.action != "send":
        raise ValueError(f"partition {plan.partition_id} batch {plan.batch_stamp}: plan says {plan.action!r}, nothing to send")
    started = time.monotonic()
    own = producer is None
    client = endpoint.producer(retry_total=0) if producer is None else producer
    partition, group, stamp, owner = plan.partition_id, plan.group, plan.batch_stamp, plan.owner_level
    wanted = None if plan.indexes is None else set(from_ranges(plan.indexes))
    fp = Fingerprint() if fingerprint is None else None
    seq = plan.first_seq
    count = 0
    sent = batches = 0
    last_progress = started

    def flush(batch: Any, events_in_batch: int) -> None:
        nonlocal sent, batches
        if stop_check is not None:
            stop_check()
        reached("before_send", batches + 1)
        try:
            client.send_batch(batch, timeout=send_timeout)
        except Exception as exc:
            fenced = fenced_error(exc) if fence is not None else None
            if fenced is not None:
                raise fenced from exc
            raise
        batches += 1
        sent += events_in_batch
        reached("mid_send", batches)

    fence: FencedLink | None = None
    try:
        if plan.hub_fencing is not False:
            fence = open_fenced(client, partition, group=group, owner_level=owner, send_timeout=send_timeout,
                                mode=plan.hub_fencing)
            if fence is not None:
                fence.reserve(plan.send_count)
        else:
            unfence(client, partition)
        log.info("group %s partition %s batch %s: %s", group, partition, stamp,
                 f"fenced at the hub (owner level {owner}, producer group id {fence.producer_id})" if fence is not None
                 else "fenced by the claim's deadline alone (no idempotent-producer link)")
        batch = client.create_batch(partition_id=partition)
        make, add = _message_path(group, stamp, owner, fast_path_available(batch), fence)
        pending_in_batch = 0
        for index, (body, props) in enumerate(_pairs(events)):
            count += 1
            if fp is not None:
                fp.update(body, props)
            if wanted is not None and index not in wanted:
                continue
            event = make(body, props, seq)
            try:
                add(batch, event)
            except ValueError:
                if pending_in_batch == 0:
                    raise EventTooLargeError(
                        f"partition {partition} batch {stamp}: event {index} does not fit in one message "
                        f"({len(body)} body bytes); split it. The batch's intent stays pending; fix the input "
                        "and retry with a new generation."
                    ) from None
                flush(batch, pending_in_batch)
                batch = client.create_batch(partition_id=partition)
                add(batch, event)
                pending_in_batch = 0
                now = time.monotonic()
                if now - last_progress >= PROGRESS_EVERY:
                    last_progress = now
                    log.info(
                        "group %s partition %s batch %s: %d events sent (%.0f events/s)",
                        group, partition, stamp, sent, sent / (now - started),
                    )
            pending_in_batch += 1
            seq += 1
        if pending_in_batch:
            flush(batch, pending_in_batch)
        end = partition_end(client, partition)
    finally:
        if own:
            client.close()
    seconds = time.monotonic() - started
    log.info(
        "group %s partition %s batch %s: %d events sent in %d SDK batches, %.2fs (%.0f events/s)",
        group, partition, stamp, sent, batches, seconds, sent / seconds if seconds else 0.0,
    )
    return SendReport(partition, plan.batch_id, count, fp.hexdigest() if fp is not None else str(fingerprint), sent, end,
                      seconds, HUB if fence is not None else LEASE)
