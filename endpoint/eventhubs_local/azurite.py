"""Azurite's blob service as a child process, for tests.

Azurite comes from npm (``npm install azurite``); ``azurite-blob`` is found through ``AZURITE_BIN``,
then ``PATH``, then ``node_modules/.bin`` in the working directory or one of its parents, as npm
resolves a local install.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import IO

from eventhubs_local.ports import free_port, wait_listening

# Azurite's well-known development account; it is public and only valid against Azurite.
ACCOUNT_NAME = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

def azurite_binary() -> str:
    """Path of ``azurite-blob``: ``AZURITE_BIN``, ``PATH``, or ``node_modules/.bin`` here or above."""
    cwd = Path.cwd()
    candidates = [os.environ.get("AZURITE_BIN"), shutil.which("azurite-blob")]
    candidates += [str(folder / "node_modules" / ".bin" / "azurite-blob") for folder in (cwd, *cwd.parents)]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return candidate
    raise FileNotFoundError(
        "azurite-blob not found: run `npm install azurite` (or `npm install -g azurite`), "
        "or set AZURITE_BIN to the path of azurite-blob"
    )


def command(host: str, port: int, location: str | os.PathLike[str]) -> list[str]:
    """Azurite's blob service on ``host:port`` with its data in ``location``: the one command line of it."""
    return [
        azurite_binary(), "--blobHost", host, "--blobPort", str(port), "--location", str(location), "--silent",
        "--skipApiVersionCheck", "--loose", "--disableTelemetry",
    ]


def connection_string(host: str, port: int) -> str:
    """The connection string of Azurite's well-known development account at ``host:port``."""
    return (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT_NAME};AccountKey={ACCOUNT_KEY};"
        f"BlobEndpoint=http://{host}:{port}/{ACCOUNT_NAME};"
    )


class AzuriteProcess:
    """
    Azurite blob service on ``host:port`` with its data in ``location``.

    :param location: workspace folder for Azurite's data.
    :param port: 0 picks a free port.
    :param log_path: where Azurite's output goes (default: ``location/azurite.log``).
    :param metadata_db: a ``mysql://user[:password]@host:port/database`` URL: Azurite keeps its blob
        metadata there, indexed, instead of in its in-memory collection, whose look-ups slow as the
        account fills (Azure's own do not); ``None``: in memory.
    """

    def __init__(self, location: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 0, log_path: str | None = None,
                 metadata_db: str | None = None):
        self.location = Path(location)
        self.metadata_db = metadata_db
        self.host = host
        self.port = port or free_port(host)
        self.log_path = Path(log_path) if log_path else self.location / "azurite.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def connection_string(self) -> str:
        return connection_string(self.host, self.port)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, timeout: float = 60) -> AzuriteProcess:
        self.location.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self._proc = subprocess.Popen(
            command(self.host, self.port, self.location),
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "AZURITE_DB": self.metadata_db} if self.metadata_db else None,
        )
        try:
            wait_listening(self._proc, self.host, self.port, timeout, what="Azurite",
                           details=lambda: f"; see {self.log_path}")
        except TimeoutError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._proc and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._log:
            self._log.close()
            self._log = None

    def __enter__(self) -> AzuriteProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
