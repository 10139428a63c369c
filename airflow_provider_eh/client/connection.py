"""One AMQP connection per process and hub, shared by every handler the package's sync clients open.

The Python SDK opens a connection (TCP, TLS and, against a real namespace, a token) for every handler:
each partition's sender, each receiver, each management request. Its own shared-connection mode does
not work with its pure-Python AMQP stack (the connection it builds has no scheme, "Invalid endpoint").
:class:`SharedConnection` shares one the AMQP way instead: every handler gets a session of its own on
the hub's one connection. The first handler to open builds the connection itself, with its own
settings (TLS, WebSockets, proxy, custom endpoint address, CA bundle), and leaves it open when it
closes; later handlers open their sessions on it. A connection that broke is replaced on the next open.

The SDK's sync AMQP connection is made for one reading thread: each thread that reads a frame handles
it for whichever link it belongs to, and two threads handling frames of one session at once reorder
its deliveries and corrupt its windows (tried: attaches on a used handle, broken pipes, events
missing). So on a shared connection one thread at a time is its reader (:class:`_Readers`): it waits
for the socket to be readable, then reads and handles what came, for every link; the other threads
that want to read wait for that round to end and return to the SDK, which checks whether what they
wait for (an acknowledgement, a delivery, an attach) arrived and asks again. The reader waits for
data outside every lock: the SDK's read blocks for the socket's timeout (0.2 s, 1 s over WebSockets)
holding the transport's socket lock, which every write takes too, so a thread waiting there for its
acknowledgement would stop the other partitions' sends for as long. Writes are not serialised here:
a sender writes while holding its link's lock, which the reader takes when a flow frame arrives, and
the transport serialises writes already, as it does for the SDK's own keep-alive thread beside a
sender. A reader that finds nothing by the timeout sends the heartbeat the SDK's idle read would.

:func:`acquire` and :func:`release` keep one :class:`SharedConnection` per hub (an
:class:`~airflow_provider_eh.client.endpoint.EventHubsEndpoint`) and process, counted by its users:
clients built by :meth:`EventHubsEndpoint.producer` and ``consumer(shared=True)`` hold it while
open, a publish holds it from start to end (:func:`held`), a Spark worker's kept client holds it
between tasks. The last user's release closes it. A forked child starts with none: its parent's
sockets are its parent's.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.client import sdk_internals

if TYPE_CHECKING:
    from azure.eventhub import EventHubProducerClient

log = logging.getLogger(__name__)

def _readable(transport: Any, timeout: float | None) -> bool:
    """Whether a frame's bytes wait for ``transport`` (buffered, or on its socket within ``timeout`` seconds).

    ``True`` also when the socket is gone or of a kind this does not know: the SDK's read then tells.
    """
    if sdk_internals.transport_buffered(transport):
        return True
    sock = getattr(transport, "sock", None)
    if sock is not None and not isinstance(sock, socket.socket):
        sock = getattr(sock, "sock", None)  # AMQP over WebSockets: the WebSocket's own socket
    if not isinstance(sock, socket.socket) or sock.fileno() < 0:
        return True
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    try:
        ready, _, _ = select.select([sock], [], [], timeout)
    except (OSError, ValueError):  # closed under us: the SDK's read tells
        return True
    return bool(ready)


class _Readers:
    """One reader at a time for a shared pyamqp connection; replaces the connection's ``listen``."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._listen = connection.listen
        self._turn = threading.Condition()
        self._reading = False
        self._rounds = 0  # reading rounds ended: a waiting thread returns once one ended

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """The block runs while no thread reads (opening a session changes what a read hands frames to)."""
        with self._turn:
            while self._reading:
                self._turn.wait()
            self._reading = True
        try:
            yield
        finally:
            self._end_round()

    def _end_round(self) -> None:
        with self._turn:
            self._reading = False
            self._rounds += 1
            self._turn.notify_all()

    def listen(self, wait: float | bool = False, batch: int = 1, **kwargs: Any) -> None:
        connection = self._connection
        transport = sdk_internals.connection_transport(connection)
        timeout = None if wait is True else getattr(transport, "socket_timeout", None)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._turn:
            rounds = self._rounds
            while self._reading:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return  # nothing read for this thread by its timeout, as the SDK's read would end
                self._turn.wait(remaining)
                if self._rounds != rounds:
                    return  # a round was read: the caller checks whether its frames were in it
            self._reading = True
        try:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if _readable(transport, remaining):
                self._listen(wait, batch, **kwargs)
            else:  # what the SDK's read does when nothing arrives: the heartbeat the peer expects
                sdk_internals.idle_read(connection)
        finally:
            self._end_round()


