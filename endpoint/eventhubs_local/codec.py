"""AMQP 1.0 values and descriptors: the encoding shared by message sections and frames.

What both layers of the endpoint read: skipping and decoding values without a full decode,
described types (a descriptor may be a ulong or its symbolic name), the sections of a message and
the entries of a map. Events (``events``), ``$cbs``/``$management`` messages (``requests``) and
frames (``frames``) are built on it; it imports none of them.
"""

from __future__ import annotations

import struct
from typing import Any

from .sdk_amqp import DECODE_BY_CONSTRUCTOR, TYPE, VALUE, AMQPTypes

# Performative descriptor codes.
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_RESPONSE, SASL_OUTCOME = range(0x40, 0x45)

# Message section descriptor codes.
SEC_HEADER, SEC_DELIVERY_ANN, SEC_MESSAGE_ANN, SEC_PROPERTIES, SEC_APP_PROPS = 0x70, 0x71, 0x72, 0x73, 0x74
SEC_DATA, SEC_SEQUENCE, SEC_VALUE, SEC_FOOTER = 0x75, 0x76, 0x77, 0x78

# Terminus descriptors and the message-properties field count (AMQP 1.0 part 3.5.3, 3.5.4, 3.2.4).
SOURCE, TARGET = 0x28, 0x29
PROPERTIES_ARITY = 13

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

_U32 = struct.Struct(">I")


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
        return DECODE_BY_CONSTRUCTOR[mv[0]](mv[1:])[1]
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


def names_symbol(values: Any, symbol: bytes) -> bool:
    """Whether a symbol-or-array field (a link's desired or offered capabilities) holds ``symbol``."""
    items = values if isinstance(values, list) else [values]
    return any(isinstance(v, (bytes, bytearray, memoryview)) and bytes(v) == symbol for v in items)


def long(value: int) -> dict[str, Any]:
    """An AMQP long for the SDK encoder (it would pick a 32-bit int for a bare Python int)."""
    return {TYPE: AMQPTypes.long, VALUE: value}


def text(value: Any) -> str | None:
    """A string or symbol field as text (None stays None)."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)
