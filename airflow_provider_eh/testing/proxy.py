"""A TCP proxy in front of one service whose traffic a test can throttle or freeze: network faults, for real.

Point one client (a publisher's blob connection string, its Event Hubs endpoint) at the proxy's port
instead of the service's, and that client alone sees the fault while every other one reaches the
service directly:

- :meth:`FaultProxy.freeze`: nothing is forwarded either way and the connections stay open, as behind
  a partitioned network or a stalled middlebox: requests hang until the client's own timeouts;
  :meth:`FaultProxy.thaw` forwards again (what was held goes through);
- :meth:`FaultProxy.throttle`: at most ``bytes_per_second`` each way per connection, as a throughput
  unit shared by many publishers would allow; ``None`` lifts it.

Threads only (an accept loop and two pumps per connection); :meth:`FaultProxy.close` stops them all.

    with FaultProxy("127.0.0.1", azurite_port) as proxy:
        blob = connection_string.replace(f":{azurite_port}/", f":{proxy.port}/")
        ...
        proxy.freeze()
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

_CHUNK = 16384


class FaultProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream_host:upstream_port``, with faults on demand."""

    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, int(upstream_port))
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._frozen = threading.Event()
        self._closed = threading.Event()
        self._rate: float | None = None
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.connections = 0

    def start(self) -> FaultProxy:
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self._spawn(self._accept)
        return self

    def freeze(self) -> None:
        """Forward nothing from now on (connections stay open; new ones are accepted and held too)."""
        self._frozen.set()

    def thaw(self) -> None:
        self._frozen.clear()

    def throttle(self, bytes_per_second: float | None) -> None:
        """At most ``bytes_per_second`` each way on each connection (``None``: no limit)."""
        self._rate = bytes_per_second

    def close(self) -> None:
        self._closed.set()
        self._frozen.clear()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in [self._listener, *sockets]:
            try:
                sock.close()
            except OSError:
                pass
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name=f"fault-proxy-{self.port}")
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            self._spawn(self._connect, client)

    def _open_upstream(self, client: socket.socket) -> socket.socket | None:
        """The connection to forward ``client`` to (``None``: the client was answered and closed)."""
        try:
            return socket.create_connection(self.upstream, timeout=10)
        except OSError:
            client.close()
            return None

    def _connect(self, client: socket.socket) -> None:
        upstream = self._open_upstream(client)
        if upstream is not None:
            with self._lock:
                self._sockets += [client, upstream]
                self.connections += 1
            for sock in (client, upstream):
                sock.settimeout(0.2)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._spawn(self._pump, client, upstream)
            self._spawn(self._pump, upstream, client)

    def _pump(self, source: socket.socket, dest: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                if self._frozen.is_set():
                    time.sleep(0.05)
                    continue
                try:
                    data = source.recv(_CHUNK)
                except (TimeoutError, socket.timeout):
                    continue
                if not data:
                    break
                rate = self._rate
                if rate:
                    time.sleep(len(data) / rate)
                while self._frozen.is_set() and not self._closed.is_set():  # frozen with data in hand: hold it
                    time.sleep(0.05)
                dest.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, dest):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class HttpConnectProxy(FaultProxy):
    """An HTTP proxy that tunnels ``CONNECT host:port`` requests (what the SDKs send through ``http_proxy``).

    With ``username`` and ``password`` it asks for them (``407`` with ``Proxy-Authenticate: Basic``
    until a request carries them). It tunnels only to this machine (loopback targets; ``403`` for any
    other). ``targets`` lists each tunnel's ``host:port`` and ``authorized`` whether it carried the
    credentials; :meth:`freeze` and :meth:`throttle` act on the tunnels as on :class:`FaultProxy`'s
    connections.
    """

    def __init__(self, username: str | None = None, password: str | None = None):
        super().__init__("127.0.0.1", 0)
        self.username, self.password = username, password
        self.targets: list[str] = []
        self.refused: list[str] = []

    def _answer(self, client: socket.socket, status: str, extra: str = "") -> None:
        try:
            client.sendall(f"HTTP/1.1 {status}\r\n{extra}Content-Length: 0\r\n\r\n".encode("latin-1"))
        except OSError:
            pass

    def _open_upstream(self, client: socket.socket) -> socket.socket | None:
        import base64
        import ipaddress

        client.settimeout(10)
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < 16384:
                chunk = client.recv(4096)
                if not chunk:
                    break
                head += chunk
        except OSError:
            client.close()
            return None
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        target = rest.split(" ", 1)[0]
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if method != "CONNECT":
            self.refused.append(f"{method} {target}")
            self._answer(client, "405 Method Not Allowed")
            client.close()
            return None
        authorized = False
        if self.username is not None:
            expected = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
            authorized = headers.get("proxy-authorization", "") == f"Basic {expected}"
            if not authorized:
                self.refused.append(target)
                self._answer(client, "407 Proxy Authentication Required", 'Proxy-Authenticate: Basic realm="test"\r\n')
                client.close()
                return None
        host, _, port = target.rpartition(":")
        host = host.strip("[]")
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback or not port.isdigit():
            self.refused.append(target)
            self._answer(client, "403 Forbidden")
            client.close()
            return None
        try:
            upstream = socket.create_connection((host, int(port)), timeout=10)
        except OSError:
            self.refused.append(target)
            self._answer(client, "502 Bad Gateway")
            client.close()
            return None
        self.targets.append(target)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        return upstream
