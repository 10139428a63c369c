"""AMQP 1.0 framing and message surgery for the local Event Hubs endpoint.

Performatives are decoded and (except for the hot paths) encoded with the SDK's own ``_pyamqp``
codec, which always writes every field of a performative: the SDK's decoder reads fields by
position and breaks on shortened lists. The two hot paths -- delivering stored events and
acknowledging received ones -- are encoded by hand here, because the generic encoder costs
tens of microseconds per frame.

Stored events are kept *delivery-ready*: the message sections as the client sent them, with a
message-annotations section carrying the broker annotations (sequence number, offset, enqueued
time, partition key) placed in front of the properties. Delivery then only wraps those bytes in a
transfer frame; nothing is decoded or re-encoded.
"""

from __future__ import annotations

import struct
from typing import Any

from azure.eventhub._pyamqp import _decode, _encode
from azure.eventhub._pyamqp import performatives as perf
from azure.eventhub._pyamqp.error import AMQPError
from azure.eventhub._pyamqp.message import Message, Properties

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
FRAME_AMQP = 0
FRAME_SASL = 1

# Performative descriptor codes.
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_RESPONSE, SASL_OUTCOME = range(0x40, 0x45)

# Message section descriptor codes.
SEC_HEADER, SEC_DELIVERY_ANN, SEC_MESSAGE_ANN, SEC_PROPERTIES, SEC_APP_PROPS = 0x70, 0x71, 0x72, 0x73, 0x74
SEC_DATA, SEC_SEQUENCE, SEC_VALUE, SEC_FOOTER = 0x75, 0x76, 0x77, 0x78

BATCH_FORMAT = 0x80013700

KEY_SEQUENCE = b"x-opt-sequence-number"
KEY_OFFSET = b"x-opt-offset"
KEY_ENQUEUED = b"x-opt-enqueued-time"
KEY_PARTITION_KEY = b"x-opt-partition-key"
_BROKER_KEYS = frozenset({KEY_SEQUENCE, KEY_OFFSET, KEY_ENQUEUED, KEY_PARTITION_KEY})

_U32 = struct.Struct(">I")
_FRAME_HEADER = struct.Struct(">IBBH")


class CodecError(ValueError):
    """Bytes that are not valid AMQP where valid AMQP was required."""


# ---------------------------------------------------------------------------------------------
# Generic value skipping (used to split sections and map entries without decoding them)


def skip_value(buf: bytes | memoryview, pos: int) -> int:
    """Return the position just after the AMQP value starting at ``pos``."""
    try:
        code = buf[pos]
    except IndexError:
        raise CodecError(f"truncated value at byte {pos}") from None
    pos += 1
    if code == 0x00:  # described: descriptor then value
        return skip_value(buf, skip_value(buf, pos))
    high = code >> 4
    if high == 0x4:
        return pos
    if high == 0x5:
        end = pos + 1
    elif high == 0x6:
        end = pos + 2
    elif high == 0x7:
        end = pos + 4
    elif high == 0x8:
        end = pos + 8
    elif high == 0x9:
        end = pos + 16
    elif high in (0xA, 0xC, 0xE):
        if pos >= len(buf):
            raise CodecError(f"truncated size at byte {pos}")
        end = pos + 1 + buf[pos]
    elif high in (0xB, 0xD, 0xF):
        if pos + 4 > len(buf):
            raise CodecError(f"truncated size at byte {pos}")
        end = pos + 4 + _U32.unpack_from(buf, pos)[0]
    else:
        raise CodecError(f"unknown AMQP constructor 0x{code:02x} at byte {pos - 1}")
    if end > len(buf):
        raise CodecError(f"value at byte {pos - 1} runs past the end of its buffer")
    return end


def decode_value(buf: bytes | memoryview) -> Any:
    """Decode one AMQP value with the SDK decoder."""
    mv = memoryview(buf)
    try:
        return _decode._DECODE_BY_CONSTRUCTOR[mv[0]](mv[1:])[1]  # noqa: SLF001
    except Exception as exc:  # the SDK decoder raises anything from IndexError to TypeError
        raise CodecError(f"undecodable AMQP value: {exc!r}") from exc


