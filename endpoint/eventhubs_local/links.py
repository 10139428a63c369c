"""AMQP layer: sessions and their link endpoints: requests on ``$cbs``/``$management``, ingress of
events from producers, and delivery of stored events to consumers. Links turn transfers into broker
calls (``Broker.ingest``, ``Management.handle``) and are the broker's ``Producer``/``Consumer``.

Naming is from the client's point of view: an *ingress* link is a client sender (we receive), a
*delivery* link is a client receiver (we send).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Protocol

from . import events, frames, messages
from .broker import MAX_MESSAGE_SIZE, Broker, Client
from .codec import CodecError, long, text
from .idempotence import Attached, ProducerGroup
from .log import PartitionLog
from .management import LONG_FIELDS
from .sdk_amqp import perf
from .store import Hub

_LOG = logging.getLogger(__name__)

INGRESS_CREDIT = 1000
BIG_WINDOW = 2**31 - 1
_AUTHORITY = re.compile(r"^[a-z][a-z0-9+.-]*://([^/]+)", re.IGNORECASE)


def address_host(address: str, default: str) -> str:
    """The host (with its port) of a link address ``scheme://host/path``; ``default`` without one."""
    match = _AUTHORITY.match(address)
    return match.group(1) if match else default


class Conn(Client, Protocol):
    """What links, sessions and frame handlers use of their connection (``connection.Connection``),
    which is also the broker's :class:`~.broker.Client`."""

    id: int
    broker: Broker
    loop: Any
    sessions: dict[int, Session]
    authorized_hubs: dict[str, frozenset[str]]
    hostname: str
    remote_max_frame_size: int
    stage: str
    closed: bool
    paused: bool
    transport: Any

    def write(self, data: bytes) -> None: ...

    def protocol_error(self, condition: str, description: str) -> None: ...


class Session:
    """One AMQP session: our channel mirrors the client's."""

    def __init__(self, conn: Conn, channel: int, next_incoming_id: int):
        self.conn = conn
        self.channel = channel
        self.next_incoming_id = next_incoming_id
        self.next_outgoing_id = 0
        self.next_delivery_id = 0
        self.links: dict[int, Link] = {}
        self.reply_links: dict[str, ReplyLink] = {}
        # handles we detached (refused, stolen, entity deleted) whose detach the client has not answered:
        # its answering detach needs no answer, and transfers still in flight on them are dropped
        self.closing: set[int] = set()

    def send_flow(self, link: Link | None = None, delivery_count: int | None = None, credit: int | None = None) -> None:
        self.conn.write(frames.flow_frame(
            self.channel, self.next_incoming_id, BIG_WINDOW, self.next_outgoing_id, BIG_WINDOW,
            None if link is None else link.handle, delivery_count, credit))


class Link:
    """State shared by every link kind."""

    kind = "link"

    def __init__(self, session: Session, name: Any, remote_handle: int, address: str):
        self.session = session
        self.name = name
        self.handle = remote_handle  # we mirror the client's handle numbers
        self.address = address
        self.closed = False
        self.delivery_count = 0

    @property
    def conn(self) -> Conn:
        return self.session.conn

    @property
    def client(self) -> Conn:
        """The connection, as the broker sees it (``broker.Client``)."""
        return self.session.conn

    @property
    def host(self) -> str:
        """The endpoint's host as the client names it: from the link address, else from its open."""
        return address_host(self.address, self.conn.hostname)

    def uses(self, hub: Hub, group: str | None) -> bool:
        """Whether this link is on ``hub`` (``group``: a receiver of that consumer group of it)."""
        return False

    def detached(self) -> None:
        """Called once when the link goes away (client detach, end, close, or connection loss)."""
        self.closed = True

    def close_with(self, condition: str, description: str) -> None:
        """Detach this link from our side (``closed``, with an error): the broker took it away."""
        session = self.session
        if session.links.get(self.handle) is self:
            del session.links[self.handle]
        session.closing.add(self.handle)
        self.detached()
        _LOG.info("conn %s: link %r detached: %s %s", self.conn.id, self, condition, description)
        self.conn.write(frames.encode_performative(
            perf.DetachFrame(handle=self.handle, closed=True, error=frames.error(condition, description)),
            session.channel))

    def __repr__(self) -> str:
        return f"<{self.kind} {self.address!r} handle={self.handle}>"


