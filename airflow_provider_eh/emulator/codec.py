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

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
FRAME_AMQP = 0
FRAME_SASL = 1

# Performative descriptor codes.
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_RESPONSE, SASL_OUTCOME = range(0x40, 0x45)

# Number of fields of each performative the endpoint reads (AMQP 1.0 part 2.7 and 5.3.3).
ARITY = {OPEN: 10, BEGIN: 8, ATTACH: 14, FLOW: 11, TRANSFER: 11, DISPOSITION: 6, DETACH: 3, END: 1, CLOSE: 1,
         SASL_MECHANISMS: 1, SASL_INIT: 3, SASL_CHALLENGE: 1, SASL_RESPONSE: 1, SASL_OUTCOME: 2}
TRANSFER_PAYLOAD = 11

# Message section descriptor codes.
SEC_HEADER, SEC_DELIVERY_ANN, SEC_MESSAGE_ANN, SEC_PROPERTIES, SEC_APP_PROPS = 0x70, 0x71, 0x72, 0x73, 0x74
SEC_DATA, SEC_SEQUENCE, SEC_VALUE, SEC_FOOTER = 0x75, 0x76, 0x77, 0x78

# Terminus and message-properties field counts (AMQP 1.0 part 3.5.3, 3.5.4, 3.2.4).
SOURCE, TARGET = 0x28, 0x29
SOURCE_ARITY, TARGET_ARITY, PROPERTIES_ARITY = 11, 7, 13

_NAMES = {
    OPEN: "open", BEGIN: "begin", ATTACH: "attach", FLOW: "flow", TRANSFER: "transfer", DISPOSITION: "disposition",
    DETACH: "detach", END: "end", CLOSE: "close", SASL_MECHANISMS: "sasl-mechanisms", SASL_INIT: "sasl-init",
    SASL_CHALLENGE: "sasl-challenge", SASL_RESPONSE: "sasl-response", SASL_OUTCOME: "sasl-outcome",
    SOURCE: "source", TARGET: "target", SEC_HEADER: "header", SEC_PROPERTIES: "properties",
}
DESCRIPTOR_NAMES = {f"amqp:{name}:list".encode(): code for code, name in _NAMES.items()} | {
    b"amqp:delivery-annotations:map": SEC_DELIVERY_ANN, b"amqp:message-annotations:map": SEC_MESSAGE_ANN,
    b"amqp:application-properties:map": SEC_APP_PROPS, b"amqp:data:binary": SEC_DATA,
    b"amqp:amqp-sequence:list": SEC_SEQUENCE, b"amqp:amqp-value:*": SEC_VALUE, b"amqp:footer:map": SEC_FOOTER,
}

BATCH_FORMAT = 0x80013700

KEY_SEQUENCE = b"x-opt-sequence-number"
KEY_OFFSET = b"x-opt-offset"
KEY_ENQUEUED = b"x-opt-enqueued-time"
KEY_PARTITION_KEY = b"x-opt-partition-key"
_BROKER_KEYS = frozenset({KEY_SEQUENCE, KEY_OFFSET, KEY_ENQUEUED, KEY_PARTITION_KEY})
# an idempotent producer's annotations (see ``idempotence``): read, and kept with the event
PRODUCER_KEYS = frozenset({b"com.microsoft:producer-id", b"com.microsoft:producer-epoch",
                           b"com.microsoft:producer-sequence-number"})

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


def split_sections(payload: bytes | memoryview) -> list[tuple[int, int, int, int]]:
    """Split an encoded message into ``(descriptor, start, value start, end)`` sections."""
    sections = []
    pos, size = 0, len(payload)
    while pos < size:
        if payload[pos] != 0x00 or pos + 2 >= size:
            raise CodecError(f"message section at byte {pos} is not a described type")
        if payload[pos + 1] == 0x53:  # the usual smallulong descriptor, inline: this runs once per section
            descriptor, value_start = payload[pos + 2], pos + 3
        else:
            descriptor, value_start = described_at(payload, pos)
        if not SEC_HEADER <= descriptor <= SEC_FOOTER:
            raise CodecError(f"unknown message section descriptor 0x{descriptor:x}")
        end = skip_value(payload, value_start)
        sections.append((descriptor, pos, value_start, end))
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
            kept = []
            for key, entry_start, entry_end in map_entries(mv, value_start, end):
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


