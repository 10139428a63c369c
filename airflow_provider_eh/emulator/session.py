"""AMQP layer: one session's state, the connection error type and the performative field reader."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import frames

if TYPE_CHECKING:
    from .connection import Connection
    from .links import Link, ReplyLink

BIG_WINDOW = 2**31 - 1


class ProtocolError(Exception):
    """The peer broke the protocol; the connection is closed with this condition."""

    def __init__(self, condition: str, description: str):
        super().__init__(description)
        self.condition = condition
        self.description = description


class Session:
    """One AMQP session: our channel mirrors the client's."""

    def __init__(self, conn: Connection, channel: int, next_incoming_id: int):
        self.conn = conn
        self.channel = channel
        self.next_incoming_id = next_incoming_id
        self.next_outgoing_id = 0
        self.next_delivery_id = 0
        self.links: dict[int, Link] = {}
        self.reply_links: dict[str, ReplyLink] = {}

    def send_flow(self, link: Link | None = None, delivery_count: int | None = None, credit: int | None = None) -> None:
        self.conn.write(frames.flow_frame(
            self.channel, self.next_incoming_id, BIG_WINDOW, self.next_outgoing_id, BIG_WINDOW,
            None if link is None else link.handle, delivery_count, credit))


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
