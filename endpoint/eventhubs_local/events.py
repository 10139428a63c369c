"""Events as stored: a producer's message split so the broker annotations are added cheaply.

Stored events are kept *delivery-ready*: the message sections as the client sent them, with a
message-annotations section carrying the broker annotations (sequence number, offset, enqueued
time, partition key) placed in front of the properties. Delivery then only wraps those bytes in a
transfer frame; nothing is decoded or re-encoded. An SDK batch (message-format ``BATCH_FORMAT``)
is split into its events here too.
"""

from __future__ import annotations

import struct
from typing import Any

from .codec import (
    SEC_DATA,
    SEC_DELIVERY_ANN,
    SEC_HEADER,
    SEC_MESSAGE_ANN,
    CodecError,
    decode_value,
    map_entries,
    skip_value,
    split_sections,
)

BATCH_FORMAT = 0x80013700

KEY_SEQUENCE = b"x-opt-sequence-number"
KEY_OFFSET = b"x-opt-offset"
KEY_ENQUEUED = b"x-opt-enqueued-time"
KEY_PARTITION_KEY = b"x-opt-partition-key"
_BROKER_KEYS = frozenset({KEY_SEQUENCE, KEY_OFFSET, KEY_ENQUEUED, KEY_PARTITION_KEY})
# an idempotent producer's annotations (see ``idempotence``): read, and kept with the event
PRODUCER_KEYS = frozenset({b"com.microsoft:producer-id", b"com.microsoft:producer-epoch",
                           b"com.microsoft:producer-sequence-number"})


def _sym(key: bytes) -> bytes:
    return b"\xa3" + bytes((len(key),)) + key


def _str(value: bytes) -> bytes:
    if len(value) < 256:
        return b"\xa1" + bytes((len(value),)) + value
    return b"\xb1" + _U32.pack(len(value)) + value


_SYM_SEQUENCE = _sym(KEY_SEQUENCE) + b"\x81"
_SYM_OFFSET = _sym(KEY_OFFSET)
_SYM_ENQUEUED = _sym(KEY_ENQUEUED) + b"\x83"
_SYM_PARTITION_KEY = _sym(KEY_PARTITION_KEY)
_Q = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I8 = struct.Struct(">b")
_U32 = struct.Struct(">I")  # this module's own: see ``frames._U32``


class ParsedEvent:
    """One event as received from a client, split so the broker annotations can be added cheaply."""

    __slots__ = ("head", "extra_annotations", "extra_count", "tail", "partition_key", "producer")

    def __init__(self, head: bytes, extra_annotations: bytes, extra_count: int, tail: bytes, partition_key: bytes | None,
                 producer: dict[bytes, Any] | None = None):
        self.head = head
        self.extra_annotations = extra_annotations
        self.extra_count = extra_count
        self.tail = tail
        self.partition_key = partition_key
        self.producer = producer  # idempotent producer annotations, when the event carries them

    def stored(self, sequence: int, offset: int, enqueued_ms: int, partition_key: bytes | None) -> bytes:
        """The delivery-ready bytes of this event with its broker annotations."""
        key = self.partition_key if self.partition_key is not None else partition_key
        body = (
            _SYM_SEQUENCE + _Q.pack(sequence)
            + _SYM_OFFSET + _str(str(offset).encode())
            + _SYM_ENQUEUED + _Q.pack(enqueued_ms)
        )
        count = 6 + self.extra_count
        if key is not None:
            body += _SYM_PARTITION_KEY + _str(key)
            count += 2
        body += self.extra_annotations
        annotations = b"\x00\x53\x72\xd1" + _U32.pack(len(body) + 4) + _U32.pack(count) + body
        return self.head + annotations + self.tail


RUNTIME_METRIC = b"com.microsoft:enable-receiver-runtime-metric"
_SYM_LAST_SEQUENCE = _sym(b"last_enqueued_sequence_number") + b"\x81"
_SYM_LAST_OFFSET = _sym(b"last_enqueued_offset")
_SYM_LAST_TIME = _sym(b"last_enqueued_time_utc") + b"\x83"
_SYM_RETRIEVAL_TIME = _sym(b"runtime_info_retrieval_time_utc") + b"\x83"


def runtime_metrics(last_sequence: int, last_offset: int, last_enqueued_ms: int, retrieved_ms: int) -> bytes:
    """The delivery-annotations section Event Hubs adds to each delivery for a receiver that asked for it.

    The partition's last enqueued sequence number, offset and time, and when they were read: what the
    SDKs show as ``last_enqueued_event_properties`` (Python) / ``lastEnqueuedEventProperties`` (JavaScript).
    """
    body = (_SYM_LAST_SEQUENCE + _Q.pack(last_sequence) + _SYM_LAST_OFFSET + _str(str(last_offset).encode())
            + _SYM_LAST_TIME + _Q.pack(last_enqueued_ms) + _SYM_RETRIEVAL_TIME + _Q.pack(retrieved_ms))
    return b"\x00\x53\x71\xd1" + _U32.pack(len(body) + 4) + _U32.pack(8) + body


def with_delivery_annotations(stored: bytes | memoryview, section: bytes) -> bytes:
    """A stored event with a delivery-annotations ``section`` in its place: after the header, if any.

    ``stored`` is bytes or, for an event read from a segment file, a memoryview of it.
    """
    if stored[:3] == b"\x00\x53\x70":
        at = skip_value(stored, 3)
        return b"".join((stored[:at], section, stored[at:]))
    return b"".join((section, stored))


def _partition_key_value(raw: bytes | memoryview) -> bytes | None:
    value = decode_value(raw)
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    return str(value).encode()


