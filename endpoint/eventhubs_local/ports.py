"""Ports of the local services a test starts: pick a free one, wait until a child process listens on it."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_listening(proc: subprocess.Popen, host: str, port: int, timeout: float, *, what: str,
                   details: Callable[[], str], interval: float = 0.1) -> None:
    """Return once ``host:port`` accepts connections; raise naming ``what`` (and ``details()``, its log)
    if ``proc`` exits first or ``timeout`` seconds pass. The caller stops ``proc`` on a timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}{details()}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(interval)
    raise TimeoutError(f"{what} did not listen on {host}:{port} within {timeout}s{details()}")
