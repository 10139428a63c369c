"""A partition's sender link as an idempotent producer: the hub itself fences a stalled publisher.

Event Hubs' idempotent publishing (the local endpoint implements it, as do namespaces with
the feature) lets a sender attach to a partition with the link capability
``com.microsoft:idempotent-producer`` and three link properties: its producer group id (a long), its
owner level (``com.microsoft:producer-epoch``, a short) and, optionally, the last sequence number it
published (an int). The hub answers with the group's state, and from then on refuses the sends of any
sender of that group with a lower owner level (``com.microsoft:producer-epoch-stolen``): a publisher
that was paused while another one claimed the partition with a higher owner level lands nothing
once it resumes. Every event then carries the three values as message annotations; the hub drops an
event whose sequence number it already stored and refuses one that leaves a gap.

The Python SDK does not offer this on its public API. :func:`open_fenced` opens the partition's
producer of an ``EventHubProducerClient`` with the capability and the properties (typed as the hub
expects them) and reads the hub's answer; :class:`FencedLink` numbers the events the hub way and
builds their annotations, both for ``EventData`` and as ready AMQP bytes. Where the hub does not
offer the capability, :func:`open_fenced` returns ``None`` and the link is an ordinary one.

The numbering is the hub's own, separate from the ledger's ``eh.seq``: each link continues from the
last number the hub stored for the group (its attach answer), so the numbers stay contiguous across
recoveries that resend some events of a batch with fresh ``eh.seq`` values. The owner level is the
ledger's (raised by every claim); the group id is derived from the producer group's name.
"""

from __future__ import annotations

import hashlib
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_provider_eh.client import sdk_internals
from airflow_provider_eh.client.sdk_internals import encode_value, typed
from airflow_provider_eh.errors import FencingRangeError, HubFencingUnavailableError, ProducerDisconnectedError

log = logging.getLogger(__name__)

CAPABILITY = b"com.microsoft:idempotent-producer"
PRODUCER_ID = b"com.microsoft:producer-id"
PRODUCER_EPOCH = b"com.microsoft:producer-epoch"
PRODUCER_SEQUENCE = b"com.microsoft:producer-sequence-number"
EPOCH_STOLEN = "producer-epoch-stolen"
OUT_OF_ORDER = "out-of-order-sequence"
MAX_OWNER_LEVEL = 2**15 - 1  # an AMQP short on the wire
MAX_SEQUENCE = 2**31 - 1  # an AMQP int on the wire

HUB = "hub"  # the hub fences: owner level and sequence numbers on the link
LEASE = "lease"  # the hub does not offer it: the claim's deadline alone

AUTO = "auto"  # the hub's fence where the hub and the installed SDK offer it, else the lease (with a warning for the SDK)
REQUIRED = "required"  # the hub's fence, or the task fails before anything is sent
HubFencing = Literal["auto", "required", False]


def fencing_mode(value: object) -> HubFencing:
    """``value`` checked as a ``hub_fencing`` setting: ``"auto"``, ``"required"`` or ``False``."""
    if value is False or value in (AUTO, REQUIRED):
        return value  # type: ignore[return-value]
    raise ValueError(
        f"hub_fencing={value!r}: use 'auto' (the hub's idempotent-producer fence where offered, else the claim's "
        "lease), 'required' (fail before sending where the hub or the SDK cannot fence) or False (the lease alone)"
    )


def producer_group_id(group: str) -> int:
    """
    The hub's producer group id for a ledger's producer group: 48 bits of SHA-256 of its name.

    48 bits, as the hub's own ids: every SDK can hold it (JavaScript's numbers are exact to 2**53), and
    two group names of one partition collide with a chance of about one in 10**14.
    """
    return int.from_bytes(hashlib.sha256(group.encode()).digest()[:6], "big")


def fenced_error(exc: BaseException) -> ProducerDisconnectedError | None:
    """``exc`` as the error of a fenced sender (a higher owner level took the group over), else ``None``."""
    text = f"{type(exc).__name__}: {exc}"
    if EPOCH_STOLEN in text:
        return ProducerDisconnectedError(
            "the hub refused this publisher: another publisher claimed the partition with a higher "
            f"owner level (fenced at the hub; {text.splitlines()[0][:300]}). Nothing of this send landed; the "
            "new owner recovers the batch."
        )
    return None


