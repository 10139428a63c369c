"""The admin HTTP JSON endpoint (127.0.0.1 only): hubs, consumer groups, faults, stats.

Routes (JSON bodies and replies; errors are ``{"error": "..."}`` with a 4xx status):

* ``GET /health`` -- ``{"ok": true}``
* ``GET /hubs`` -- every hub; ``POST /hubs`` ``{"name", "partitions", "consumer_groups"}`` creates one
  (201; 200 if it already existed with the same partition count)
* ``DELETE /hubs/<hub>`` -- delete a hub with its events; its clients' links are detached (``amqp:not-found``)
* ``POST /hubs/<hub>/partitions`` ``{"partitions"}`` -- raise the hub's partition count (never lowered: 409)
* ``POST /hubs/<hub>/consumer-groups`` ``{"name"}`` -- add a consumer group
* ``DELETE /hubs/<hub>/consumer-groups/<group>`` -- delete a consumer group (not ``$Default``); its
  receivers are detached
* ``GET /faults``; ``POST /faults`` ``{"kind", "hub"?, "params"?}``; ``DELETE /faults`` clears all
* ``GET /stats`` -- events stored, connections, links, CPU seconds of the server process
* ``POST /retention`` -- run a retention pass now
* ``GET /schema-groups`` -- the Schema Registry's groups with their schemas' versions;
  ``POST /schema-groups`` ``{"name", "format", "compatibility"}`` creates one (201; 200 if it existed,
  its compatibility mode set)
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import unquote

from .broker import Broker
from .faults import FaultError
from .registry import Registry
from .store import StoreError

_LOG = logging.getLogger(__name__)
_REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 413: "Payload Too Large", 500: "Internal Server Error"}
MAX_BODY = 1024 * 1024


class AdminServer:
    """The admin endpoint over one broker: serves the routes above on ``host:port`` (port 0: a free one)."""

    def __init__(self, broker: Broker, host: str = "127.0.0.1", port: int = 5680, *, registry: Registry | None = None):
        self.broker = broker
        self.registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        status, reply = 500, {"error": "internal error"}
        try:
            request_line = (await asyncio.wait_for(reader.readline(), 10)).decode("latin-1").strip()
            parts = request_line.split()
            if len(parts) < 2:
                raise _HttpError(400, f"malformed request line {request_line!r}")
            method, target = parts[0].upper(), parts[1]
            length = 0
            while True:
                line = (await asyncio.wait_for(reader.readline(), 10)).decode("latin-1")
                if line in ("\r\n", "\n", ""):
                    break
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if length > MAX_BODY:
                raise _HttpError(413, f"request body of {length} bytes is too large")
            raw = await reader.readexactly(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                raise _HttpError(400, "request body is not JSON") from None
            if not isinstance(body, dict):
                raise _HttpError(400, "request body must be a JSON object")
            status, reply = self.route(method, target.split("?", 1)[0], body)
        except _HttpError as exc:
            status, reply = exc.status, {"error": exc.message}
        except StoreError as exc:
            status, reply = exc.status, {"error": str(exc)}
        except FaultError as exc:
            status, reply = 400, {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001
            _LOG.exception("admin request failed")
            status, reply = 500, {"error": f"internal error: {exc!r}"}
        data = json.dumps(reply).encode()
        try:
            writer.write(
                f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
            await writer.drain()
            writer.close()
        except (ConnectionError, OSError):
            pass

    def route(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        broker = self.broker
        segments = [unquote(s) for s in path.strip("/").split("/") if s]
        if segments == ["health"]:
            return 200, {"ok": True}
        if segments == ["stats"] and method == "GET":
            return 200, broker.stats()
        if segments and segments[0] == "hubs":
            found = self._hubs_route(method, segments[1:], body)
            if found is not None:
                return found
        if segments == ["faults"]:
            found = self._faults_route(method, body)
            if found is not None:
                return found
        if segments == ["schema-groups"] and self.registry is not None:
            if method == "GET":
                return 200, {"groups": [g.describe() for g in self.registry.groups.values()]}
            if method == "POST":
                try:
                    group, created = self.registry.create_group(_name(body, "name"), body.get("format", "Avro"),
                                                                body.get("compatibility", "None"))
                except ValueError as exc:
                    raise _HttpError(400, str(exc)) from None
                return (201 if created else 200), group.describe()
        if segments == ["retention"] and method == "POST":
            return 200, {"dropped": broker.apply_retention()}
        raise _HttpError(404 if method in ("GET", "POST", "DELETE") else 405, f"no route for {method} {path}")

    def _hubs_route(self, method: str, rest: list[str], body: dict[str, Any]) -> tuple[int, Any] | None:
        """``/hubs`` and what is under it (``rest``: the path after ``hubs``); None when no route matches."""
        broker, store = self.broker, self.broker.store
        if not rest:
            if method == "GET":
                return 200, {"hubs": [h.describe() for h in store.hubs.values()]}
            if method == "POST":
                groups = body.get("consumer_groups", [])
                if not isinstance(groups, list):
                    raise _HttpError(400, "consumer_groups must be a list of names")
                hub, created = store.create_hub(_name(body, "name"), body.get("partitions", 4), groups)
                return (201 if created else 200), hub.describe()
            return None
        if len(rest) == 1 and method == "GET":
            found = store.get(rest[0])
            if found is None:
                raise _HttpError(404, f"hub {rest[0]!r} does not exist")
            return 200, found.describe()
        if len(rest) == 1 and method == "DELETE":
            return 200, {"deleted": broker.delete_hub(rest[0]).name}
        if len(rest) == 2 and rest[1] == "partitions" and method == "POST":
            return 200, store.add_partitions(rest[0], body.get("partitions")).describe()
        if len(rest) == 2 and rest[1] == "consumer-groups" and method == "POST":
            return 200, store.add_consumer_group(rest[0], _name(body, "name")).describe()
        if len(rest) == 3 and rest[1] == "consumer-groups" and method == "DELETE":
            return 200, broker.delete_consumer_group(rest[0], rest[2]).describe()
        return None

    def _faults_route(self, method: str, body: dict[str, Any]) -> tuple[int, Any] | None:
        broker = self.broker
        if method == "GET":
            return 200, {"faults": broker.faults.describe()}
        if method == "POST":
            params = body.get("params", {})
            if not isinstance(params, dict):
                raise _HttpError(400, "params must be an object")
            on = body.get("hub")
            if on is not None and (not isinstance(on, str) or broker.store.get(on) is None):
                raise _HttpError(404, f"hub {on!r} does not exist")
            fault = broker.faults.set(_name(body, "kind"), on, **params)
            _LOG.info("fault set: %s", fault.describe())
            return 200, fault.describe()
        if method == "DELETE":
            broker.faults.clear()
            _LOG.info("faults cleared")
            return 200, {"faults": []}
        return None


class _HttpError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _name(body: dict[str, Any], field: str) -> str:
    """A request's required string field, or a 400 that names it."""
    value = body.get(field)
    if not isinstance(value, str) or not value:
        raise _HttpError(400, f"{field} must be a non-empty string, got {value!r}")
    return value
