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

:class:`HttpProxy` is another kind: a real HTTP proxy (``CONNECT`` tunnels, Basic authentication)
for clients configured with a proxy, as behind a company's.

    with FaultProxy("127.0.0.1", azurite_port) as proxy:
        blob = connection_string.replace(f":{azurite_port}/", f":{proxy.port}/")
        ...
        proxy.freeze()
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
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
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
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
                except TimeoutError:
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



class HttpProxy:
    """A real HTTP proxy (the ``proxy.py`` package) on a free 127.0.0.1 port, as a child process.

    It tunnels ``CONNECT host:port`` (what the SDKs send through ``http_proxy``), asks for Basic
    credentials when ``username`` is given (``407`` without them), and writes an access line per
    connection it carried when the connection ends; :meth:`tunnels` reads them back, so a test can
    assert that a client went through the proxy and where to, and :meth:`refused` counts the
    requests turned away for their credentials. Test and development use only: ``proxy.py`` is in
    the development requirements, not the provider's.
    """

    _TUNNEL = re.compile(r" - CONNECT (\S+:\d+) - ")  # a refused request is logged as CONNECT None:None

    def __init__(self, directory: Path, username: str | None = None, password: str | None = None,
                 extra_args: tuple[str, ...] = ()):
        self.directory = Path(directory)
        self.username, self.password = username, password
        self.extra_args = tuple(extra_args)  # more of proxy.py's options: plugins, filters
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self.log = self.directory / "proxy.log"

    def start(self, timeout: float = 30) -> HttpProxy:
        self.directory.mkdir(parents=True, exist_ok=True)
        port_file = self.directory / "proxy.port"
        port_file.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "proxy", "--hostname", "127.0.0.1", "--port", "0", "--port-file", str(port_file),
               "--num-workers", "1", "--num-acceptors", "1", "--log-level", "INFO", "--log-file", str(self.log)]
        if self.username is not None:
            cmd += ["--basic-auth", f"{self.username}:{self.password or ''}"]
        cmd += list(self.extra_args)
        self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=self.directory,
                                      start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"proxy.py exited with code {self._proc.returncode}: {self._tail()}")
            text = port_file.read_text().strip() if port_file.exists() else ""
            if text.isdigit():
                self.port = int(text)
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    return self
                except OSError:
                    pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"proxy.py did not listen within {timeout} s: {self._tail()}")

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else "(no log)"

    def _lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []

    def _logged(self, pattern: re.Pattern[str], at_least: int, timeout: float) -> list[tuple[str, ...]]:
        """The matches of ``pattern`` in the access log, waiting up to ``timeout`` s for ``at_least`` of them.

        ``proxy.py`` writes one access line per connection when the connection ends, a moment after the
        client closed it; fewer than ``at_least`` after ``timeout`` are returned as they are.
        """
        deadline = time.monotonic() + timeout
        while True:
            found = [m.groups() for line in self._lines() if (m := pattern.search(line))]
            if len(found) >= at_least or time.monotonic() > deadline:
                return found
            time.sleep(0.2)

    def tunnels(self, at_least: int = 1, timeout: float = 15.0) -> list[str]:
        """``host:port`` of every CONNECT tunnel carried and ended so far (see :meth:`_logged` for the wait)."""
        return [found[0] for found in self._logged(self._TUNNEL, at_least, timeout)]

    _REQUEST = re.compile(r" - ((?!CONNECT )[A-Z]+) (\S+:\d+)(/\S*) - ")

    def requests(self, at_least: int = 1, timeout: float = 15.0) -> list[tuple[str, str, str]]:
        """``(method, host:port, path)`` of the first plain HTTP request of each connection forwarded so far.

        ``proxy.py`` writes one access line per connection, when it ends, naming its first request.
        """
        return [(m, t, p) for m, t, p in self._logged(self._REQUEST, at_least, timeout)]

    def refused(self) -> int:
        """Requests refused for missing or wrong credentials."""
        return sum("ProxyAuthenticationFailed" in line for line in self._lines())

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()

    def __enter__(self) -> HttpProxy:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
