"""AMQP 1.0 frames: performatives decoded by position, and the frames the endpoint sends.

Performatives are decoded and (except for the hot paths) encoded with the SDK's own ``_pyamqp``
codec, which always writes every field of a performative: the SDK's decoder reads fields by
position and breaks on shortened lists. The two hot paths -- delivering stored events and
acknowledging received ones -- are encoded by hand here, because the generic encoder costs
tens of microseconds per frame.
"""

from __future__ import annotations

import struct
from typing import Any

from .codec import (
    ATTACH,
    BEGIN,
    CLOSE,
    DETACH,
    DISPOSITION,
    END,
    FLOW,
    OPEN,
    SASL_CHALLENGE,
    SASL_INIT,
    SASL_MECHANISMS,
    SASL_OUTCOME,
    SASL_RESPONSE,
    TRANSFER,
    CodecError,
    decode_value,
    described_at,
    skip_value,
)
from .sdk_amqp import AMQPError, AMQPTypes, decode_frame, describe_performative, encode_value, perf

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
FRAME_AMQP = 0
FRAME_SASL = 1

# Number of fields of each performative the endpoint reads (AMQP 1.0 part 2.7 and 5.3.3).
ARITY = {OPEN: 10, BEGIN: 8, ATTACH: 14, FLOW: 11, TRANSFER: 11, DISPOSITION: 6, DETACH: 3, END: 1, CLOSE: 1,
         SASL_MECHANISMS: 1, SASL_INIT: 3, SASL_CHALLENGE: 1, SASL_RESPONSE: 1, SASL_OUTCOME: 2}
TRANSFER_PAYLOAD = 11

_FRAME_HEADER = struct.Struct(">IBBH")
# a Struct of this module, not imported: Python calls methods of imported names without its method fast path
_U32 = struct.Struct(">I")



def frame_bytes(body: bytes | bytearray, channel: int = 0, frame_type: int = FRAME_AMQP) -> bytes:
    """A complete frame: the 8-byte frame header (size, data offset, type, channel), then ``body``."""
    return _FRAME_HEADER.pack(len(body) + 8, 2, frame_type, channel) + body


def encode_performative(frame: Any, channel: int = 0, frame_type: int = FRAME_AMQP) -> bytes:
    """A complete frame for an SDK performative namedtuple (all fields written)."""
    body = bytearray()
    encode_value(body, describe_performative(frame))
    return frame_bytes(body, channel, frame_type)


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
            fields = decode_frame(body[:end])[1]
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
    """The server's open performative: its container id, the frame size and idle timeout it offers."""
    return encode_performative(
        perf.OpenFrame(
            container_id=container_id, hostname=None, max_frame_size=max_frame_size, channel_max=65535,
            idle_timeout=idle_timeout_ms, outgoing_locales=None, incoming_locales=None,
            offered_capabilities=None, desired_capabilities=None, properties={},
        )
    )


def sasl_mechanisms_frame() -> bytes:
    """The SASL mechanisms the endpoint offers (ANONYMOUS, MSSBCBS); authorization comes later, as a token on ``$cbs``."""
    return encode_performative(perf.SASLMechanism(sasl_server_mechanisms=[b"ANONYMOUS", b"MSSBCBS"]), 0, FRAME_SASL)


def sasl_outcome_frame(code: int = 0) -> bytes:
    """The SASL outcome frame (``code`` 0: authenticated)."""
    return encode_performative(perf.SASLOutcome(code=code, additional_data=None), 0, FRAME_SASL)


# -- hand-encoded hot paths ------------------------------------------------------------------

_TRANSFER_PREFIX = b"\x00\x53\x14\xd0"


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
    encode_value(state, {
        "TYPE": AMQPTypes.described,
        "VALUE": ({"TYPE": AMQPTypes.ulong, "VALUE": 0x25},
                  {"TYPE": AMQPTypes.list, "VALUE": [describe_performative(err)]}),
    })
    fields = b"\x41" + b"\x70" + _U32.pack(first) + b"\x70" + _U32.pack(last) + b"\x41" + bytes(state) + b"\x40"
    body = b"\x00\x53\x15\xd0" + _U32.pack(len(fields) + 4) + _U32.pack(6) + fields
    return _FRAME_HEADER.pack(8 + len(body), 2, FRAME_AMQP, channel) + body


def flow_frame(channel: int, next_incoming_id: int, incoming_window: int, next_outgoing_id: int,
               outgoing_window: int, handle: int | None = None, delivery_count: int | None = None,
               link_credit: int | None = None) -> bytes:
    """A flow performative: the session's windows and, with ``handle``, a link's delivery count and credit."""
    return encode_performative(
        perf.FlowFrame(
            next_incoming_id=next_incoming_id, incoming_window=incoming_window, next_outgoing_id=next_outgoing_id,
            outgoing_window=outgoing_window, handle=handle, delivery_count=delivery_count,
            link_credit=link_credit, available=None, drain=False, echo=False, properties=None,
        ),
        channel,
    )


class ProtocolError(Exception):
    """The peer broke the protocol; the connection is closed with this condition."""

    def __init__(self, condition: str, description: str):
        super().__init__(description)
        self.condition = condition
        self.description = description


def field(fields: list[Any], index: int, kind: type, optional: bool = False) -> Any:
    """Performative field ``index``, checked to be a ``kind`` (and present unless ``optional``)."""
    value = fields[index] if len(fields) > index else None
    if value is None:
        if optional:
            return None
        raise ProtocolError("amqp:invalid-field", f"performative field {index} is missing")
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ProtocolError("amqp:invalid-field", f"performative field {index} has the wrong type {type(value).__name__}")
    return value
