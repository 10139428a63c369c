"""Encoding stamped events: typed stamps for the SDK's encoder, or straight AMQP bytes checked against it.

:class:`StampEncoder` builds one event's application properties (the user's, then the four stamps of
:mod:`airflow_provider_eh.stamps`) pre-typed for the SDK's encoder; the sender uses it whenever it
goes through ``EventData``.

Publishing is bound by the client's CPU: the SDK builds an ``EventData``, converts it to a pyamqp
``Message`` and runs its pure-Python encoder, which guesses every property value's type, for each
event (twice, through ``EventDataBatch.add``). Our events all have the same shape: a single data
body, no header, no message properties, and application properties made of the user's properties
followed by four stamps of which only ``eh.seq`` changes. :class:`StampedMessageEncoder` writes
that shape directly (a typed batch's events have a message-properties section with their content
type in front, the same for every event, written once per batch by the SDK's encoder)::

    00 53 74  map8|map32 (size, count)  <user pairs> <eh.group> <eh.batch> <eh.owner> <eh.seq>
    00 53 75  vbin8|vbin32 (length)     <body>

``eh.group``, ``eh.batch`` and ``eh.owner`` are encoded once per batch (by the SDK's encoder), a
user's properties once per event by the SDK's encoder, and the rest is byte concatenation.

It never guesses: :meth:`StampedMessageEncoder.create` encodes probe events (small and large
sequence numbers, short and long bodies, with and without user properties, both map widths) with
the SDK's own path and returns ``None`` unless every byte matches, so an SDK whose wire format or
internals differ gets the SDK path instead. Tracing (an azure-core tracer configured) adds per-message
trace properties; the sender does not use this encoder then.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping
from typing import Any

from airflow_provider_eh.client import sdk_internals
from airflow_provider_eh.stamps import BATCH, GROUP, OWNER, SEQ

log = logging.getLogger(__name__)


class StampEncoder:
    """
    Builds the stamped properties of one (group, batch, owner) cheaply.

    The SDK's pure-Python AMQP encoder guesses each untyped value's type by trying to index it and
    catching the error, which costs more than the rest of the event; our four stamps are handed to it
    pre-typed (AMQP ``string`` and ``long``, the same wire types it would choose), built once per batch
    except the sequence number. Falls back to plain values when the SDK's encoder is not pyamqp.
    """

    def __init__(self, group: str, batch: str, owner: int):
        try:
            self._type, self._value = sdk_internals.typed_value_keys()
            self._long = sdk_internals.amqp_type("long")
            self._typed = True
            self._fixed: dict[str, Any] = {
                GROUP: sdk_internals.typed("string", group.encode()),
                BATCH: sdk_internals.typed("string", batch.encode()),
                OWNER: sdk_internals.typed("long", int(owner)),
            }
        except ImportError:  # another transport: plain values
            self._typed = False
            self._fixed = {GROUP: group, BATCH: batch, OWNER: int(owner)}

    def user_value(self, value: Any) -> Any:
        """A user's property value as it goes on the wire.

        The SDK's encoder writes every Python ``int`` as a 32-bit AMQP ``int`` and fails on larger
        ones; those are handed to it typed as AMQP ``long`` instead, which every receiver decodes
        back to the same integer.
        """
        if self._typed and type(value) is int and not -(2**31) <= value < 2**31:
            return {self._type: self._long, self._value: value}
        return value

    def properties(self, user: Mapping[str, Any] | None, seq: int) -> dict[str, Any]:
        out = {k: self.user_value(v) for k, v in user.items()} if user else {}
        out.update(self._fixed)
        out[SEQ] = {self._type: self._long, self._value: seq} if self._typed else seq
        return out

_APP_PROPERTIES = b"\x00\x53\x74"  # described type, descriptor smallulong 0x74 (application-properties)
_DATA = b"\x00\x53\x75"  # described type, descriptor smallulong 0x75 (data)
_STAMP_PAIRS = 4
_KEPT_PAIRS = 4096  # encoded user property pairs an encoder keeps
_pack_q = struct.Struct(">q").pack
_pack_L = struct.Struct(">L").pack


def _long(value: int) -> bytes:
    """An AMQP long as the SDK writes it: smalllong for -128..127, else 8 bytes."""
    if -128 <= value <= 127:
        return b"\x55" + (value & 0xFF).to_bytes(1, "big")
    return b"\x81" + _pack_q(value)


def set_stamps(event: Any, properties: dict[str, Any], annotations: dict[bytes, Any] | None) -> None:
    """Give an SDK ``EventData`` its application properties and (a fenced send's) message annotations."""
    event.properties = properties
    if annotations:
        event.raw_amqp_message.annotations.update(annotations)


def _sdk_bytes(body: bytes, properties: dict[str, Any], annotations: dict[bytes, Any] | None = None,
               content_type: str | None = None) -> bytes:
    """One event's encoding by the SDK's own path (the reference the fast path must match)."""
    from azure.eventhub import EventData

    event = EventData(body)
    if content_type is not None:
        event.content_type = content_type
    set_stamps(event, properties, annotations)
    return bytes(sdk_internals.sdk_encode(event))


def _properties_section(content_type: str | None) -> bytes:
    """The message-properties section of events whose only property is ``content_type``, as the SDK writes it
    (what an event with it has in front of the same event without it); empty for ``None``."""
    if content_type is None:
        return b""
    plain = _sdk_bytes(b"", {})
    typed = _sdk_bytes(b"", {}, content_type=content_type)
    if not typed.endswith(plain) or len(typed) == len(plain):
        raise ValueError("the SDK does not put the message properties in front of the rest")
    return typed[: len(typed) - len(plain)]


class StampedMessageEncoder:
    """AMQP bytes of stamped events of one (group, batch, owner); build it with :meth:`create`.

    ``content_type``: a typed batch's (``avro/binary+<schema id>``), the one message property of each event,
    whose section the SDK's encoder writes once per batch.
    """

    def __init__(self, group: str, batch: str, owner: int, content_type: str | None = None):
        self._properties = _properties_section(content_type)
        self._encode_value, self._string = sdk_internals.encode_value, sdk_internals.amqp_type("string")
        self._type, self._value = sdk_internals.typed_value_keys()
        self.stamps = StampEncoder(group, batch, owner)
        fixed = bytearray()
        for name, value in self.stamps.properties(None, 0).items():
            if name != SEQ:
                self._pair(fixed, name, value)
        self._pair(fixed, SEQ, None, key_only=True)
        self._fixed = bytes(fixed)
        self._kept: dict[tuple[Any, Any], bytes] = {}

    def _pair(self, out: bytearray, name: str, value: Any, *, key_only: bool = False) -> None:
        self._encode_value(out, {self._type: self._string, self._value: name})
        if not key_only:
            self._encode_value(out, value)

    def _user_pairs(self, properties: Mapping[str, Any]) -> bytes:
        """A user's properties as AMQP map pairs; the pair of a ``str`` or ``int`` value encoded once per batch
        and value (a property of few values costs a look-up per event)."""
        out = bytearray()
        kept = self._kept
        for name, value in properties.items():
            kind = type(value)
            if kind is not str and kind is not int:  # True == 1 and 0.0 == -0.0 as keys, not on the wire
                self._pair(out, name, self.stamps.user_value(value))
                continue
            pair = kept.get((name, value))
            if pair is None:
                encoded = bytearray()
                self._pair(encoded, name, self.stamps.user_value(value))
                if len(kept) >= _KEPT_PAIRS:
                    kept.clear()
                pair = kept[(name, value)] = bytes(encoded)
            out += pair
        return bytes(out)

    def encode(self, body: bytes, properties: Mapping[str, Any] | None, seq: int, annotations: bytes = b"") -> bytes:
        """The stamped event's bytes, exactly as the SDK would append them to a batch.

        ``annotations``: the message-annotations section, already encoded (a fenced link's, see
        :meth:`airflow_provider_eh.client.fencing.FencedLink.annotation_bytes`); it precedes the rest.
        """
        if properties:
            items = self._user_pairs(properties) + self._fixed + _long(seq)
            count = (len(properties) + _STAMP_PAIRS) * 2
        else:
            items = self._fixed + _long(seq)
            count = _STAMP_PAIRS * 2
        size = len(items)
        if count <= 255 and size < 255:
            head = _APP_PROPERTIES + bytes((0xC1, size + 1, count))
        else:
            head = _APP_PROPERTIES + b"\xd1" + _pack_L(size + 4) + _pack_L(count)
        n = len(body)
        data = _DATA + (bytes((0xA0, n)) if n <= 255 else b"\xb0" + _pack_L(n))
        return b"".join((annotations, self._properties, head, items, data, body))

    @classmethod
    def create(cls, group: str, batch: str, owner: int, *, annotated: bool = False,
               content_type: str | None = None) -> StampedMessageEncoder | None:
        """An encoder proven byte-identical to the SDK on probe events, or None (use the SDK path).

        ``annotated``: also prove it with a fenced link's message annotations in front; ``content_type``:
        each event's content type (a typed batch's), proven on every probe.
        """
        try:
            encoder = cls(group, batch, owner, content_type)
            stamps = encoder.stamps
            wide = {f"p{i}": "v" * 40 for i in range(6)}
            probes: list[tuple[bytes, dict[str, Any] | None, int]] = [
                (b"", None, 0), (b"x" * 200, None, 127), (b"y" * 255, None, 128), (b"z" * 256, None, -129),
                (b"w" * 70_000, None, 2**40),
                (b"q", {"a": "b", "n": 7, "l": 2**40, "f": 1.5, "t": True, "b": b"\x00", "z": None}, 5),
                (b"r" * 10, wide, 300),
            ]
            from airflow_provider_eh.client.fencing import FencedLink

            fence = FencedLink("0", 2**62 + 1, 7, -1)
            for body, props, seq in probes:
                if encoder.encode(body, props, seq) != _sdk_bytes(body, stamps.properties(props, seq),
                                                                  content_type=content_type):
                    log.debug("stamped-message encoder differs from the SDK on a probe; using the SDK path")
                    return None
                for pseq in (0, 128, 2**31 - 1) if annotated else ():  # with a fenced link's annotations
                    if (encoder.encode(body, props, seq, fence.annotation_bytes(pseq))
                            != _sdk_bytes(body, stamps.properties(props, seq), fence.annotations(pseq), content_type)):
                        log.debug("stamped-message encoder differs from the SDK on an annotated probe; using the SDK path")
                        return None
            return encoder
        except Exception as exc:  # any SDK layout we do not know: the SDK path
            log.debug("stamped-message encoder unavailable (%s: %s); using the SDK path", type(exc).__name__, exc)
            return None
