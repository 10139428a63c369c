"""AMQP layer: the listener: accepts connections for one broker and runs periodic retention.

Engine choice: pure asyncio with the SDK's own ``_pyamqp`` codec rather than qpid-proton. The
SDK decodes performatives by field position, so every frame we send must be full length; the SDK
encoder always writes full-length frames, while proton omits trailing fields and hides a transfer's
message-format (needed to tell an SDK batch from a single event). The hot paths (delivery of
stored events, acknowledgements) are hand-encoded in ``frames`` and stored events are kept
delivery-ready (``events``), so the server does no per-event encoding at delivery: it costs a
fraction of the SDK client's CPU per event, so the SDK is the bottleneck (``bench/emulator_throughput.py``;
the figures in the repository's ``bench/README.md``, "Design figures").
"""

from __future__ import annotations

import asyncio
import logging
import ssl

from . import frames
from .broker import Broker
from .connection import Connection
from .sdk_amqp import perf
from .websocket import WebSocketConnection

_LOG = logging.getLogger("eventhubs_local")


class Server:
    """The AMQP listener plus periodic retention; ``start`` binds, ``close`` stops.

    ``websocket_port`` (``None``: none) adds a listener of AMQP over WebSockets (``websocket``), with
    TLS when ``websocket_tls`` is given: the same broker, links and features as the AMQP listener.
    """

    def __init__(self, broker: Broker, host: str = "127.0.0.1", port: int = 5672, *,
                 websocket_port: int | None = None, websocket_tls: ssl.SSLContext | None = None):
        self.broker = broker
        self.host = host
        self.port = port
        self.websocket_port = websocket_port
        self.websocket_tls = websocket_tls
        self._server: asyncio.base_events.Server | None = None
        self._websocket_server: asyncio.base_events.Server | None = None
        self._retention_task: asyncio.Task[None] | None = None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self.broker.loop = loop
        self._server = await loop.create_server(lambda: Connection(self.broker), self.host, self.port,
                                                reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.websocket_port is not None:
            self._websocket_server = await loop.create_server(
                lambda: WebSocketConnection(lambda: Connection(self.broker, over="websocket")), self.host, self.websocket_port,
                reuse_address=True, ssl=self.websocket_tls)
            self.websocket_port = self._websocket_server.sockets[0].getsockname()[1]
        self._retention_task = loop.create_task(self._retention_loop())
        return self.port

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            try:
                self.broker.apply_retention()
            except Exception:  # noqa: BLE001
                _LOG.exception("retention pass failed")

    async def close(self) -> None:
        if self._retention_task:
            self._retention_task.cancel()
        for listener in (self._server, self._websocket_server):
            if listener:
                listener.close()
        for conn in list(self.broker.clients):
            if isinstance(conn, Connection) and conn.transport is not None:  # every client is a Connection
                conn.write(frames.encode_performative(perf.CloseFrame(
                    error=frames.error("amqp:connection:forced", "the local Event Hubs endpoint is shutting down"))))
                conn.transport.close()
        for listener in (self._server, self._websocket_server):
            if listener:
                await listener.wait_closed()
        self.broker.sync_all()
        self.broker.store.close()
