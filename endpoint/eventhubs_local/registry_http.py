"""The Schema Registry's data plane over HTTPS: the REST operations of api-version 2022-10 (and 2021-10).

What Microsoft's ``azure-schemaregistry`` client and its encoders call, at
``https://<host>:<port>`` (the client's ``fully_qualified_namespace`` is ``host:port``):

* ``PUT /$schemaGroups/{group}/schemas/{name}`` -- register (204; the same definition again: its version);
* ``POST /$schemaGroups/{group}/schemas/{name}:get-id`` -- the version with this definition (204);
* ``GET /$schemaGroups/$schemas/{id}`` -- a schema by id (200, the definition as the body);
* ``GET /$schemaGroups/{group}/schemas/{name}/versions/{version}`` -- a schema by version (200);
* ``GET /$schemaGroups/{group}/schemas/{name}/versions`` -- ``{"Value": [1, 2, ...]}``;
* ``GET /$schemaGroups`` -- ``{"Value": [group, ...]}``.

The request's ``Content-Type`` names the format (``application/json; serialization=Avro``,
``application/json; serialization=Json``, ``text/plain; charset=utf-8`` for Custom); answers carry
``Schema-Id``, ``Schema-Version``, ``Schema-Group-Name``, ``Schema-Name``, ``Location``,
``Schema-Id-Location`` and ``Schema-Versions-Location``, errors ``{"error": {"code", "message"}}``
with ``x-ms-error-code``, as the service's do.

Authentication: every request needs ``Authorization: Bearer <token>`` (the client's
``TokenCredential``). With ``--require-auth`` the token must be a SAS token signed with one of the
endpoint's keys for the namespace (``sr=https://<host>:<port>/``); registering needs a key with
``Manage`` (the service's Schema Registry Contributor), reading any key. Without it any token is
accepted, as on ``$cbs``. A missing or invalid token is answered 401.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from urllib.parse import parse_qs, quote, unquote, urlsplit

from .auth import MANAGE, AuthError, SasValidator
from .entities import unauthorized_description
from .registry import Registry, RegistryError, SchemaGroup, Version

_LOG = logging.getLogger("eventhubs_local")
API_VERSIONS = ("2022-10", "2021-10")
CONTENT_TYPES = {"application/json;serialization=avro": "Avro", "application/json;serialization=json": "Json",
                 "text/plain;charset=utf-8": "Custom", "text/plain": "Custom"}
RESPONSE_TYPES = {"Avro": "application/json; serialization=Avro", "Json": "application/json; serialization=Json",
                  "Custom": "text/plain; charset=utf-8"}
_REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 411: "Length Required", 413: "Payload Too Large",
            415: "Unsupported Media Type", 500: "Internal Server Error"}
MAX_HEAD = 16 * 1024
MAX_BODY = 2 * 1024 * 1024
IDLE_TIMEOUT = 60.0


class RegistryServer:
    """The HTTPS listener of the Schema Registry over one :class:`~.registry.Registry`."""

    def __init__(self, registry: Registry, host: str, port: int, tls: ssl.SSLContext,
                 validator: SasValidator | None = None):
        self.registry = registry
        self.host = host
        self.port = port
        self.tls = tls
        self.validator = validator
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, ssl=self.tls, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Requests of one connection, kept alive until the client closes it or stays idle."""
        try:
            while True:
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT)
                except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    return
                keep = await self._one(head, reader, writer)
                await writer.drain()
                if not keep:
                    return
        except (ConnectionError, OSError, ssl.SSLError, asyncio.IncompleteReadError):
            return  # the client went away mid-request
        finally:
            try:
                writer.close()
            except (ConnectionError, OSError, RuntimeError):
                pass

    async def _one(self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        keep = headers.get("connection", "").lower() != "close"
        if len(parts) != 3:
            self._write(writer, 400, _error("InvalidRequest", "malformed request line"), {}, False)
            return False
        method, target = parts[0].upper(), parts[1]
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._write(writer, 411, _error("InvalidRequest", "send the schema with a Content-Length"), {}, False)
            return False
        try:
            length = int(headers.get("content-length", "0") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self._write(writer, 413, _error("InvalidRequest", f"a body of {length} bytes is refused"), {}, False)
            return False
        body = await reader.readexactly(length) if length else b""
        try:
            status, payload, extra = self.handle(method, target, headers, body)
        except RegistryError as exc:
            status, payload, extra = exc.status, _error(exc.code, exc.message), {"x-ms-error-code": exc.code}
        except Exception as exc:  # noqa: BLE001 - a request must never take the server down
            _LOG.exception("schema registry request %s %s failed", method, target)
            status, payload, extra = 500, _error("InternalError", f"internal error: {exc!r}"), {}
        self._write(writer, status, payload, extra, keep)
        return keep

    @staticmethod
    def _write(writer: asyncio.StreamWriter, status: int, payload: bytes | None, headers: dict[str, str],
               keep: bool) -> None:
        data = payload or b""
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}"]
        if payload is not None and "Content-Type" not in headers:
            head.append("Content-Type: application/json")
        head += [f"{k}: {v}" for k, v in headers.items()]
        head += [f"Content-Length: {len(data)}", "Connection: " + ("keep-alive" if keep else "close")]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)

    # -- routing ----------------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: dict[str, str],
               body: bytes) -> tuple[int, bytes | None, dict[str, str]]:
        """One request: ``(status, body or None, headers)``; refusals raise :class:`RegistryError`."""
        url = urlsplit(target)
        segments = [unquote(s) for s in url.path.strip("/").split("/")]
        if not segments or segments[0].lower() != "$schemagroups":
            raise RegistryError(404, "ItemNotFound", f"no Schema Registry operation at {url.path}; "
                                                     "the data plane is under /$schemaGroups")
        api_version = (parse_qs(url.query).get("api-version") or [""])[0]
        if api_version not in API_VERSIONS:
            raise RegistryError(400, "InvalidRequest", f"api-version {api_version or '(none)'!r} is not supported: "
                                                       f"use {' or '.join(API_VERSIONS)}")
        writing = method == "PUT"
        self._authorize(headers.get("authorization", ""), writing)
        base = f"https://{headers.get('host') or f'{self.host}:{self.port}'}"
        rest = segments[1:]
        if method == "GET" and rest == []:
            return 200, json.dumps({"Value": [g.name for g in self.registry.groups.values()]}).encode(), {}
        if method == "GET" and len(rest) == 2 and rest[0].lower() == "$schemas":
            return self._schema(*self.registry.by_schema_id(rest[1]), base, api_version)
        if len(rest) >= 3 and rest[1].lower() == "schemas":
            group_name, name = rest[0], rest[2]
            if len(rest) == 3 and method in ("PUT", "POST"):
                get_id = method == "POST"
                if get_id:
                    if not name.endswith(":get-id"):
                        raise RegistryError(405, "InvalidRequest", f"POST {url.path}: only ':get-id' is served")
                    name = name[: -len(":get-id")]
                fmt = _format(headers.get("content-type", ""))
                definition = body.decode("utf-8", errors="replace")
                if get_id:
                    found = self.registry.find(group_name, name, fmt, definition)
                else:
                    found = self.registry.register(group_name, name, fmt, definition)
                return 204, None, _properties(*found, base, api_version)
            if method == "GET" and len(rest) == 4 and rest[3].lower() == "versions":
                group = self.registry.group(group_name)
                versions = [v.version for v in group.versions(name)]
                return 200, json.dumps({"Value": versions}).encode(), {}
            if method == "GET" and len(rest) == 5 and rest[3].lower() == "versions":
                if not rest[4].isdigit():
                    raise RegistryError(400, "InvalidRequest", f"schema version {rest[4]!r} is not a whole number")
                return self._schema(*self.registry.by_version(group_name, name, int(rest[4])), base, api_version)
        raise RegistryError(404 if method in ("GET", "PUT", "POST") else 405, "InvalidRequest",
                            f"no Schema Registry operation for {method} {url.path}")

    def _authorize(self, header: str, writing: bool) -> None:
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() == "sharedaccesssignature":
            scheme, token = "bearer", header.strip()
        if scheme.lower() != "bearer" or not token.strip():
            raise RegistryError(401, "Unauthorized", "Unauthorized: the request has no 'Authorization: Bearer <token>' "
                                                     "header (give the client a TokenCredential)")
        if self.validator is None:
            return
        try:
            rights = self.validator.namespace_rights(token.strip())
        except AuthError as exc:
            raise RegistryError(401, "Unauthorized", f"Unauthorized: {exc}") from None
        if writing and MANAGE not in rights:
            raise RegistryError(401, "Unauthorized", unauthorized_description(MANAGE, "$schemaGroups"))

    def _schema(self, group: SchemaGroup, name: str, version: Version, base: str,
                api_version: str) -> tuple[int, bytes, dict[str, str]]:
        headers = _properties(group, name, version, base, api_version)
        headers["Content-Type"] = RESPONSE_TYPES[group.format]
        return 200, version.definition.encode("utf-8"), headers


def _format(content_type: str) -> str:
    normalized = content_type.replace(" ", "").lower()
    fmt = CONTENT_TYPES.get(normalized)
    if fmt is None:
        raise RegistryError(415, "InvalidSchemaType", f"Invalid schema type for request. {content_type!r} is not "
                                                      f"supported: use {', '.join(sorted(set(RESPONSE_TYPES.values())))}")
    return fmt


def _properties(group: SchemaGroup, name: str, version: Version, base: str, api_version: str) -> dict[str, str]:
    q = f"?api-version={api_version}"
    path = f"{base}/$schemagroups/{quote(group.name)}/schemas/{quote(name)}"
    return {
        "Location": f"{path}/versions/{version.version}{q}",
        "Schema-Id": version.id,
        "Schema-Id-Location": f"{base}/$schemagroups/$schemas/{version.id}{q}",
        "Schema-Group-Name": group.name,
        "Schema-Name": name,
        "Schema-Version": str(version.version),
        "Schema-Versions-Location": f"{path}/versions{q}",
    }


def _error(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}).encode()
