"""AMQP layer: AMQP over WebSockets, as Event Hubs serves it on port 443.

A client opens ``GET /$servicebus/websocket`` with the subprotocol ``AMQPWSB10`` (the AMQP WebSocket
binding, OASIS amqp-wsb-v1.0); after the upgrade the AMQP byte stream (protocol headers, SASL,
frames) travels in binary WebSocket messages. :class:`WebSocketConnection` does the upgrade and the
WebSocket framing (RFC 6455) and hands the bytes to an ordinary :class:`~.connection.Connection`,
which writes back through a tunnel that frames them: everything above the framing (SASL, links,
idempotent producers, faults) is the TCP listener's, unchanged. The listener may serve TLS
(``wss://``) with a certificate of its own, as an application gateway with a private CA does.

What a client gets wrong is answered with an HTTP status and a line naming it (404 for another path,
400 for a missing upgrade header or subprotocol, 426 for another WebSocket version); after the
upgrade, a text or unmasked frame closes the connection with the RFC's close code (1003, 1002).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import struct
from collections.abc import Callable
from typing import Any

PATH = "/$servicebus/websocket"
SUBPROTOCOL = "AMQPWSB10"
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MAX_HANDSHAKE = 16 * 1024
MAX_MESSAGE = 16 * 1024 * 1024  # a frame's payload; far above AMQP's frames (the endpoint's max is 1 MiB)
OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
CLOSE_NORMAL, CLOSE_PROTOCOL, CLOSE_UNSUPPORTED, CLOSE_TOO_BIG = 1000, 1002, 1003, 1009
_LOG = logging.getLogger("eventhubs_local")
_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")


def accept_key(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` answer to a client's ``Sec-WebSocket-Key`` (RFC 6455, 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + _GUID).digest()).decode("ascii")


def frame(opcode: int, payload: bytes = b"") -> bytes:
    """One final, unmasked frame (what a server sends)."""
    size = len(payload)
    if size < 126:
        head = bytes((0x80 | opcode, size))
    elif size < 1 << 16:
        head = bytes((0x80 | opcode, 126)) + _U16.pack(size)
    else:
        head = bytes((0x80 | opcode, 127)) + _U64.pack(size)
    return head + payload


def unmask(data: bytes, mask: bytes) -> bytes:
    """``data`` XOR the repeated 4-byte ``mask``, as one big-integer operation."""
    size = len(data)
    if not size:
        return b""
    key = (mask * (size // 4 + 1))[:size]
    return (int.from_bytes(data, "little") ^ int.from_bytes(key, "little")).to_bytes(size, "little")


class HandshakeError(Exception):
    """A request that is no AMQP WebSocket upgrade: its HTTP status and the reason."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status


def answer_handshake(request: bytes) -> bytes:
    """The ``101 Switching Protocols`` answer to an upgrade request's head, or :class:`HandshakeError`."""
    try:
        lines = request.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
    except ValueError:
        raise HandshakeError("400 Bad Request", "not an HTTP request line") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    path = target.split("?", 1)[0]
    if method != "GET":
        raise HandshakeError("405 Method Not Allowed", f"{method} {path}: only GET upgrades to a WebSocket")
    if path.rstrip("/") != PATH:
        raise HandshakeError("404 Not Found", f"no WebSocket endpoint at {path}; AMQP over WebSockets is at {PATH}")
    if headers.get("upgrade", "").lower() != "websocket" or "upgrade" not in headers.get("connection", "").lower():
        raise HandshakeError("400 Bad Request", "the request lacks 'Upgrade: websocket' and 'Connection: Upgrade'")
    if headers.get("sec-websocket-version") != "13":
        raise HandshakeError("426 Upgrade Required", "Sec-WebSocket-Version must be 13")
    key = headers.get("sec-websocket-key", "")
    if not key:
        raise HandshakeError("400 Bad Request", "the request lacks Sec-WebSocket-Key")
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
    if SUBPROTOCOL not in offered:
        raise HandshakeError("400 Bad Request", f"the subprotocol {SUBPROTOCOL} (AMQP over WebSockets) was not "
                                                f"offered (Sec-WebSocket-Protocol: {', '.join(filter(None, offered)) or 'none'})")
    return ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept_key(key)}\r\nSec-WebSocket-Protocol: {SUBPROTOCOL}\r\n\r\n").encode("latin-1")