@dataclass
class FencedLink:
    """
    An attached idempotent sender link: the group, the owner level and the hub's numbering after attach.

    :param partition_id: the partition.
    :param producer_id: the hub's producer group id.
    :param owner_level: this sender's owner level.
    :param last_sequence: the last producer sequence number the hub stored for the group (``-1``: none).
    """

    partition_id: str
    producer_id: int
    owner_level: int
    last_sequence: int
    _next: int = field(init=False)
    _fixed: bytes = field(init=False, default=b"")

    def __post_init__(self) -> None:
        self._next = self.last_sequence + 1

    def reserve(self, count: int) -> None:
        """Check that ``count`` more events fit in the hub's 32-bit numbering (before anything is sent)."""
        if self._next + count - 1 > MAX_SEQUENCE:
            raise FencingRangeError(
                f"partition {self.partition_id}: the hub's producer sequence numbers of producer group id "
                f"{self.producer_id} reach {MAX_SEQUENCE} with this batch (last stored {self.last_sequence}); "
                "publish under a new producer_group. Nothing was sent."
            )

    def take(self) -> int:
        """The next event's producer sequence number."""
        seq = self._next
        self._next += 1
        return seq

    def annotations(self, seq: int) -> dict[bytes, Any]:
        """The event's message annotations, typed for the SDK's encoder (long, short, int)."""
        return {
            PRODUCER_ID: typed("long", self.producer_id),
            PRODUCER_EPOCH: typed("short", self.owner_level),
            PRODUCER_SEQUENCE: typed("int", seq),
        }

    def annotation_bytes(self, seq: int) -> bytes:
        """The message-annotations section of the event, as the SDK's encoder writes it (checked by the wire encoder)."""
        if not self._fixed:
            out = bytearray()
            for key, value in self.annotations(0).items():
                if key == PRODUCER_SEQUENCE:
                    break
                encode_value(out, typed("symbol", key))
                encode_value(out, value)
            encode_value(out, typed("symbol", PRODUCER_SEQUENCE))
            self._fixed = bytes(out)
        items = self._fixed + (b"\x54" + struct.pack(">b", seq) if -128 <= seq <= 127 else b"\x71" + struct.pack(">i", seq))
        return b"\x00\x53\x72\xc1" + bytes((len(items) + 1, 6)) + items


def _typed_link_properties(producer_id: int, owner_level: int) -> Callable[[Any], dict[Any, Any]]:
    def properties(existing: Any) -> dict[Any, Any]:
        props = dict(existing or {})
        props[PRODUCER_ID] = typed("long", producer_id)
        props[PRODUCER_EPOCH] = typed("short", owner_level)
        return props

    return properties


def _offers(capabilities: Any) -> bool:
    caps = capabilities if isinstance(capabilities, (list, tuple)) else [capabilities]
    return any(isinstance(c, (bytes, bytearray)) and bytes(c) == CAPABILITY for c in caps)


def _value(props: Any, key: bytes) -> Any:
    for k, v in (props or {}).items():
        if (bytes(k) if isinstance(k, (bytes, bytearray)) else str(k).encode()) == key:
            return v
    return None


def unfence(client: Any, partition_id: str) -> None:
    """Make ``client``'s sender link of ``partition_id`` an ordinary one again (after :func:`open_fenced`).

    A producer client kept between sends (Spark workers keep theirs) may carry a fenced link of an
    earlier send; a send with hub fencing off must not attach as an idempotent producer without
    numbering its events.
    """
    sdk_internals.attach_plain(client, partition_id)


