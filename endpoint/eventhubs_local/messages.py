"""``$cbs`` and ``$management`` messages: reading a request, encoding its reply.

What the AMQP layer hands the broker of a request (application properties, body) and how the
broker's answer (status, description, body map) goes back as an AMQP message.
"""

from __future__ import annotations

import struct
from typing import Any

from .codec import (
    PROPERTIES_ARITY,
    SEC_APP_PROPS,
    SEC_DATA,
    SEC_PROPERTIES,
    SEC_VALUE,
    CodecError,
    decode_value,
    list_items,
    skip_value,
    split_sections,
)
from .sdk_amqp import encode_value

# AMQP types a message-id or correlation-id may have (part 3.2.4): ulong, uuid, binary, string.
_MESSAGE_ID_CONSTRUCTORS = frozenset({0x44, 0x53, 0x80, 0x98, 0xA0, 0xB0, 0xA1, 0xB1})
_NULL = b"\x40"
_U32 = struct.Struct(">I")  # this module's own: see ``frames._U32``


class Request:
    r"""A ``$cbs`` or ``$management`` request: what the broker reads of it.

    ``message_id`` is the request's message-id as encoded by the client (``b"\x40"``, null, when it
    sent none): the reply echoes it byte for byte as its correlation-id, so a client matching replies
    by value and type (a string is not the binary of its UTF-8) finds its reply.
    """

    __slots__ = ("application_properties", "value", "message_id")

    def __init__(self, application_properties: dict[Any, Any], value: Any, message_id: bytes):
        self.application_properties = application_properties
        self.value = value
        self.message_id = message_id


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


def parse_request(payload: bytes | bytearray | memoryview) -> Request:
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
    encode_value(out, value)
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