class ReplyLink(Link):
    """A client receiver on ``$cbs`` or ``$management``: where request replies go."""

    kind = "reply"

    def send(self, payload: bytes) -> None:
        session = self.session
        chunks = frames.transfer_frames(session.channel, self.handle, session.next_delivery_id, payload,
                                        self.conn.remote_max_frame_size)
        session.next_delivery_id += 1
        session.next_outgoing_id += len(chunks)
        self.delivery_count += 1
        self.conn.write(b"".join(chunks))


class IncomingLink(Link):
    """A client sender: we hand out credit, reassemble multi-frame deliveries and settle them."""

    kind = "incoming"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.credit = 0
        self._partial: bytearray | None = None
        self._first: list[Any] | None = None

    def grant_credit(self) -> None:
        self.credit = INGRESS_CREDIT
        self.session.send_flow(self, self.delivery_count, INGRESS_CREDIT)

    def on_transfer(self, fields: list[Any]) -> None:
        """One transfer frame; ``fields`` are padded to all 11 (see ``frames.decode_performative``)."""
        payload = fields[frames.TRANSFER_PAYLOAD]
        more = bool(fields[5])
        if fields[9]:  # aborted: the sender gave up on this delivery, discard what arrived of it
            self._partial = None
            self._first = None
            return
        if self._partial is None:
            if fields[1] is None:
                raise CodecError("first transfer of a delivery has no delivery-id")
            self._first = fields
            if more:
                self._partial = bytearray(payload)
                return
            data: bytes | bytearray | memoryview = payload
        else:
            self._partial += payload
            if len(self._partial) > MAX_MESSAGE_SIZE + 64 * 1024:
                first = self._first
                self._partial = None
                self.session.conn.protocol_error(
                    "amqp:link:message-size-exceeded",
                    f"delivery {first[1] if first else '?'} exceeds {MAX_MESSAGE_SIZE} bytes")
                return
            if more:
                return
            data = self._partial
            self._partial = None
        first = self._first
        assert first is not None
        self.delivery_count += 1
        self.credit -= 1
        if self.credit <= INGRESS_CREDIT // 2:
            self.grant_credit()
        settled = bool(first[4])
        message_format = first[3] or 0
        self.on_message(first[1], message_format, data, settled)

    def on_message(self, delivery_id: int, message_format: int, payload: bytes | bytearray | memoryview, settled: bool) -> None:
        raise NotImplementedError

    def accept(self, delivery_id: int) -> None:
        if not self.closed:
            self.conn.write(frames.accepted_disposition(self.session.channel, delivery_id, delivery_id))

    def reject(self, delivery_id: int, condition: str, description: str) -> None:
        if not self.closed:
            self.conn.write(frames.rejected_disposition(
                self.session.channel, delivery_id, delivery_id, frames.error(condition, description)))


class RequestLink(IncomingLink):
    """A client sender on ``$cbs`` or ``$management``; replies go out on the session's paired reply link."""

    kind = "request"

    def on_message(self, delivery_id: int, message_format: int, payload: bytes | bytearray | memoryview, settled: bool) -> None:
        node = self.address
        try:
            request = messages.parse_request(payload)
        except CodecError as exc:
            if not settled:
                self.reject(delivery_id, "amqp:decode-error", f"undecodable {node} request: {exc}")
            return
        if not settled:
            self.accept(delivery_id)
        conn = self.conn
        props = request.application_properties
        answer = conn.broker.management.handle(conn.id, node, lambda key: text(props.get(key.encode(), props.get(key))),
                                               text(request.value))
        if answer.authorized_hub is not None:
            conn.authorized_hubs[answer.authorized_hub] = answer.rights
        body = answer.body
        if body is not None:
            body = {k: long(v) if k in LONG_FIELDS else v for k, v in body.items()}
        reply = messages.reply_message(request.message_id, answer.status, answer.description, body)
        target = self.session.reply_links.get(node)
        if target is None or target.closed:
            _LOG.warning("conn %s: %s request without a reply link; reply dropped", self.conn.id, node)
            return
        target.send(reply)


