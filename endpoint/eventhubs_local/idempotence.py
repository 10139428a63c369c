"""The service side of Event Hubs' idempotent producer: producer groups on a partition.

A client sender that desires the link capability ``com.microsoft:idempotent-producer`` names its
producer group (``com.microsoft:producer-id``, a long; null asks the service for a new one), its owner
level (``com.microsoft:producer-epoch``, a short) and the last sequence number it published
(``com.microsoft:producer-sequence-number``, an int) in the attach's link properties. The endpoint
offers the capability back and answers with the group's id and owner level (a new id when none was
given) and a sequence number: the client's own when it names one, the service's otherwise. The
client's own, because the JavaScript SDK numbers a retried batch from the number in that answer: after
a dropped connection it re-attaches naming the last number it *knows* was acknowledged, and the retry
must carry the same numbers as the lost attempt for the service to recognise what it already stored.
The service stays the system of record for what is stored. Every event then carries the three values as message annotations;
an event at or below the last sequence number stored for its group is acknowledged and dropped, a
gap is refused with ``com.microsoft:out-of-order-sequence``, and a sender of a lower owner level than
the group's current one is refused with ``com.microsoft:producer-epoch-stolen``: its attach, or, for
a sender attached before a higher owner level took over, its next send (the JavaScript SDK reports
that as ``ProducerDisconnectedError``).

Durability: the annotations are stored with each event, so a partition's producer groups are rebuilt
from its log the first time an idempotent sender attaches after a start. What retention removed is
forgotten, as is an owner-level raise that no event followed.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from . import codec, events
from .codec import CodecError
from .sdk_amqp import TYPE, VALUE, AMQPTypes

CAPABILITY = b"com.microsoft:idempotent-producer"
PRODUCER_ID = b"com.microsoft:producer-id"
PRODUCER_EPOCH = b"com.microsoft:producer-epoch"
PRODUCER_SEQUENCE = b"com.microsoft:producer-sequence-number"
OUT_OF_ORDER = "com.microsoft:out-of-order-sequence"
EPOCH_STOLEN = "com.microsoft:producer-epoch-stolen"


@dataclass
class ProducerGroup:
    """One producer group's state on one partition.

    :param producer_id: the group id.
    :param epoch: the current owner level; senders of a lower one are fenced.
    :param last_sequence: the last producer sequence number stored, ``None`` before the first event.
    """

    producer_id: int
    epoch: int
    last_sequence: int | None


@dataclass(frozen=True)
class Attached:
    """A sender's place in its producer group: the group, and what its attach is answered with.

    :param group: the producer group.
    :param epoch_raised: the sender raised the group's owner level (older senders' sends are refused).
    :param sequence: the sequence number the attach is answered with (see the module docstring).
    """

    group: ProducerGroup
    epoch_raised: bool
    sequence: int


class Fenced(Exception):
    """A sender's owner level is below its producer group's current one."""


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    raise CodecError(f"idempotent producer property {value!r} is not an integer")


def link_request(desired_capabilities: Any, properties: dict[Any, Any]) -> tuple[int | None, int | None, int | None] | None:
    """``(producer id, epoch, sequence number)`` an attach asks for, ``None`` if it does not desire the capability."""
    if not codec.names_symbol(desired_capabilities, CAPABILITY):
        return None
    by_key = {bytes(k) if isinstance(k, (bytes, bytearray, memoryview)) else str(k).encode(): v
              for k, v in properties.items()}
    return _int(by_key.get(PRODUCER_ID)), _int(by_key.get(PRODUCER_EPOCH)), _int(by_key.get(PRODUCER_SEQUENCE))


def event_annotations(event: events.ParsedEvent) -> tuple[int | None, int | None, int | None]:
    """``(producer id, epoch, sequence number)`` from an event's message annotations."""
    values = event.producer or {}
    return values.get(PRODUCER_ID), values.get(PRODUCER_EPOCH), values.get(PRODUCER_SEQUENCE)


