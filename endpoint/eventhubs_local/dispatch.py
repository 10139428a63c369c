"""AMQP layer: the frame dispatcher, a table from performative code to a small handler.

Each handler takes ``(conn, channel, session, fields)`` -- ``session`` is None on a channel with no
session -- and answers on the connection. A performative outside the table closes the connection
with ``amqp:not-implemented``; ``open`` is handled before the table (``Connection``), so a second
one is ``amqp:not-allowed``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from . import frames
from .attach import on_attach
from .codec import ATTACH, BEGIN, CLOSE, DETACH, DISPOSITION, END, FLOW, OPEN, TRANSFER
from .frames import ProtocolError, field
from .links import BIG_WINDOW, Conn, DeliveryLink, ReplyLink, Session
from .sdk_amqp import perf

_LOG = logging.getLogger("eventhubs_local")

Handler = Callable[[Conn, int, "Session | None", list[Any]], None]


def _transfer(conn: Conn, channel: int, session: Session | None, fields: list[Any]) -> None:
    if session is None:
        raise ProtocolError("amqp:connection:framing-error", f"transfer on unused channel {channel}")
    session.next_incoming_id += 1
    handle = field(fields, 0, int)
    link = session.links.get(handle)
    if link is None and handle in session.closing:
        return  # sent before the client saw our detach of this link
    if link is None or not hasattr(link, "on_transfer"):
        raise ProtocolError("amqp:session:unattached-handle", f"transfer on unattached handle {fields[0]!r}")
    link.on_transfer(fields)


def _flow(conn: Conn, channel: int, session: Session | None, fields: list[Any]) -> None:
    if session is None:
        return  # a flow racing the end of its session
    handle = fields[4]
    if handle is not None:
        link = session.links.get(handle)
        if isinstance(link, DeliveryLink):
            link.on_flow(field(fields, 5, int, True), field(fields, 6, int, True))


def _disposition(conn: Conn, channel: int, session: Session | None, fields: list[Any]) -> None:
    pass  # our deliveries are pre-settled


def _attach(conn: Conn, channel: int, session: Session | None, fields: list[Any]) -> None:
    if session is None:
        raise ProtocolError("amqp:connection:framing-error", f"attach on unused channel {channel}")
    on_attach(conn, session, fields)


def _detach(conn: Conn, channel: int, session: Session | None, fields: list[Any]) -> None:
    if session is None:
        _LOG.debug("conn %s: detach on ended channel %s ignored", conn.id, channel)
        return
    handle = field(fields, 0, int)
    if handle in session.closing:
        session.closing.discard(handle)  # the client's answer to our detach: the handle is free again
        return
    link = session.links.pop(handle, None)
    if link is not None:
        link.detached()
        if isinstance(link, ReplyLink) and session.reply_links.get(link.address) is link:
            del session.reply_links[link.address]
        _LOG.info("conn %s: link %r detached by client", conn.id, link)
    conn.write(frames.encode_performative(perf.DetachFrame(handle=handle, closed=bool(fields[1]), error=None), channel))


def _begin(conn: Conn, channel: int, session: Session | None, fields: list[Any]) -> None:
    if session is not None:
        raise ProtocolError("amqp:connection:framing-error", f"begin on channel {channel} already in use")
    conn.sessions[channel] = Session(conn, channel, field(fields, 1, int))
    conn.write(frames.encode_performative(perf.BeginFrame(
        remote_channel=channel, next_outgoing_id=0, incoming_window=BIG_WINDOW, outgoing_window=BIG_WINDOW,
        handle_max=4294967295, offered_capabilities=None, desired_capabilities=None, properties=None),
        channel))


def _end(conn: Conn, channel: int, session: Session | None, fields: list[Any]) -> None:
    if session is not None:
        for link in session.links.values():
            link.detached()
        del conn.sessions[channel]
    conn.write(frames.encode_performative(perf.EndFrame(error=None), channel))


def _close(conn: Conn, channel: int, session: Session | None, fields: list[Any]) -> None:
    conn.write(frames.encode_performative(perf.CloseFrame(error=None)))
    conn.stage = "closed"
    conn.closed = True
    if conn.transport is not None:
        conn.transport.close()


def _second_open(conn: Conn, channel: int, session: Session | None, fields: list[Any]) -> None:
    raise ProtocolError("amqp:not-allowed", "second open on one connection")


HANDLERS: dict[int, Handler] = {
    TRANSFER: _transfer, FLOW: _flow, DISPOSITION: _disposition, ATTACH: _attach, DETACH: _detach,
    BEGIN: _begin, END: _end, CLOSE: _close, OPEN: _second_open,
}


def dispatch(conn: Conn, code: int, channel: int, fields: list[Any]) -> None:
    """Hand one performative of a running connection to its handler."""
    handler = HANDLERS.get(code)
    if handler is None:
        raise ProtocolError("amqp:not-implemented", f"unknown performative 0x{code:x}")
    handler(conn, channel, conn.sessions.get(channel), fields)