def open_fenced(client: Any, partition_id: str, *, group: str, owner_level: int,
                send_timeout: float | None = None, mode: HubFencing = "auto") -> FencedLink | None:
    """
    Attach ``client``'s sender link of ``partition_id`` as an idempotent producer of ``group``.

    A fresh attach every call (an open link of the partition is closed first), so that the hub's answer
    is current and, with a raised owner level, older senders are fenced from this moment on.

    :param mode: ``"auto"``: where the hub or the installed SDK cannot fence, the link is an ordinary
        one (with a warning when it is the SDK); ``"required"``: that is an error instead.
    :returns: the link's state, or ``None`` when the hub does not offer the capability (then the link
        is an ordinary sender) or the SDK's internals are not the ones this builds on.
    :raises ProducerDisconnectedError: the hub refused the attach: a higher owner level holds the group.
    :raises FencingRangeError: the owner level does not fit the hub's 16 bits.
    :raises HubFencingUnavailableError: ``mode="required"`` and the hub or the SDK cannot fence; nothing
        was sent.
    """
    if owner_level > MAX_OWNER_LEVEL:
        raise FencingRangeError(
            f"partition {partition_id}: owner level {owner_level} of producer group {group!r} is beyond the "
            f"hub's {MAX_OWNER_LEVEL}; publish under a new producer_group, or turn hub fencing off "
            "(hub_fencing=False). Nothing was sent."
        )
    missing = sdk_internals.check(sdk_internals.FENCING)
    if missing:
        return _sdk_cannot_fence(partition_id, sdk_internals.describe_missing(missing), mode)
    producer_id = producer_group_id(group)
    try:
        producer = sdk_internals.partition_producer(client, partition_id, send_timeout)
        sdk_internals.attach_as(producer, CAPABILITY, _typed_link_properties(producer_id, owner_level))
    except (AttributeError, KeyError, TypeError) as exc:  # another SDK layout than the check saw
        return _sdk_cannot_fence(partition_id, f"azure-eventhub {sdk_internals.sdk_version()}: {exc}", mode)
    _reattach(producer)
    answer = sdk_internals.attach_answer(producer)
    if not _offers(answer.offered_capabilities):
        _not_offered(producer, partition_id, mode)
        return None
    last = _value(answer.properties, PRODUCER_SEQUENCE)
    epoch = _value(answer.properties, PRODUCER_EPOCH)
    if epoch is not None and int(epoch) != owner_level:
        raise ProducerDisconnectedError(
            f"partition {partition_id}: the hub holds producer group {group!r} at owner level {epoch}, not this "
            f"publisher's {owner_level}; another publisher claimed it."
        )
    return FencedLink(str(partition_id), producer_id, owner_level, -1 if last is None else int(last))


def _reattach(producer: Any) -> None:
    """Attach the link afresh; a refusal for a higher owner level is :class:`ProducerDisconnectedError`."""
    try:
        sdk_internals.reattach(producer)
    except Exception as exc:
        fenced = fenced_error(exc)
        if fenced is not None:
            raise fenced from None
        raise


def _not_offered(producer: Any, partition_id: str, mode: HubFencing) -> None:
    """The attach answer lacks the capability: the hub refused the link, or it does not fence (an error under
    ``mode="required"``, else the link stays an ordinary sender)."""
    refused = sdk_internals.detach_error(producer)
    if refused is not None:
        fenced = fenced_error(Exception(refused))
        if fenced is not None:
            raise fenced
        raise ProducerDisconnectedError(f"partition {partition_id}: the hub refused the sender link: {refused}")
    if mode == REQUIRED:
        raise HubFencingUnavailableError(
            f"partition {partition_id}: hub_fencing='required', and the hub does not offer idempotent "
            "producers (its attach answer lacks the capability com.microsoft:idempotent-producer). Nothing was "
            "sent. Publish to a namespace with idempotent publishing, or set hub_fencing='auto' (the hub's fence "
            "where offered, else the claim's lease) or False (the lease alone)."
        )
    log.info("partition %s: the hub does not offer idempotent producers; fencing by the claim's deadline alone", partition_id)


def _sdk_cannot_fence(partition_id: str, what: str, mode: HubFencing) -> FencedLink | None:
    if mode == REQUIRED:
        raise HubFencingUnavailableError(
            f"partition {partition_id}: hub_fencing='required', and the installed Event Hubs SDK cannot attach "
            f"idempotent producers: {what}. Nothing was sent. Install an azure-eventhub release this provider "
            "supports (its declared range), or set hub_fencing='auto' to publish fenced by the claim's lease."
        )
    log.warning("partition %s: the Event Hubs SDK's internals differ from the ones hub fencing builds on (%s); "
                "this send is fenced by the claim's lease alone", partition_id, what)
    return None  # the link stays an ordinary one