def _stored_annotations(payload: bytes | memoryview) -> tuple[int | None, int | None, int | None]:
    mv = memoryview(payload)
    found: dict[bytes, Any] = {}
    for descriptor, _start, value_start, end in codec.split_sections(mv):
        if descriptor == codec.SEC_MESSAGE_ANN:
            for key, entry_start, entry_end in codec.map_entries(mv, value_start, end):
                if key in (PRODUCER_ID, PRODUCER_EPOCH, PRODUCER_SEQUENCE):
                    found[key] = codec.decode_value(mv[codec.skip_value(mv, entry_start) : entry_end])
            break
    return found.get(PRODUCER_ID), found.get(PRODUCER_EPOCH), found.get(PRODUCER_SEQUENCE)


class PartitionProducers:
    """The producer groups of one partition, rebuilt from its log on first use."""

    def __init__(self, log: Any):
        self.groups: dict[int, ProducerGroup] = {}
        seq = log.begin_seq
        while seq < log.next_seq:
            payloads = log.read(seq, 512)
            if not payloads:
                break
            for payload in payloads:
                producer_id, epoch, sequence = _stored_annotations(payload)
                if producer_id is not None and sequence is not None:
                    group = self.groups.setdefault(producer_id, ProducerGroup(producer_id, epoch or 0, None))
                    group.epoch = max(group.epoch, epoch or 0)
                    group.last_sequence = sequence if group.last_sequence is None else max(group.last_sequence,
                                                                                          sequence)
            seq += len(payloads)

    def attach(self, producer_id: int | None, epoch: int | None, sequence: int | None) -> Attached:
        """Join a sender to its producer group (a new one when it names none or one never seen here).

        :raises Fenced: the sender's owner level is below the group's.
        """
        group = self.groups.get(producer_id) if producer_id is not None else None
        raised = False
        if group is None:
            if producer_id is None:
                producer_id = secrets.randbits(48)
                while producer_id in self.groups:
                    producer_id = secrets.randbits(48)
            group = ProducerGroup(producer_id, epoch or 0, None)
            self.groups[producer_id] = group
        elif epoch is not None and epoch != group.epoch:
            if epoch < group.epoch:
                raise Fenced(f"owner level {epoch} of producer group {producer_id} is below its current {group.epoch}")
            group.epoch = epoch
            raised = True
        if sequence is None:
            sequence = -1 if group.last_sequence is None else group.last_sequence
        return Attached(group, raised, sequence)

    def admit(self, group: ProducerGroup, link_epoch: int,
              annotations: list[tuple[int | None, int | None, int | None]]) -> list[bool]:
        """Which events of one delivery to store (``False``: a duplicate, acknowledged and dropped).

        :raises Fenced: the link's owner level is no longer the group's.
        :raises CodecError: an event lacks the annotations, or names another group.
        :raises OutOfOrder: a gap after the last stored sequence number.
        """
        if link_epoch < group.epoch:
            raise Fenced(f"producer group {group.producer_id} was taken over by owner level {group.epoch}; "
                         f"this sender has owner level {link_epoch}")
        keep: list[bool] = []
        last = group.last_sequence
        for producer_id, _epoch, sequence in annotations:
            if sequence is None:
                raise CodecError("event of an idempotent sender lacks com.microsoft:producer-sequence-number")
            if producer_id is not None and producer_id != group.producer_id:
                raise CodecError(f"event names producer group {producer_id}, the link {group.producer_id}")
            if last is not None and sequence <= last:
                keep.append(False)
                continue
            if last is not None and sequence != last + 1:
                raise OutOfOrder(f"producer sequence number {sequence} of producer group {group.producer_id} "
                                 f"does not follow the last stored {last}")
            keep.append(True)
            last = sequence
        group.last_sequence = last
        return keep


class OutOfOrder(Exception):
    """A producer sequence number that leaves a gap after the last stored one."""


def attach_properties(attached: Attached) -> dict[bytes, Any]:
    """The link properties the endpoint answers an idempotent sender's attach with."""
    return {
        PRODUCER_EPOCH: {TYPE: AMQPTypes.short, VALUE: attached.group.epoch},
        PRODUCER_ID: codec.long(attached.group.producer_id),
        PRODUCER_SEQUENCE: {TYPE: AMQPTypes.int, VALUE: attached.sequence},
    }