class _Tunnel:
    """The transport the AMQP connection writes to: each write becomes one binary WebSocket message."""

    def __init__(self, outer: WebSocketConnection):
        self._outer = outer

    def write(self, data: bytes) -> None:
        self._outer.send(OP_BINARY, bytes(data))

    def close(self) -> None:
        self._outer.close(CLOSE_NORMAL, "")

    def abort(self) -> None:
        self._outer.abort()

    def is_closing(self) -> bool:
        return self._outer.closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._outer.transport.get_extra_info(name, default) if self._outer.transport else default


class WebSocketConnection(asyncio.Protocol):
    """One client's WebSocket: the upgrade, then the framing around an AMQP connection (``make_inner()``)."""

    def __init__(self, make_inner: Callable[[], asyncio.Protocol]):
        self.make_inner = make_inner
        self.inner: asyncio.Protocol | None = None
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.inner is None:
            self._handshake()
        if self.inner is not None:
            self._frames()

    def _handshake(self) -> None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > _MAX_HANDSHAKE:
                self._refuse("431 Request Header Fields Too Large", "the upgrade request's head is over 16 KiB")
            return
        head, self.buffer = bytes(self.buffer[:end]), self.buffer[end + 4:]
        try:
            answer = answer_handshake(head)
        except HandshakeError as exc:
            self._refuse(exc.status, str(exc))
            return
        assert self.transport is not None
        self.transport.write(answer)
        self.inner = self.make_inner()
        self.inner.connection_made(_Tunnel(self))  # type: ignore[arg-type]

    def _refuse(self, status: str, reason: str) -> None:
        peer = self.transport.get_extra_info("peername") if self.transport else None
        _LOG.info("websocket from %s refused: %s (%s)", peer, status, reason)
        body = (reason + "\n").encode("utf-8")
        assert self.transport is not None
        self.transport.write(f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                             f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1") + body)
        self.closing = True
        self.transport.close()
        self.buffer.clear()

    def _frames(self) -> None:
        buf = self.buffer
        while not self.closing:
            if len(buf) < 2:
                return
            first, second = buf[0], buf[1]
            opcode = first & 0x0F
            size, at = second & 0x7F, 2
            if size == 126:
                if len(buf) < 4:
                    return
                size, at = _U16.unpack_from(buf, 2)[0], 4
            elif size == 127:
                if len(buf) < 10:
                    return
                size, at = _U64.unpack_from(buf, 2)[0], 10
            if not second & 0x80:
                self.close(CLOSE_PROTOCOL, "a client's frames must be masked")
                return
            if size > MAX_MESSAGE:
                self.close(CLOSE_TOO_BIG, f"a message over {MAX_MESSAGE} bytes")
                return
            if len(buf) < at + 4 + size:
                return
            mask = bytes(buf[at:at + 4])
            payload = unmask(bytes(buf[at + 4:at + 4 + size]), mask)
            del buf[:at + 4 + size]
            self._message(opcode, payload)

    def _message(self, opcode: int, payload: bytes) -> None:
        if opcode in (OP_BINARY, OP_CONTINUATION):
            # AMQP is a byte stream: a message's bytes (each fragment's) are the connection's as they arrive
            assert self.inner is not None
            self.inner.data_received(payload)
        elif opcode == OP_TEXT:
            self.close(CLOSE_UNSUPPORTED, "AMQP over WebSockets travels in binary messages, not text")
        elif opcode == OP_PING:
            self.send(OP_PONG, payload)
        elif opcode == OP_PONG:
            pass
        elif opcode == OP_CLOSE:
            code = _U16.unpack_from(payload)[0] if len(payload) >= 2 else CLOSE_NORMAL
            self.close(code if code in (CLOSE_NORMAL, 1001) else CLOSE_NORMAL, "")
        else:
            self.close(CLOSE_PROTOCOL, f"unknown opcode 0x{opcode:x}")

    def send(self, opcode: int, payload: bytes) -> None:
        if not self.closing and self.transport is not None:
            self.transport.write(frame(opcode, payload))

    def close(self, code: int, reason: str) -> None:
        """Send a close frame with ``code`` and ``reason``, then close the TCP connection."""
        if self.closing or self.transport is None:
            return
        if code != CLOSE_NORMAL:
            _LOG.info("websocket from %s closed: %d %s", self.transport.get_extra_info("peername"), code, reason)
        self.transport.write(frame(OP_CLOSE, _U16.pack(code) + reason.encode("utf-8")[:120]))
        self.closing = True
        self.transport.close()

    def abort(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.abort()
