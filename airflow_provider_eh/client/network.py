"""How the SDK's clients reach a namespace: transport, HTTP proxy, custom endpoint address, CA bundle.

Namespaces are often reachable only through port 443 (firewalls that block AMQP's 5671), through an
HTTP proxy, or at a Private Link / application gateway address that differs from the namespace's
name, sometimes with a certificate from a company CA. :class:`NetworkOptions` holds those settings
(the ``azure_event_hubs`` connection's fields) and turns them into the SDK's keyword arguments in one
place, :meth:`NetworkOptions.client_kwargs`, which every client the package opens goes through
(:class:`~airflow_provider_eh.client.endpoint.EventHubsEndpoint`). Plain data, no Airflow import: it
travels to Spark executors with the endpoint. The proxy password stays out of ``repr``.

Three facts of the SDK shape it: a proxy always means AMQP over WebSockets (the SDK tunnels the
WebSocket through ``CONNECT``); the SDK is told so explicitly, since with a proxy and a custom
endpoint address but no transport it opens its management link at the namespace's name on port 80;
and its async clients need the proxy host with a scheme (see :meth:`NetworkOptions.client_kwargs`).
Through a proxy, the async clients (aiohttp) tunnel only ``wss://``: a plaintext ``ws://`` endpoint
behind a proxy is reachable by the sync clients alone, which is no restriction for a namespace (TLS).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

#: the connection fields that make up the options (``azure_event_hubs`` connection extras)
FIELDS = ("transport", "proxy_host", "proxy_port", "proxy_username", "proxy_password", "custom_endpoint_address",
          "ca_bundle")
_TRANSPORT_ALIASES = {
    "amqp": "amqp", "tcp": "amqp", "amqp_over_tcp": "amqp",
    "websocket": "websocket", "websockets": "websocket", "amqp_over_websocket": "websocket",
    "amqpoverwebsocket": "websocket", "ws": "websocket",
}


@dataclass(frozen=True)
class NetworkOptions:
    """
    The network path to a namespace. Every field is optional; the defaults are the SDK's (AMQP over TLS on 5671).

    :param transport: ``"amqp"`` (AMQP over TCP, port 5671) or ``"websocket"`` (AMQP over WebSockets, port 443).
    :param proxy_host: an HTTP proxy's host; with ``proxy_port``. Implies ``transport="websocket"``.
    :param proxy_port: the proxy's port.
    :param proxy_username: the proxy's user (Basic authentication), optional.
    :param proxy_password: that user's password.
    :param custom_endpoint_address: where to connect instead of the namespace's own name, e.g. a Private Link
        or application gateway address (``sb://gateway.example.com[:port]``); the namespace's name is still
        what tokens are issued for.
    :param ca_bundle: a PEM file of the CA certificates to trust (a gateway with a private certificate);
        empty: the system's.
    """

    transport: str = "amqp"
    proxy_host: str | None = None
    proxy_port: int | None = None
    proxy_username: str | None = None
    proxy_password: str | None = field(default=None, repr=False)
    custom_endpoint_address: str | None = None
    ca_bundle: str | None = None

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> NetworkOptions:
        """Options from connection fields (strings as forms and URIs give them), checked.

        :raises ValueError: naming the field at fault and what it accepts.
        """
        def text(name: str) -> str | None:
            value = fields.get(name)
            if value is None:
                return None
            value = str(value).strip()
            return value or None

        raw_transport = text("transport")
        transport = "amqp"
        if raw_transport is not None:
            transport = _TRANSPORT_ALIASES.get(raw_transport.lower().replace("-", "_"), "")
            if not transport:
                raise ValueError(f"field 'transport' is {raw_transport!r}; use 'amqp' (AMQP over TCP, port 5671) "
                                 "or 'websocket' (AMQP over WebSockets, port 443)")
        proxy_host, raw_port = text("proxy_host"), text("proxy_port")
        proxy_port = None
        if raw_port is not None:
            try:
                proxy_port = int(raw_port)
            except ValueError:
                proxy_port = -1
            if not 0 < proxy_port < 65536:
                raise ValueError(f"field 'proxy_port' is {raw_port!r}; use the proxy's port, a whole number from 1 to 65535")
        if proxy_host and "://" in proxy_host:
            parsed = urlparse(proxy_host)
            proxy_host = parsed.hostname
            proxy_port = proxy_port or parsed.port
        if bool(proxy_host) != bool(proxy_port):
            missing = "proxy_port" if proxy_host else "proxy_host"
            raise ValueError(f"field '{missing}' is empty; an HTTP proxy needs both 'proxy_host' and 'proxy_port'")
        username, password = text("proxy_username"), text("proxy_password")
        if (username or password) and not proxy_host:
            raise ValueError("fields 'proxy_username'/'proxy_password' are set but 'proxy_host' is empty")
        if password and not username:
            raise ValueError("field 'proxy_password' is set but 'proxy_username' is empty")
        if proxy_host:
            transport = "websocket"  # the SDK reaches a namespace through a proxy only over WebSockets
        address = text("custom_endpoint_address")
        if address is not None:
            parsed = urlparse(address if "://" in address else f"sb://{address}")
            if not parsed.hostname or parsed.scheme not in ("sb", "amqps", "https", "wss"):
                raise ValueError(f"field 'custom_endpoint_address' is {address!r}; use sb://<host>[:<port>] "
                                 "(a Private Link or application gateway address)")
            try:
                parsed.port  # noqa: B018 - raises on a port that is not a number
            except ValueError:
                raise ValueError(f"field 'custom_endpoint_address' is {address!r}: its port is not a number") from None
            address = f"sb://{parsed.netloc}"
        return cls(transport=transport, proxy_host=proxy_host, proxy_port=proxy_port, proxy_username=username,
                   proxy_password=password, custom_endpoint_address=address, ca_bundle=text("ca_bundle"))

    @property
    def is_default(self) -> bool:
        return self == NetworkOptions()

    def describe(self) -> str:
        """The path in words, for logs (no password)."""
        parts = ["AMQP over WebSockets (443)" if self.transport == "websocket" else "AMQP over TCP (5671)"]
        if self.proxy_host:
            parts.append(f"through HTTP proxy {self.proxy_host}:{self.proxy_port}"
                         + (f" as {self.proxy_username}" if self.proxy_username else ""))
        if self.custom_endpoint_address:
            parts.append(f"at {self.custom_endpoint_address}")
        if self.ca_bundle:
            parts.append(f"trusting the CAs in {self.ca_bundle}")
        return ", ".join(parts)

    def client_kwargs(self, aio: bool = False) -> dict[str, Any]:
        """The SDK clients' keyword arguments for this path; ``aio`` for the ``azure.eventhub.aio`` clients.

        The async clients' WebSocket transport hands the proxy to aiohttp as ``host:port``, which aiohttp
        refuses without a scheme: for them the host is given as ``http://host``.
        """
        from azure.eventhub import TransportType

        kwargs: dict[str, Any] = {}
        if self.transport == "websocket":
            kwargs["transport_type"] = TransportType.AmqpOverWebsocket
        if self.proxy_host:
            host = f"http://{self.proxy_host}" if aio and "://" not in self.proxy_host else self.proxy_host
            proxy: dict[str, Any] = {"proxy_hostname": host, "proxy_port": self.proxy_port}
            if self.proxy_username:
                proxy.update(username=self.proxy_username, password=self.proxy_password or "")
            kwargs["http_proxy"] = proxy
        if self.custom_endpoint_address:
            kwargs["custom_endpoint_address"] = self.custom_endpoint_address
        if self.ca_bundle:
            if not os.path.isfile(self.ca_bundle):
                raise ValueError(f"field 'ca_bundle' names {self.ca_bundle!r}, which is not a file on this machine; "
                                 "the CA bundle must exist wherever clients are opened (workers, triggerer, Spark executors)")
            kwargs["connection_verify"] = self.ca_bundle
        return kwargs
