"""AMQP layer: the attach performative: which link an address opens, and the attach we answer with.

Address resolution and admission are the broker's (``entities``, ``consumers``, ``Broker``); this
module reads the attach fields, builds the link and answers with an attach, or with an attach and a
detach carrying the refusal's condition.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from . import events, frames, idempotence
from .auth import LISTEN, SEND
from .broker import MAX_MESSAGE_SIZE
from .codec import CodecError, names_symbol, text
from .consumers import start_position
from .entities import Refused, consumer_source, entity_url, hub_for, producer_target
from .frames import ProtocolError, field
from .links import Conn, DeliveryLink, IngressLink, Link, ReplyLink, RequestLink, Session, address_host
from .log import PartitionLog
from .sdk_amqp import Source, Target, perf

_LOG = logging.getLogger("eventhubs_local")
_FILTER_KEY = b"apache.org:selector-filter:string"
_ADDRESS = re.compile(r"^(?:[a-z]+://[^/]*/)?(?P<path>.*)$", re.IGNORECASE)


def on_attach(conn: Conn, session: Session, fields: list[Any]) -> None:
    """Answer a client's attach: open the link its address names, or answer with an attach (a sender's with
    a null target) and a detach that carries why the link was refused."""
    if fields[0] is None or fields[2] is None:
        raise ProtocolError("amqp:decode-error", "attach without name, handle and role")
    name = fields[0]
    handle = field(fields, 1, int)
    client_receives = bool(fields[2])
    source, target = fields[5], fields[6]
    properties = fields[13] if isinstance(fields[13], dict) else {}
    if handle in session.links:
        raise ProtocolError("amqp:session:handle-in-use", f"handle {handle} already attached")
    session.closing.discard(handle)  # a client that never answered our detach of it uses the handle anew
    terminus = source if client_receives else target
    if terminus is not None and not isinstance(terminus, list):
        raise ProtocolError("amqp:decode-error", "link source/target is not a terminus list")
    address = text(terminus[0]) if terminus else None
    path = address_path(address)
    # the SDK's namedtuples default every field (``defaults=(None,) * n``), a length mypy does not count
    echo_source = Source(address=text(source[0]) if isinstance(source, list) and source else None)  # type: ignore[call-arg]
    echo_target = Target(address=text(target[0]) if isinstance(target, list) and target else None)  # type: ignore[call-arg]
    try:
        link = _make_link(conn, session, name, handle, client_receives, address or "", path, source, properties,
                          fields[12])
        if isinstance(link, IngressLink):
            _producer_attach(conn, link, fields[12], properties)
    except Refused as refused:
        _LOG.info("conn %s: link %s to %r refused: %s %s", conn.id, text(name), address, refused.condition,
                  refused.description)
        # a refused link: an attach, then a closing detach with the error. A refused sender's attach has a
        # null target, as AMQP 1.0 (2.6.3) says: the Python SDK then raises the detach's error (with the
        # target echoed it has sent its first event already, and fails it with amqp:unknown-error). A
        # refused receiver's attach echoes its source: the aio SDK drops the error of a receiver refused
        # with a null source, without calling on_error, and reconnects for ever.
        _send_attach(conn, session, name, handle, client_receives, echo_source, echo_target if client_receives else None,
                     None)
        session.closing.add(handle)
        conn.write(frames.encode_performative(
            perf.DetachFrame(handle=handle, closed=True, error=frames.error(refused.condition, refused.description)),
            session.channel))
        return
    session.links[handle] = link
    props = None
    offered = None
    if isinstance(link, DeliveryLink) and link.epoch is not None:
        props = {b"com.microsoft:epoch": link.epoch}
    if isinstance(link, DeliveryLink) and link.runtime_metrics:
        offered = [events.RUNTIME_METRIC]
    if isinstance(link, IngressLink) and link.producer_group is not None:
        props = idempotence.attach_properties(link.producer_attach)  # type: ignore[arg-type]
        offered = [idempotence.CAPABILITY]
    _send_attach(conn, session, name, handle, client_receives, echo_source, echo_target, props, offered)
    _LOG.info("conn %s: link %r attached", conn.id, link)
    if isinstance(link, (IngressLink, RequestLink)):
        link.grant_credit()


def _send_attach(conn: Conn, session: Session, name: Any, handle: int, client_receives: bool, source: Any,
                 target: Any, properties: Any, offered_capabilities: Any = None) -> None:
    conn.write(frames.encode_performative(perf.AttachFrame(
        name=name, handle=handle, role=not client_receives, send_settle_mode=0 if not client_receives else 1,
        rcv_settle_mode=0, source=source, target=target, unsettled=None, incomplete_unsettled=False,
        initial_delivery_count=0 if client_receives else None, max_message_size=MAX_MESSAGE_SIZE,
        offered_capabilities=offered_capabilities, desired_capabilities=None, properties=properties),
        session.channel))


def _make_link(conn: Conn, session: Session, name: Any, handle: int, client_receives: bool, address: str,
               path: list[str], source: Any, properties: dict[Any, Any], desired_capabilities: Any = None) -> Link:
    if path and path[0] in ("$cbs", "$management"):
        node = path[0]
        if client_receives:
            reply = ReplyLink(session, name, handle, node)
            session.reply_links[node] = reply
            return reply
        return RequestLink(session, name, handle, node)
    if not path:
        raise Refused("amqp:not-found", f"link address {address!r} names no entity")
    broker = conn.broker
    resource = entity_url(address_host(address, conn.hostname), *path)
    hub = hub_for(broker.store, path[0], conn.authorized_hubs if broker.validator is not None else None,
                  LISTEN if client_receives else SEND, resource)
    if not client_receives:
        partition = producer_target(hub, path, address)
        return IngressLink(session, name, handle, address, hub=hub, partition=partition)
    where = consumer_source(hub, path, address)
    epoch = None
    for key, value in properties.items():
        if text(key) == "com.microsoft:epoch":
            if not isinstance(value, int):
                raise Refused("amqp:invalid-field", f"owner level {value!r} is not an integer")
            epoch = value
    start = parse_start(source if isinstance(source, list) else None, where.log)
    link = DeliveryLink(session, name, handle, address, hub=hub, group=where.group,
                        partition_id=where.partition_id, log=where.log, start_seq=start, epoch=epoch,
                        runtime_metrics=names_symbol(desired_capabilities, events.RUNTIME_METRIC))
    try:
        broker.receivers.register(link)
    except Refused:
        link.closed = True
        where.log.listeners.discard(link.wake)
        raise
    return link


def _producer_attach(conn: Conn, link: IngressLink, desired_capabilities: Any,
                     properties: dict[Any, Any]) -> None:
    """An idempotent sender joins its producer group; senders of a lower owner level stay attached and
    their next send is refused (producer-epoch-stolen)."""
    try:
        requested = idempotence.link_request(desired_capabilities, properties)
    except CodecError as exc:
        raise Refused("amqp:invalid-field", str(exc)) from None
    if requested is None or not conn.broker.idempotent_producers:
        return
    attached = conn.broker.join_producer_group(link.hub, link.partition, link.address, requested)
    link.producer_attach = attached
    link.producer_group = attached.group
    link.producer_epoch = attached.group.epoch


def address_path(address: Any) -> list[str]:
    """Path segments of a link address, without scheme and host."""
    if isinstance(address, (bytes, bytearray, memoryview)):
        address = bytes(address).decode("utf-8", "replace")
    if not isinstance(address, str):
        return []
    match = _ADDRESS.match(address)
    path = match.group("path") if match else address
    return [p for p in path.split("/") if p]


def parse_start(source: list[Any] | None, log: PartitionLog) -> int:
    """The first sequence number to deliver, from the link source's selector filter (field 7 of the source)."""
    filters = source[7] if source and len(source) > 7 else None
    expression = None
    for key, value in (filters or {}).items():
        if bytes(key) == _FILTER_KEY if isinstance(key, (bytes, bytearray)) else key == _FILTER_KEY.decode():
            expression = value
    return start_position(expression, log)