# ---------------------------------------------------------------------------------------------
# Frames


def frame_bytes(body: bytes | bytearray, channel: int = 0, frame_type: int = FRAME_AMQP) -> bytes:
    return _FRAME_HEADER.pack(len(body) + 8, 2, frame_type, channel) + body


def encode_performative(frame: Any, channel: int = 0, frame_type: int = FRAME_AMQP) -> bytes:
    """A complete frame for an SDK performative namedtuple (all fields written)."""
    body = bytearray()
    _encode.encode_value(body, _encode.describe_performative(frame))
    return frame_bytes(body, channel, frame_type)


def described_at(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """``(descriptor code, value position)`` of the described type at ``pos``.

    AMQP lets a descriptor be a ulong (``0x53`` smallulong or ``0x80`` ulong) or its symbolic name
    (``amqp:open:list``); symbolic names of what the endpoint reads map to their codes.
    """
    size = len(buf)
    if pos + 2 >= size or buf[pos] != 0x00:
        raise CodecError(f"value at byte {pos} is not a described type")
    kind = buf[pos + 1]
    if kind == 0x53:
        return buf[pos + 2], pos + 3
    if kind == 0x80 and pos + 10 <= size:
        return int.from_bytes(buf[pos + 2 : pos + 10], "big"), pos + 10
    if kind == 0x44:  # ulong0
        return 0, pos + 2
    if kind in (0xA3, 0xB3):
        end = skip_value(buf, pos + 1)
        name = bytes(buf[pos + (3 if kind == 0xA3 else 6) : end])
        code = DESCRIPTOR_NAMES.get(name)
        if code is None:
            raise CodecError(f"unknown descriptor {name.decode('ascii', 'replace')!r} at byte {pos}")
        return code, end
    raise CodecError(f"described type at byte {pos} has an unsupported descriptor")


def decode_performative(body: memoryview) -> tuple[int, list[Any]]:
    """Decode a frame body into ``(descriptor code, fields)``.

    Fields are padded with ``None`` to the performative's full arity (a sender may omit trailing
    null fields), so a field is always at its index; a transfer's payload is appended after its 11
    fields, at ``fields[TRANSFER_PAYLOAD]`` however many fields the sender wrote.
    """
    code, value_start = described_at(body, 0)
    if value_start >= len(body):
        raise CodecError("performative without a field list")
    constructor = body[value_start]
    if constructor not in (0xC0, 0xD0, 0x45):
        raise CodecError("frame body is not a described list performative")
    # validate extents first so a lying size cannot make the SDK decoder read garbage
    end = skip_value(body, value_start)
    if code != TRANSFER and end != len(body):
        raise CodecError("trailing bytes after performative")
    if constructor == 0x45:
        fields: list[Any] = []
    elif value_start == 3:  # the usual smallulong descriptor: the SDK's frame decoder, the fast path
        try:
            fields = _decode.decode_frame(body[:end])[1]
        except Exception as exc:  # the SDK decoder raises anything from IndexError to TypeError
            raise CodecError(f"undecodable performative: {exc!r}") from exc
        if code == TRANSFER:
            fields.pop()  # the decoder appends what follows the fields; the payload is appended below
    else:
        fields = decode_value(body[value_start:end])
    if not isinstance(fields, list):
        raise CodecError("performative fields are not a list")
    arity = ARITY.get(code)
    if arity is not None:
        if len(fields) > arity:
            raise CodecError(f"performative 0x{code:x} has {len(fields)} fields; AMQP 1.0 defines {arity}")
        fields.extend([None] * (arity - len(fields)))
    if code == TRANSFER:
        fields.append(body[end:])
    return code, fields


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


# AMQP types a message-id or correlation-id may have (part 3.2.4): ulong, uuid, binary, string.
_MESSAGE_ID_CONSTRUCTORS = frozenset({0x44, 0x53, 0x80, 0x98, 0xA0, 0xB0, 0xA1, 0xB1})
_NULL = b"\x40"


class Request:
    """A ``$cbs`` or ``$management`` request: what the broker reads of it.

    ``message_id`` is the request's message-id as encoded by the client (``b"\\x40"``, null, when it
    sent none): the reply echoes it byte for byte as its correlation-id, so a client matching replies
    by value and type (a string is not the binary of its UTF-8) finds its reply.
    """

    __slots__ = ("application_properties", "value", "message_id")

    def __init__(self, application_properties: dict[Any, Any], value: Any, message_id: bytes):
        self.application_properties = application_properties
        self.value = value
        self.message_id = message_id


def list_items(buf: bytes | memoryview, start: int) -> tuple[int, int]:
    """``(position of the first item, item count)`` of the list value at ``start``."""
    code = buf[start]
    if code == 0x45:
        return start + 1, 0
    if code == 0xC0:
        return start + 3, buf[start + 2]
    if code == 0xD0:
        return start + 9, _U32.unpack_from(buf, start + 5)[0]
    raise CodecError(f"expected a list, found constructor 0x{code:02x} at byte {start}")


def message_id_bytes(buf: bytes | memoryview, start: int, end: int) -> bytes:
    """The encoded message-id (first field) of the properties list in ``buf[start:end]``."""
    pos, count = list_items(buf, start)
    if count == 0:
        return _NULL
    field_end = skip_value(buf, pos)
    if field_end > end:
        raise CodecError("properties section runs past its end")
    raw = bytes(buf[pos:field_end])
    if raw != _NULL and raw[0] not in _MESSAGE_ID_CONSTRUCTORS:
        raise CodecError(f"message-id of AMQP type 0x{raw[0]:02x} is none of ulong, uuid, binary, string")
    return raw


def parse_request(payload: bytes | memoryview) -> Request:
    """Read a management/CBS request: application properties, body and the message-id as sent."""
    mv = memoryview(payload)
    properties: dict[Any, Any] = {}
    value: Any = None
    message_id = _NULL
    for descriptor, _start, value_start, end in split_sections(mv):
        if descriptor == SEC_PROPERTIES:
            message_id = message_id_bytes(mv, value_start, end)
        elif descriptor == SEC_APP_PROPS:
            decoded = decode_value(mv[value_start:end])
            if not isinstance(decoded, dict):
                raise CodecError("application-properties section is not a map")
            properties = decoded
        elif descriptor in (SEC_VALUE, SEC_DATA) and value is None:
            value = decode_value(mv[value_start:end])
    return Request(properties, value, message_id)


_EMPTY_PROPERTY_FIELDS = _NULL * (PROPERTIES_ARITY - 6)


def _encode_any(value: Any) -> bytes:
    """One value with the SDK encoder, except booleans: written as ``true``/``false`` (0x41/0x42),
    the form the service uses; the SDK writes 0x56 0x01, which the JS SDK's AMQP library reads as 1."""
    if isinstance(value, bool):
        return b"\x41" if value else b"\x42"
    out = bytearray()
    _encode.encode_value(out, value)
    return bytes(out)


def _encode_map_section(descriptor: int, entries: dict[str, Any]) -> bytes:
    body = b"".join(_encode_any(key) + _encode_any(value) for key, value in entries.items())
    return (b"\x00\x53" + bytes((descriptor,)) + b"\xd1" + _U32.pack(len(body) + 4) + _U32.pack(2 * len(entries))
            + body)


def reply_message(correlation_id: bytes, status: int, description: str, body: dict[str, Any] | None = None) -> bytes:
    """An encoded management/CBS reply (both spellings of the status keys).

    :param correlation_id: the request's message-id as encoded by the client (see :class:`Request`).
    :param body: the reply's amqp-value map; values are Python values or SDK-typed (:func:`long`).
    """
    fields = _NULL * 5 + correlation_id + _EMPTY_PROPERTY_FIELDS  # all 13 fields: the SDK reads by position
    if len(fields) + 1 < 256:
        properties = b"\x00\x53\x73\xc0" + bytes((len(fields) + 1, PROPERTIES_ARITY)) + fields
    else:
        properties = b"\x00\x53\x73\xd0" + _U32.pack(len(fields) + 4) + _U32.pack(PROPERTIES_ARITY) + fields
    status_props = _encode_map_section(SEC_APP_PROPS, {
        "status-code": status, "statusCode": status,
        "status-description": description, "statusDescription": description,
    })
    value = _encode_map_section(SEC_VALUE, body) if body is not None else b"\x00\x53\x77\x40"
    return properties + status_props + value