class _AnnotationsSeen:
    """Message annotations already read, less a trailing producer sequence number: read once per sender.

    An idempotent producer's events differ in their message annotations only by the last entry, the
    producer sequence number; everything before it (producer id, owner level, any annotations of the
    client's own) repeats from event to event. The bytes before that entry are kept here with what was
    read from them, after a full read proved that the entry is the map's last. An event whose bytes
    before its own last entry equal such a prefix byte for byte carries the same entries, so only its
    sequence number is decoded. Bounded: emptied when full.
    """

    LIMIT = 4096
    _SEQUENCE_KEY = _sym(b"com.microsoft:producer-sequence-number")

    def __init__(self) -> None:
        self.prefixes: dict[bytes, tuple[bytes, int, bytes | None, dict[bytes, Any]]] = {}

    @classmethod
    def split(cls, section: bytes) -> tuple[bytes, bytes, int] | None:
        """``(count and entries before the last, the last entry, its number)`` where the last is a sequence number.

        Only the encodings the SDKs write are taken (a map8 or map32, the number an int or smallint);
        anything else is read in full.
        """
        at = section.rfind(cls._SEQUENCE_KEY)
        if at < 0:
            return None
        code = section[0]
        value_at = at + len(cls._SEQUENCE_KEY)
        if value_at >= len(section):
            return None
        if section[value_at] == 0x71 and value_at + 5 == len(section):
            sequence = _I32.unpack_from(section, value_at + 1)[0]
        elif section[value_at] == 0x54 and value_at + 2 == len(section):
            sequence = _I8.unpack_from(section, value_at + 1)[0]
        else:
            return None
        if code == 0xC1 and at >= 3:  # constructor, size, count: the size changes with the number's encoding
            return section[:1] + section[2:at], section[at:], sequence
        if code == 0xD1 and at >= 9:
            return section[:1] + section[5:at], section[at:], sequence
        return None

    def remember(self, prefix: bytes, kept: bytes, count: int, partition_key: bytes | None,
                 producer: dict[bytes, Any]) -> None:
        if len(self.prefixes) >= self.LIMIT:
            self.prefixes.clear()
        self.prefixes[prefix] = (kept, count, partition_key, {k: v for k, v in producer.items() if k != PRODUCER_SEQUENCE})


PRODUCER_SEQUENCE = b"com.microsoft:producer-sequence-number"
_SEEN = _AnnotationsSeen()


def parse_event(payload: bytes | memoryview) -> ParsedEvent:
    """Split one encoded message into header, client annotations and the rest."""
    mv = memoryview(payload)
    head = b""
    extra = b""
    extra_count = 0
    partition_key = None
    producer: dict[bytes, Any] | None = None
    tail_start = None
    for descriptor, start, value_start, end in split_sections(mv):
        if tail_start is not None and descriptor in (SEC_HEADER, SEC_MESSAGE_ANN):
            raise CodecError("message sections are out of order")
        if descriptor == SEC_HEADER:
            head = bytes(mv[start:end])
        elif descriptor == SEC_DELIVERY_ANN:
            continue
        elif descriptor == SEC_MESSAGE_ANN:
            section = bytes(mv[value_start:end])
            split = _SEEN.split(section)
            seen = _SEEN.prefixes.get(split[0]) if split is not None else None
            if seen is not None:  # a sender's next event: only its sequence number is new
                kept_prefix, extra_count, partition_key, fixed = seen
                producer = {**fixed, PRODUCER_SEQUENCE: split[2]}  # type: ignore[index]
                extra = kept_prefix + split[1]  # type: ignore[index]
                continue
            kept = []
            last_key = None
            for key, entry_start, entry_end in map_entries(mv, value_start, end):
                last_key = key
                if key == KEY_PARTITION_KEY:
                    partition_key = _partition_key_value(mv[skip_value(mv, entry_start) : entry_end])
                elif key not in _BROKER_KEYS:
                    kept.append(bytes(mv[entry_start:entry_end]))
                    if key in PRODUCER_KEYS:
                        if producer is None:
                            producer = {}
                        producer[key] = decode_value(mv[skip_value(mv, entry_start) : entry_end])
            extra = b"".join(kept)
            extra_count = 2 * len(kept)
            if split is not None and last_key == PRODUCER_SEQUENCE and producer is not None \
                    and kept and kept[-1] == split[1]:
                _SEEN.remember(split[0], extra[: len(extra) - len(split[1])], extra_count, partition_key, producer)
        else:
            if tail_start is None:
                tail_start = start
    tail = bytes(mv[tail_start:]) if tail_start is not None else b""
    return ParsedEvent(head, extra, extra_count, tail, partition_key, producer)


def batch_parts(payload: bytes | memoryview) -> tuple[list[memoryview], bytes | None]:
    """The inner messages of an SDK batch (message-format 0x80013700) and the batch's partition key."""
    mv = memoryview(payload)
    inner: list[memoryview] = []
    partition_key = None
    for descriptor, _start, value_start, end in split_sections(mv):
        if descriptor == SEC_DATA:
            code = mv[value_start]
            if code == 0xA0:
                inner.append(mv[value_start + 2 : end])
            elif code == 0xB0:
                inner.append(mv[value_start + 5 : end])
            else:
                raise CodecError("batch data section is not binary")
        elif descriptor == SEC_MESSAGE_ANN:
            for key, entry_start, entry_end in map_entries(mv, value_start, end):
                if key == KEY_PARTITION_KEY:
                    partition_key = _partition_key_value(mv[skip_value(mv, entry_start) : entry_end])
    return inner, partition_key