def split_sections(payload: bytes | memoryview) -> list[tuple[int, int, int]]:
    """Split an encoded message into ``(descriptor, start, end)`` sections."""
    sections = []
    pos, size = 0, len(payload)
    while pos < size:
        if payload[pos] != 0x00 or pos + 2 >= size:
            raise CodecError(f"message section at byte {pos} is not a described type")
        if payload[pos + 1] == 0x53:
            descriptor = payload[pos + 2]
            value_start = pos + 3
        elif payload[pos + 1] == 0x80 and pos + 10 <= size:
            descriptor = int.from_bytes(payload[pos + 2 : pos + 10], "big")
            value_start = pos + 10
        else:
            raise CodecError(f"message section at byte {pos} has an unsupported descriptor")
        if not SEC_HEADER <= descriptor <= SEC_FOOTER:
            raise CodecError(f"unknown message section descriptor 0x{descriptor:x}")
        end = skip_value(payload, value_start)
        sections.append((descriptor, pos, end))
        pos = end
    if not sections:
        raise CodecError("empty message")
    return sections


def map_entries(buf: bytes | memoryview, start: int, end: int) -> list[tuple[bytes, int, int]]:
    """Raw entries of the map value in ``buf[start:end]``: ``(key bytes, entry start, entry end)``."""
    code = buf[start]
    if code == 0xC1:
        pos, count = start + 3, buf[start + 2]
    elif code == 0xD1:
        pos, count = start + 9, _U32.unpack_from(buf, start + 5)[0]
    else:
        raise CodecError(f"annotations are not a map (constructor 0x{code:02x})")
    entries = []
    for _ in range(count // 2):
        key_start = pos
        key_end = skip_value(buf, pos)
        value_end = skip_value(buf, key_end)
        if value_end > end:
            raise CodecError("annotation map runs past its section")
        kcode = buf[key_start]
        if kcode in (0xA3, 0xA1):
            key = bytes(buf[key_start + 2 : key_end])
        elif kcode in (0xB3, 0xB1):
            key = bytes(buf[key_start + 5 : key_end])
        else:
            key = b""
        entries.append((key, key_start, value_end))
        pos = value_end
    return entries


# ---------------------------------------------------------------------------------------------
# Broker annotations


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


class ParsedEvent:
    """One event as received from a client, split so the broker annotations can be added cheaply."""

    __slots__ = ("head", "extra_annotations", "extra_count", "tail", "partition_key")

    def __init__(self, head: bytes, extra_annotations: bytes, extra_count: int, tail: bytes, partition_key: bytes | None):
        self.head = head
        self.extra_annotations = extra_annotations
        self.extra_count = extra_count
        self.tail = tail
        self.partition_key = partition_key

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


def _partition_key_value(raw: bytes | memoryview) -> bytes | None:
    value = decode_value(raw)
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    return str(value).encode()


def parse_event(payload: bytes | memoryview) -> ParsedEvent:
    """Split one encoded message into header, client annotations and the rest."""
    mv = memoryview(payload)
    head = b""
    extra = b""
    extra_count = 0
    partition_key = None
    tail_start = None
    for descriptor, start, end in split_sections(mv):
        if tail_start is not None and descriptor in (SEC_HEADER, SEC_MESSAGE_ANN):
            raise CodecError("message sections are out of order")
        if descriptor == SEC_HEADER:
            head = bytes(mv[start:end])
        elif descriptor == SEC_DELIVERY_ANN:
            continue
        elif descriptor == SEC_MESSAGE_ANN:
            value_start = start + (3 if mv[start + 1] == 0x53 else 10)
            kept = []
            for key, entry_start, entry_end in map_entries(mv, value_start, end):
                if key == KEY_PARTITION_KEY:
                    partition_key = _partition_key_value(mv[skip_value(mv, entry_start) : entry_end])
                elif key not in _BROKER_KEYS:
                    kept.append(bytes(mv[entry_start:entry_end]))
            extra = b"".join(kept)
            extra_count = 2 * len(kept)
        else:
            if tail_start is None:
                tail_start = start
    tail = bytes(mv[tail_start:]) if tail_start is not None else b""
    return ParsedEvent(head, extra, extra_count, tail, partition_key)


def batch_parts(payload: bytes | memoryview) -> tuple[list[memoryview], bytes | None]:
    """The inner messages of an SDK batch (message-format 0x80013700) and the batch's partition key."""
    mv = memoryview(payload)
    inner: list[memoryview] = []
    partition_key = None
    for descriptor, start, end in split_sections(mv):
        value_start = start + (3 if mv[start + 1] == 0x53 else 10)
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


# ---------------------------------------------------------------------------------------------
# Frames


def frame_bytes(body: bytes | bytearray, channel: int = 0, frame_type: int = FRAME_AMQP) -> bytes:
    return _FRAME_HEADER.pack(len(body) + 8, 2, frame_type, channel) + body


def encode_performative(frame: Any, channel: int = 0, frame_type: int = FRAME_AMQP) -> bytes:
    """A complete frame for an SDK performative namedtuple (all fields written)."""
    body = bytearray()
    _encode.encode_value(body, _encode.describe_performative(frame))
    return frame_bytes(body, channel, frame_type)


def decode_performative(body: memoryview) -> tuple[int, list[Any]]:
    """Decode a frame body into ``(descriptor code, fields)``; transfers get the payload appended."""
    if len(body) < 4 or body[0] != 0x00 or body[1] != 0x53 or body[3] not in (0xC0, 0xD0, 0x45):
        raise CodecError("frame body is not a described list performative")
    if body[3] == 0x45:
        return body[2], []
    # validate extents first so a lying size cannot make the SDK decoder read garbage
    end = skip_value(body, 3)
    if body[2] != TRANSFER and end != len(body):
        raise CodecError("trailing bytes after performative")
    try:
        return _decode.decode_frame(body)
    except Exception as exc:
        raise CodecError(f"undecodable performative: {exc!r}") from exc


def error(condition: bytes | str, description: str, **info: Any) -> AMQPError:
    """An AMQP error with a non-empty ``info`` map (the SDK indexes into it)."""
    if isinstance(condition, str):
        condition = condition.encode()
    return AMQPError(condition=condition, description=description, info=info or {"source": "local-event-hubs"})


def open_frame(container_id: str, max_frame_size: int, idle_timeout_ms: int | None) -> bytes:
    return encode_performative(
        perf.OpenFrame(
            container_id=container_id, hostname=None, max_frame_size=max_frame_size, channel_max=65535,
            idle_timeout=idle_timeout_ms, outgoing_locales=None, incoming_locales=None,
            offered_capabilities=None, desired_capabilities=None, properties={},
        )
    )


def sasl_mechanisms_frame() -> bytes:
    return encode_performative(perf.SASLMechanism(sasl_server_mechanisms=[b"ANONYMOUS", b"MSSBCBS"]), 0, FRAME_SASL)


def sasl_outcome_frame(code: int = 0) -> bytes:
    return encode_performative(perf.SASLOutcome(code=code, additional_data=None), 0, FRAME_SASL)


# -- hand-encoded hot paths ------------------------------------------------------------------

_TRANSFER_PREFIX = b"\x00\x53\x14\xd0"
_TRANSFER_STRUCT = struct.Struct(">IIBIBIBBI")  # list size, count, 0x70 handle, 0x70 id, 0xa0 4 tag


def transfer_frames(channel: int, handle: int, delivery_id: int, payload: bytes | memoryview,
                    max_frame_size: int, message_format: int = 0) -> list[bytes]:
    """Settled transfer frame(s) carrying ``payload``; split with ``more`` when above ``max_frame_size``."""
    fmt = b"\x43" if message_format == 0 else b"\x70" + _U32.pack(message_format)
    tail_more = b"\x41\x41\x40\x40\x40\x40\x40"  # settled, more, rcv-settle-mode, state, resume, aborted, batchable
    tail_last = b"\x41\x42\x40\x40\x40\x40\x40"
    fields_len = 5 + 5 + 6 + len(fmt) + 7
    performative_len = 4 + 4 + 4 + fields_len
    room = max_frame_size - 8 - performative_len
    if room <= 0:
        raise CodecError("max frame size too small")
    count = len(payload)
    frames = []
    pos = 0
    while True:
        chunk = payload[pos : pos + room]
        pos += len(chunk)
        last = pos >= count
        body = (
            _TRANSFER_PREFIX + _U32.pack(4 + fields_len) + b"\x00\x00\x00\x0b"
            + b"\x70" + _U32.pack(handle) + b"\x70" + _U32.pack(delivery_id)
            + b"\xa0\x04" + _U32.pack(delivery_id) + fmt + (tail_last if last else tail_more)
        )
        frames.append(_FRAME_HEADER.pack(8 + len(body) + len(chunk), 2, FRAME_AMQP, channel) + body + chunk)
        if last:
            return frames


_ACCEPTED = b"\x00\x53\x24\x45"


def accepted_disposition(channel: int, first: int, last: int) -> bytes:
    """A settled receiver-side disposition accepting deliveries ``first..last``."""
    body = (
        b"\x00\x53\x15\xc0" + bytes((2 + 1 + 5 + 5 + 1 + len(_ACCEPTED) + 1,)) + b"\x06"
        + b"\x41" + b"\x70" + _U32.pack(first) + b"\x70" + _U32.pack(last) + b"\x41" + _ACCEPTED + b"\x40"
    )
    return _FRAME_HEADER.pack(8 + len(body), 2, FRAME_AMQP, channel) + body


def rejected_disposition(channel: int, first: int, last: int, err: AMQPError) -> bytes:
    """A settled receiver-side disposition rejecting deliveries with ``err``."""
    state = bytearray()
    _encode.encode_value(state, {
        "TYPE": _encode.AMQPTypes.described,
        "VALUE": ({"TYPE": _encode.AMQPTypes.ulong, "VALUE": 0x25},
                  {"TYPE": _encode.AMQPTypes.list, "VALUE": [_encode.describe_performative(err)]}),
    })
    fields = b"\x41" + b"\x70" + _U32.pack(first) + b"\x70" + _U32.pack(last) + b"\x41" + bytes(state) + b"\x40"
    body = b"\x00\x53\x15\xd0" + _U32.pack(len(fields) + 4) + _U32.pack(6) + fields
    return _FRAME_HEADER.pack(8 + len(body), 2, FRAME_AMQP, channel) + body


def flow_frame(channel: int, next_incoming_id: int, incoming_window: int, next_outgoing_id: int,
               outgoing_window: int, handle: int | None = None, delivery_count: int | None = None,
               link_credit: int | None = None) -> bytes:
    return encode_performative(
        perf.FlowFrame(
            next_incoming_id=next_incoming_id, incoming_window=incoming_window, next_outgoing_id=next_outgoing_id,
            outgoing_window=outgoing_window, handle=handle, delivery_count=delivery_count,
            link_credit=link_credit, available=None, drain=False, echo=False, properties=None,
        ),
        channel,
    )


def long(value: int) -> dict[str, Any]:
    """An AMQP long for the SDK encoder (it would pick a 32-bit int for a bare Python int)."""
    return {_encode.TYPE: _encode.AMQPTypes.long, _encode.VALUE: value}


def reply_message(correlation_id: Any, status: int, description: str, body: Any = None) -> bytes:
    """An encoded management/CBS reply message (both spellings of the status keys)."""
    message = Message(
        properties=Properties(correlation_id=correlation_id),
        application_properties={
            "status-code": status, "statusCode": status,
            "status-description": description, "statusDescription": description,
        },
        value=body,
    )
    return bytes(_encode.encode_payload(bytearray(), message))