class KeptManagement:
    """One management link of a hub, opened on first use and kept until :meth:`close`; thread-safe."""

    def __init__(self, shared: SharedConnection | None = None) -> None:
        self._shared = shared  # the connection to open the link on (None: a connection of its own)
        self._lock = threading.Lock()
        self._client: Any = None
        self._auth: Any = None
        self.opened = 0  # links opened so far (a link that broke is opened again)

    def request(self, owner: EventHubProducerClient, message: Any, operation_type: bytes) -> Any:
        """The response of one management request through the kept link (opened from ``owner``'s settings)."""
        with self._lock:
            if self._client is None:
                client, auth = sdk_internals.create_management_client(owner)
                try:
                    if self._shared is not None:
                        self._shared.open(client)
                    else:
                        client.open()
                    while not client.client_ready():  # each check waits on the socket: no sleep needed
                        pass
                except BaseException:
                    client.close()
                    raise
                self._client, self._auth = client, auth
                self.opened += 1
            try:
                return sdk_internals.management_request(owner, self._client, self._auth, message, operation_type)
            except BaseException:
                self._close()
                raise

    def _close(self) -> None:
        client, self._client, self._auth = self._client, None, None
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # closing a broken link: nothing to keep
                log.debug("closing the kept management link: %s", exc)

    def close(self) -> None:
        with self._lock:
            self._close()


class SharedConnection:
    """
    One AMQP connection of a hub, shared by the handlers opened through :meth:`open`; thread-safe.

    :ivar management: the hub's kept management link (partition ids and properties), on this connection.
    :ivar opened: connections opened so far (one, unless one broke and was replaced).
    """

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.management = KeptManagement(self)
        self.opened = 0
        self.unshared = False  # the SDK's internals differ: every handler keeps its own connection
        self.users = 0
        self.pid = os.getpid()
        self._lock = threading.Lock()  # opening and replacing the connection
        self._readers: _Readers | None = None
        self._connection: Any = None

    @property
    def connection(self) -> Any:
        """The pyamqp connection now shared (``None`` before the first open or after :meth:`close`)."""
        return self._connection

    def open(self, handler: Any) -> None:
        """Open an SDK AMQP handler (``SendClient``, ``ReceiveClient``, management client) on this connection.

        The handler gets a session of its own; when no usable connection is shared yet, the handler's
        own connection, built from its settings, becomes the shared one.
        """
        with self._lock:
            connection = self._connection
            if connection is not None and not sdk_internals.connection_usable(connection):
                log.info("%s: the shared AMQP connection broke; opening another", self.name or "hub")
                self._close_connection()
                connection = None
            if connection is None:
                handler.open()
                if self.unshared or not sdk_internals.supported(sdk_internals.SHARED_CONNECTION) \
                        or not sdk_internals.shareable(handler):
                    self._unshare()  # the handler keeps the connection it opened, as the SDK does
                    return
                connection = sdk_internals.share_handler_connection(handler)  # its close ends its session only
                self._readers = _Readers(connection)
                connection.listen = self._readers.listen
                self._connection = connection
                self.opened += 1
                return
            readers = self._readers
        assert readers is not None
        with readers.exclusive():
            handler.open(connection=connection)

    def _unshare(self) -> None:
        if not self.unshared:
            self.unshared = True
            log.warning("%s: the Event Hubs SDK's AMQP internals are not the ones a shared connection builds on; "
                        "each link opens a connection of its own, as the SDK does", self.name or "hub")

    def _close_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception as exc:  # a broken connection: nothing to keep
                log.debug("closing the shared AMQP connection: %s", exc)

    def close(self) -> None:
        """Close the management link and the connection (handlers still open on it fail on their next use)."""
        self.management.close()
        with self._lock:
            self._close_connection()


_SHARED: dict[Hashable, SharedConnection] = {}
_REGISTRY = threading.Lock()


def _forget_after_fork() -> None:
    _SHARED.clear()  # the parent's sockets stay the parent's; the child opens its own


os.register_at_fork(after_in_child=_forget_after_fork)


def _name(key: Hashable) -> str:
    namespace, hub = getattr(key, "namespace", None), getattr(key, "eventhub_name", None)
    return f"{namespace}/{hub}" if namespace and hub else type(key).__name__


def acquire(key: Hashable) -> SharedConnection:
    """The process's shared connection of ``key`` (a hub's endpoint), counted as one more user."""
    with _REGISTRY:
        shared = _SHARED.get(key)
        if shared is None or shared.pid != os.getpid():
            shared = _SHARED[key] = SharedConnection(_name(key))
        shared.users += 1
        return shared


def release(key: Hashable, shared: SharedConnection) -> None:
    """One user fewer; the last one closes the connection."""
    with _REGISTRY:
        shared.users -= 1
        if shared.users > 0:
            return
        if _SHARED.get(key) is shared:
            del _SHARED[key]
    shared.close()


@contextmanager
def held(key: Hashable) -> Iterator[SharedConnection]:
    """Keep ``key``'s shared connection open for the block (the clients opened inside come and go)."""
    shared = acquire(key)
    try:
        yield shared
    finally:
        release(key, shared)
