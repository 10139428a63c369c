"""The project's local Event Hubs endpoint: an AMQP 1.0 server for the unmodified azure-eventhub SDK.

``EmulatorProcess`` runs ``python -m eventhubs_local`` as a child process (tests,
benchmarks, the demo), started by ``launcher`` (which the development stack, ``tests/support/stack.py``, uses
too); ``EmulatorAdmin`` is a small urllib client of its admin HTTP endpoint.

Architecture: two layers, imports running from the AMQP layer down to the broker, never back.

* Broker layer, which knows nothing of frames: ``broker`` (ingest with group commit, injected faults,
  idempotent producers, stats), ``consumers`` (start positions, owner levels), ``entities`` (which
  hub, partition or consumer group an address names; refusals), ``management`` (``$cbs`` put-token,
  ``$management`` READ), ``idempotence`` (producer groups), ``faults``, ``auth`` (SAS tokens),
  ``store`` (hubs), ``log`` (segmented partition logs), ``registry`` (the Schema Registry's groups and
  schemas) and ``avro_schema`` (Avro definitions and their compatibility). Beneath both layers:
  ``events`` (stored, delivery-ready events), ``codec`` (AMQP values and descriptors) and ``sdk_amqp``
  (what the endpoint takes of the SDK's private AMQP codec, named once).
* AMQP layer, translating frames into broker calls: ``server`` (listeners, retention timer),
  ``websocket`` (AMQP over WebSockets: the upgrade and the framing around a connection),
  ``connection`` (headers, SASL, framing, open), ``dispatch`` (a table from performative to handler),
  ``attach`` (link addresses to links), ``links`` (sessions and link endpoints), ``messages``
  (``$cbs``/``$management`` request and reply encoding) and ``frames`` (performatives, hot-path frames).
* Beside them: ``registry_http`` (the Schema Registry's REST data plane over HTTPS, on ``registry``),
  ``admin`` (the admin HTTP endpoint, on the broker), ``__main__`` (command line) and
  ``launcher`` (that command line started as a background process, for the classes here and the stack).

What the endpoint reads of AMQP 1.0, by section of the specification: ``AMQP.md``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .launcher import DEFAULT_KEY, DEFAULT_KEY_NAME, command, connection_string, spawn, wait_ready

__all__ = ["EmulatorAdmin", "EmulatorAdminError", "EmulatorProcess", "DEFAULT_KEY", "DEFAULT_KEY_NAME"]


class EmulatorAdminError(RuntimeError):
    """The endpoint's admin API answered with an error; ``status`` is the HTTP status.

    The message is the endpoint's own: it names the hub, fault kind or field it refused.
    """

    def __init__(self, status: int, message: str):
        super().__init__(f"admin endpoint answered {status}: {message}")
        self.status = status
        self.retryable = status >= 500


class EmulatorAdmin:
    """Client of the admin HTTP JSON endpoint (no dependencies beyond urllib)."""

    def __init__(self, url: str, timeout: float = 10):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", exc.reason)
            except ValueError:
                message = exc.reason
            raise EmulatorAdminError(exc.code, message) from None

    def health(self) -> bool:
        return bool(self._call("GET", "/health").get("ok"))

    def create_hub(self, name: str, partitions: int = 4, consumer_groups: Sequence[str] = ()) -> dict[str, Any]:
        return self._call("POST", "/hubs", {"name": name, "partitions": partitions,
                                            "consumer_groups": list(consumer_groups)})

    def add_partitions(self, hub: str, partitions: int) -> dict[str, Any]:
        """Raise ``hub``'s partition count to ``partitions`` (the new ones empty), as the service does for a hub of
        its Premium and Dedicated tiers; ``EmulatorAdminError`` 409 for a lower count, 404 for no such hub."""
        return self._call("POST", f"/hubs/{quote(hub, safe='')}/partitions", {"partitions": partitions})

    def add_consumer_group(self, hub: str, name: str) -> None:
        self._call("POST", f"/hubs/{quote(hub, safe='')}/consumer-groups", {"name": name})

    def delete_hub(self, name: str) -> None:
        """Delete a hub with its consumer groups and events, as the service does while clients use it:
        their senders and receivers on it are detached with ``amqp:not-found``, and new ones are refused.
        ``EmulatorAdminError`` (404) when there is no such hub."""
        self._call("DELETE", f"/hubs/{quote(name, safe='')}")

    def delete_consumer_group(self, hub: str, name: str) -> None:
        """Delete a consumer group; its receivers are detached with ``amqp:not-found``. ``EmulatorAdminError``:
        404 when the hub or the group does not exist, 400 for ``$Default`` (it goes only with its hub)."""
        self._call("DELETE", f"/hubs/{quote(hub, safe='')}/consumer-groups/{quote(name, safe='')}")

    def list_hubs(self) -> list[dict[str, Any]]:
        return self._call("GET", "/hubs")["hubs"]

    def hub(self, name: str) -> dict[str, Any]:
        """One hub: partitions, consumer groups and ``events`` (how many it holds)."""
        return self._call("GET", f"/hubs/{quote(name, safe='')}")

    def receivers(self, hub: str) -> list[dict[str, Any]]:
        """The consumer links admitted on ``hub`` (their start position is fixed once listed here)."""
        return [r for r in self.stats()["receivers"] if r["hub"].lower() == hub.lower()]

    def set_fault(self, kind: str, *, hub: str | None = None, **params: Any) -> None:
        self._call("POST", "/faults", {"kind": kind, "hub": hub, "params": params})

    def faults(self) -> list[dict[str, Any]]:
        return self._call("GET", "/faults")["faults"]

    def clear_faults(self) -> None:
        self._call("DELETE", "/faults")

    def create_schema_group(self, name: str, format: str = "Avro", compatibility: str = "None") -> dict[str, Any]:
        """Create a Schema Registry group (``format`` Avro, Json or Custom; ``compatibility`` None, Backward or
        Forward), or set the compatibility mode of an existing one of that format."""
        return self._call("POST", "/schema-groups", {"name": name, "format": format, "compatibility": compatibility})

    def schema_groups(self) -> list[dict[str, Any]]:
        """The Schema Registry's groups: format, compatibility mode, and each schema's versions."""
        return self._call("GET", "/schema-groups")["groups"]

    def apply_retention(self) -> int:
        return self._call("POST", "/retention", {})["dropped"]

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/stats")


class EmulatorProcess:
    """The emulator as a child process on ``host:port`` with its data in ``data_dir``.

    Port 0 (the default) picks free ports; ``start`` learns them from a ready file the server writes
    once it listens, and ``restart`` reuses them so clients can reconnect with the same string.
    AMQP over WebSockets is served too, on ``websocket_port`` (0: a free one; ``None``: not served),
    with TLS when ``tls`` names a PEM certificate and key (``wss://``); :attr:`websocket_address` is
    the SDK's ``custom_endpoint_address`` for it.

    With ``require_auth`` (or ``--require-auth`` in ``extra_args``) SAS tokens are validated: those of
    ``key_name``/``key``, which has every right, and those of ``sas_rules``, further keys with their
    rights (name -> (key, rights among ``Send``, ``Listen``, ``Manage``), e.g. ``{"listen-only": ("key2",
    ["Listen"])}``): a sender needs ``Send``, a receiver ``Listen``, and is refused with
    ``amqp:unauthorized-access`` otherwise. ``connection_string(hub, rule="listen-only")`` uses a rule's key.

    The Schema Registry's data plane is served over HTTPS on ``registry_port`` (0: a free one; ``None``,
    the default: not served), with the certificate of ``tls``, which it needs; ``schema_groups`` (name ->
    (format, compatibility mode)) are created at start. :attr:`registry_namespace` is the
    ``fully_qualified_namespace`` to give Microsoft's ``SchemaRegistryClient``.
    """

    def __init__(self, data_dir: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 0,
                 admin_port: int = 0, hubs: dict[str, int] | None = None,
                 consumer_groups: dict[str, list[str]] | None = None, extra_args: Sequence[str] = (),
                 log_path: str | os.PathLike[str] | None = None, key_name: str = DEFAULT_KEY_NAME,
                 key: str = DEFAULT_KEY, websocket_port: int | None = 0,
                 tls: tuple[str | os.PathLike[str], str | os.PathLike[str]] | None = None,
                 sas_rules: Mapping[str, tuple[str, Sequence[str]]] | None = None, require_auth: bool = False,
                 registry_port: int | None = None, schema_groups: Mapping[str, tuple[str, str]] | None = None):
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.admin_port = admin_port
        self.hubs = dict(hubs or {})
        self.consumer_groups = {k: list(v) for k, v in (consumer_groups or {}).items()}
        self.extra_args = list(extra_args)
        self.log_path = Path(log_path) if log_path else self.data_dir / "emulator.log"
        self.key_name = key_name
        self.key = key
        self.sas_rules = {name: (rule_key, list(rights)) for name, (rule_key, rights) in (sas_rules or {}).items()}
        self.require_auth = require_auth
        self.websocket_port = websocket_port
        self.tls = tls
        self.registry_port = registry_port
        self.schema_groups = dict(schema_groups or {})
        self.pid = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self.admin = EmulatorAdmin(f"http://127.0.0.1:{admin_port}")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        return command(
            self.data_dir, host=self.host, port=self.port, admin_port=self.admin_port, hubs=self.hubs,
            consumer_groups=self.consumer_groups, key_name=self.key_name, key=self.key, sas_rules=self.sas_rules,
            require_auth=self.require_auth, websocket_port=self.websocket_port, tls=self.tls,
            registry_port=self.registry_port, schema_groups=self.schema_groups, ready_file=self._ready_path,
            exit_with_parent=os.getpid(), extra_args=self.extra_args,
        )

    @property
    def _ready_path(self) -> Path:
        return self.data_dir / "ready.json"

    def start(self, timeout: float = 30) -> EmulatorProcess:
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._ready_path.unlink(missing_ok=True)
        self._proc = spawn(self.command(), self.log_path)
        self.pid = self._proc.pid
        ready = wait_ready(self._proc, self._ready_path, self.log_path, timeout)
        self.port = int(ready["port"])
        self.admin_port = int(ready["admin_port"])
        if ready.get("websocket_port") is not None:
            self.websocket_port = int(ready["websocket_port"])
        if ready.get("registry_port") is not None:
            self.registry_port = int(ready["registry_port"])
        self.admin = EmulatorAdmin(f"http://127.0.0.1:{self.admin_port}")
        return self

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM and wait (SIGKILL if it does not stop in ``timeout``)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def kill(self) -> None:
        """SIGKILL: a crash, as far as the data on disk is concerned."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def restart(self, timeout: float = 30) -> None:
        """Stop then start on the same ports and data dir."""
        self.stop()
        self._start_on_same_ports(timeout)

    def _start_on_same_ports(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.start(timeout=max(1.0, deadline - time.monotonic()))
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # the port may linger briefly after the old process exits

    def connection_string(self, hub: str | None = None, rule: str | None = None) -> str:
        """The connection string of the main key, or of the rule ``rule`` of ``sas_rules`` (``KeyError`` if none)."""
        if rule is None:
            return connection_string(self.host, self.port, self.key_name, self.key, hub)
        return connection_string(self.host, self.port, rule, self.sas_rules[rule][0], hub)

    @property
    def websocket_address(self) -> str:
        """``sb://host:port`` of the WebSocket listener: the SDK's ``custom_endpoint_address`` to reach it."""
        if self.websocket_port is None:
            raise RuntimeError("this endpoint serves no WebSockets (websocket_port=None)")
        return f"sb://{self.host}:{self.websocket_port}"

    @property
    def registry_namespace(self) -> str:
        """``host:port`` of the Schema Registry: the ``fully_qualified_namespace`` of a ``SchemaRegistryClient``
        (which adds ``https://``), given ``connection_verify=<the CA bundle of tls>``."""
        if self.registry_port is None:
            raise RuntimeError("this endpoint serves no Schema Registry (registry_port=None)")
        return f"{self.host}:{self.registry_port}"

    def __enter__(self) -> EmulatorProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