class IngressLink(IncomingLink):
    """A producer link to a hub or to one of its partitions."""

    kind = "ingress"

    def __init__(self, *args: Any, hub: Hub, partition: int | None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.hub = hub
        self.partition = partition
        # an idempotent sender's producer group and owner level (see ``idempotence``), else None
        self.producer_group: ProducerGroup | None = None
        self.producer_attach: Attached | None = None
        self.producer_epoch = 0

    def uses(self, hub: Hub, group: str | None) -> bool:
        return group is None and self.hub is hub

    def on_message(self, delivery_id: int, message_format: int, payload: bytes | bytearray | memoryview, settled: bool) -> None:
        self.conn.broker.ingest(self, delivery_id, message_format, payload, settled)


class DeliveryLink(Link):
    """A consumer link on one partition of a consumer group: pushes stored events while it has credit."""

    kind = "delivery"

    def __init__(self, *args: Any, hub: Hub, group: str, partition_id: str, log: PartitionLog,
                 start_seq: int, epoch: int | None, runtime_metrics: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # the receiver asked for the partition's last enqueued event with every delivery (``events.runtime_metrics``)
        self.runtime_metrics = runtime_metrics
        self.hub = hub
        self.group = group
        self.partition_id = partition_id
        self.log = log
        self.next_seq = start_seq
        self.epoch = epoch
        self.credit = 0
        self._scheduled = False
        log.listeners.add(self.wake)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.hub.name.lower(), self.group.lower(), self.partition_id

    def uses(self, hub: Hub, group: str | None) -> bool:
        return self.hub is hub and (group is None or self.group.lower() == group.lower())

    def on_flow(self, delivery_count: int | None, link_credit: int | None) -> None:
        if link_credit is None:
            return
        if delivery_count is None:
            delivery_count = self.delivery_count
        self.credit = max(0, delivery_count + link_credit - self.delivery_count)
        self.wake()

    def wake(self) -> None:
        if not self._scheduled and not self.closed and self.credit > 0:
            self._scheduled = True
            self.conn.loop.call_soon(self.pump)

    def pump(self) -> None:
        self._scheduled = False
        conn = self.conn
        if self.closed or conn.closed or conn.paused:
            return
        session = self.session
        channel, handle, max_frame = session.channel, self.handle, conn.remote_max_frame_size
        log = self.log
        if self.next_seq < log.begin_seq:
            self.next_seq = log.begin_seq  # retention removed what this consumer had not read yet
        out: list[bytes] = []
        transfer = frames.transfer_frames
        budget = 4 * 1024 * 1024
        metrics = None
        if self.runtime_metrics:  # as of this pass: the partition's end now, and now
            metrics = events.runtime_metrics(log.last_seq, log.last_offset(), log.last_time(), int(time.time() * 1000))
        while self.credit > 0 and budget > 0:
            payloads: list[memoryview] | list[bytes] = log.read(self.next_seq, min(self.credit, 512))
            if not payloads:
                break
            if metrics is not None:
                payloads = [events.with_delivery_annotations(p, metrics) for p in payloads]
            delivery_id = session.next_delivery_id
            for payload in payloads:
                chunks = transfer(channel, handle, delivery_id, payload, max_frame)
                out.extend(chunks)
                session.next_outgoing_id += len(chunks)
                delivery_id += 1
                budget -= len(payload)
            count = len(payloads)
            session.next_delivery_id = delivery_id
            self.next_seq += count
            self.credit -= count
            self.delivery_count += count
        if out:
            conn.write(b"".join(out))
            conn.broker.stats_delivered += len(out)
            if self.credit > 0 and self.next_seq < log.next_seq:
                self.wake()  # more to send: yield to other connections first

    def detached(self) -> None:
        super().detached()
        self.log.listeners.discard(self.wake)
        self.conn.broker.receivers.release(self)

    def steal(self, description: str) -> None:
        """Close this consumer link because a higher owner level took its partition."""
        self.close_with("amqp:link:stolen", description)
