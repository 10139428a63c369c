"""The application properties stamped on every published event (names are a public contract).

Defined here once: the publishers stamp them, the event rulebook (:mod:`.events`) keeps user
properties out of their ``eh.`` prefix, and ingestion reads them. Consumers dedupe with a per-(``eh.group``, partition) high-water mark of ``eh.seq``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GROUP = "eh.group"
SEQ = "eh.seq"
BATCH = "eh.batch"
OWNER = "eh.owner"
RESERVED_PREFIX = "eh."
STAMPS = (GROUP, SEQ, BATCH, OWNER)

_GROUP_B, _SEQ_B, _BATCH_B = GROUP.encode(), SEQ.encode(), BATCH.encode()


def batch_stamp(batch_id: str) -> str:
    """The ``eh.batch`` value: the first 16 hex digits of the batch id."""
    return batch_id[:16]


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
            from azure.eventhub._pyamqp._encode import TYPE, VALUE
            from azure.eventhub._pyamqp.types import AMQPTypes

            self._typed = True
            self._type, self._value, self._long = TYPE, VALUE, AMQPTypes.long
            self._fixed = {
                GROUP: {TYPE: AMQPTypes.string, VALUE: group.encode()},
                BATCH: {TYPE: AMQPTypes.string, VALUE: batch.encode()},
                OWNER: {TYPE: AMQPTypes.long, VALUE: int(owner)},
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


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def read_stamp(properties: Mapping[Any, Any] | None) -> tuple[str, int, str] | None:
    """``(group, seq, batch)`` of a received event's properties (keys may be bytes), else None."""
    if not properties:
        return None
    group = properties.get(_GROUP_B, properties.get(GROUP))
    seq = properties.get(_SEQ_B, properties.get(SEQ))
    batch = properties.get(_BATCH_B, properties.get(BATCH))
    if group is None or seq is None or batch is None:
        return None
    return _text(group), int(seq), _text(batch)
