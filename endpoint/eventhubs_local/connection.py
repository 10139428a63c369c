"""AMQP layer: one client connection: protocol headers, SASL, framing, open; frames go to ``dispatch``.

The SASL exchange accepts ANONYMOUS, MSSBCBS, PLAIN and EXTERNAL (credentials come later as a token
on ``$cbs``). Once open, every performative is handed to ``dispatch.dispatch``. The connection is
the broker's ``Client`` (``id``, ``authorized_hubs``, ``link_count``, ``abort``, ``entity_deleted``).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from typing import Any

from . import frames
from .broker import Broker
from .codec import OPEN, SASL_INIT, CodecError, text
from .dispatch import dispatch
from .entities import entity_gone
from .frames import ProtocolError, field
from .links import DeliveryLink, Session
from .sdk_amqp import perf
from .store import Hub

_LOG = logging.getLogger("eventhubs_local")
_FRAME_HEADER = struct.Struct(">IBBH")
MAX_FRAME_SIZE = 1024 * 1024


class Connection(asyncio.Protocol):
    """One client connection: SASL, then AMQP frames dispatched to sessions and links."""

    def __init__(self, broker: Broker, over: str = "tcp"):
        self.broker = broker
        self.over = over  # "tcp", or "websocket" inside a WebSocket
        self.id = broker.next_client_id
        broker.next_client_id += 1
        self.loop = broker.loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.stage = "header"  # header -> sasl -> header -> open -> running -> closed
        self.sasl_done = False
        self.remote_max_frame_size = 512
        self.sessions: dict[int, Session] = {}
        self.authorized_hubs: dict[str, frozenset[str]] = {}  # hub (lower case) -> rights of its token
        self.hostname = "localhost"  # the host the client opened the connection for (its open's hostname)
        self.closed = False
        self.paused = False
        self.peer = "?"

    # -- transport callbacks -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.broker.clients.add(self)
        self.broker.stats_connections_total += 1
        if self.over == "websocket":
            self.broker.stats_websocket_connections_total += 1
        _LOG.info("conn %s: accepted from %s%s", self.id, self.peer, " over a WebSocket" if self.over == "websocket" else "")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.clients.discard(self)
        for session in self.sessions.values():
            for link in session.links.values():
                link.detached()
        self.sessions.clear()
        _LOG.info("conn %s: closed (%s)", self.id, exc or "clean")

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        for session in list(self.sessions.values()):
            for link in list(session.links.values()):
                if isinstance(link, DeliveryLink):
                    link.wake()

    @property
    def link_count(self) -> int:
        return sum(len(s.links) for s in self.sessions.values())

    def write(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)

    def entity_deleted(self, hub: Hub, group: str | None) -> int:
        """Detach the links on a deleted ``hub`` (or on its consumer group ``group``) with ``amqp:not-found``."""
        count = 0
        for session in list(self.sessions.values()):
            for link in list(session.links.values()):
                if link.uses(hub, group):
                    gone = entity_gone(link.host, hub.name, group)
                    link.close_with(gone.condition, gone.description)
                    count += 1
        return count

    def abort(self) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.buffer += data
        try:
            self._process()
        except ProtocolError as exc:
            self.protocol_error(exc.condition, exc.description)
        except CodecError as exc:
            self.protocol_error("amqp:decode-error", f"malformed frame: {exc}")
        except Exception as exc:  # noqa: BLE001 - never let one client take the server down
            _LOG.exception("conn %s: internal error", self.id)
            self.protocol_error("amqp:internal-error", f"internal error: {exc!r}")

    def protocol_error(self, condition: str, description: str) -> None:
        """Close the connection with an AMQP error (or a bare header before AMQP is negotiated)."""
        if self.closed:
            return
        _LOG.info("conn %s: closing with %s: %s", self.id, condition, description)
        if self.stage in ("header",):
            self.write(frames.AMQP_HEADER)
        elif self.stage == "sasl":
            self.write(frames.sasl_outcome_frame(4))  # sys-temp: the SASL layer cannot carry a description
        else:
            if self.stage == "open":
                # the peer has not opened yet: answer the mandatory open before the close
                self.write(frames.open_frame(f"local-event-hubs-{uuid.uuid4().hex[:8]}", MAX_FRAME_SIZE, None))
            self.write(frames.encode_performative(perf.CloseFrame(error=frames.error(condition, description))))
        self.closed = True
        self.buffer.clear()
        if self.transport is not None:
            self.transport.close()

    # -- framing ---------------------------------------------------------------------------------

    def _process(self) -> None:
        buf = self.buffer
        pos = 0
        try:
            while not self.closed:
                if self.stage == "header":
                    if len(buf) - pos < 8:
                        break
                    header = bytes(buf[pos : pos + 8])
                    pos += 8
                    self._on_header(header)
                    continue
                if len(buf) - pos < 8:
                    break
                size, doff, frame_type, channel = _FRAME_HEADER.unpack_from(buf, pos)
                if size < 8 or doff < 2 or doff * 4 > size:
                    raise ProtocolError("amqp:connection:framing-error", f"invalid frame header (size {size}, doff {doff})")
                if size > MAX_FRAME_SIZE:
                    raise ProtocolError("amqp:connection:framing-error",
                                        f"frame of {size} bytes exceeds max-frame-size {MAX_FRAME_SIZE}")
                if len(buf) - pos < size:
                    break
                start = pos + doff * 4
                pos += size
                if size == doff * 4:
                    continue  # empty (heartbeat) frame
                # a copy, so decoded fields may keep views of it while the buffer shrinks
                self._on_frame(frame_type, channel, memoryview(buf[start:pos]))
        finally:
            if pos:
                del buf[:pos]

    def _on_header(self, header: bytes) -> None:
        if self.stage != "header":
            raise ProtocolError("amqp:connection:framing-error", "unexpected protocol header")
        if header == frames.SASL_HEADER and not self.sasl_done:
            self.write(frames.SASL_HEADER + frames.sasl_mechanisms_frame())
            self.stage = "sasl"
        elif header == frames.AMQP_HEADER:
            self.write(frames.AMQP_HEADER)
            self.stage = "open"
        else:
            self.write(frames.AMQP_HEADER)
            _LOG.info("conn %s: unsupported protocol header %r; closing", self.id, header)
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def _on_frame(self, frame_type: int, channel: int, body: memoryview) -> None:
        if self.stage == "sasl":
            if frame_type != frames.FRAME_SASL:
                raise ProtocolError("amqp:connection:framing-error", "expected a SASL frame")
            code, fields = frames.decode_performative(body)
            if code != SASL_INIT:
                raise ProtocolError("amqp:not-allowed", f"unexpected SASL frame 0x{code:x}")
            mechanism = bytes(fields[0]) if fields and fields[0] is not None else b""
            if mechanism not in (b"ANONYMOUS", b"MSSBCBS", b"PLAIN", b"EXTERNAL"):
                self.write(frames.sasl_outcome_frame(1))
                raise ProtocolError("amqp:unauthorized-access", f"SASL mechanism {mechanism!r} not supported")
            self.write(frames.sasl_outcome_frame(0))
            self.sasl_done = True
            self.stage = "header"
            return
        if frame_type != frames.FRAME_AMQP:
            raise ProtocolError("amqp:connection:framing-error", f"unexpected frame type {frame_type}")
        code, fields = frames.decode_performative(body)
        if self.stage == "open":
            if code != OPEN:
                raise ProtocolError("amqp:not-allowed", f"expected open, got performative 0x{code:x}")
            self._on_open(fields)
            return
        dispatch(self, code, channel, fields)

    def _on_open(self, fields: list[Any]) -> None:
        max_frame = field(fields, 2, int, True)
        self.remote_max_frame_size = max(512, min(max_frame or 4294967295, MAX_FRAME_SIZE))
        idle = field(fields, 4, int, True)
        if len(fields) > 1 and fields[1] is not None:
            self.hostname = text(fields[1]) or self.hostname
        self.write(frames.open_frame(f"local-event-hubs-{uuid.uuid4().hex[:8]}", MAX_FRAME_SIZE, None))
        self.stage = "running"
        _LOG.info("conn %s: open from container %s (max frame %s, idle timeout %s ms)", self.id,
                  text(fields[0]) if fields else None, max_frame, idle)
