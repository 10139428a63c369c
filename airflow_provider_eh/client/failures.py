"""The one map from the SDKs' raw errors to the package's: which connection, which address, which field, what happened.

The Azure SDKs report a refused proxy, a certificate nobody trusts, a name that does not resolve
and a hub that does not exist as ``EventHubError``, ``ConnectError``, ``ServiceRequestError`` or
``HttpResponseError`` with a text of their own, sometimes twice over, and without the connection
they were made for. :func:`provider_error` reads such an error, its whole chain (``__cause__``,
``__context__``, the AMQP error inside an ``EventHubError``, the socket error inside an aiohttp or
urllib3 one), and returns the package's error for it, built from a :class:`FailureSite` that says
where the failure happened:

| what the chain holds | error | retried |
| --- | --- | --- |
| the proxy answered CONNECT with 401 or 407 | ``ProxyRefusedError`` | no |
| the proxy answered CONNECT with 403 | ``ProxyRefusedError`` | no |
| the proxy answered CONNECT with another status (502, ...) | ``ConnectionUnreachableError`` | yes |
| a name that does not resolve (``socket.gaierror``; ``EAI_AGAIN``: retried) | ``ConnectionConfigError`` | no |
| a certificate that does not verify, another TLS failure | ``ConnectionConfigError`` | no |
| a missing hub, consumer group or container | ``UnknownEventHubError``, ``UnknownConsumerGroupError``, the store's | no |
| the service refused the credential (401, 403, an expired token) | ``CredentialRefusedError`` | no |
| the service is busy (ServerBusy, 429, 503) | ``ServiceBusyError`` | yes |
| refused, reset or lost connections, time-outs, 5xx, any other SDK or Azure Core error | ``ConnectionUnreachableError`` | yes |

Every message names the connection id, the service and its address (and the proxy's), the
connection field to check, and what already happened (``FailureSite.done``). No text of the
SDK's error is repeated, only its class, status and condition and the resolver's or TLS's reason,
so no secret it echoes (a SAS signature, a proxy password inside a URL) can reach a message; the
site holds no credential.

Layers that know an endpoint but not the connection it came from (read-back, Spark's driver) find
the connection in the task's :func:`failure_scope` (:func:`site_of`); an Airflow task opens one
around its work and notes its sites in it (:func:`note_site`).

No Airflow import: the engines, Spark's driver and the triggers map with it too.
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlparse

from airflow_provider_eh.errors import (
    CheckpointStoreError,
    ConnectionConfigError,
    ConnectionUnreachableError,
    CredentialRefusedError,
    EventHubsProviderError,
    ProducerStateStoreError,
    ProxyRefusedError,
    ServiceBusyError,
    UnknownConsumerGroupError,
    UnknownEventHubError,
)

if TYPE_CHECKING:
    from airflow_provider_eh.client.endpoint import EventHubsEndpoint

Service = Literal["Event Hubs", "blob storage"]
EVENT_HUBS: Service = "Event Hubs"
BLOB_STORAGE: Service = "blob storage"
#: what the blob container of a site holds: the error a missing container raises follows from it
StoreRole = Literal["producer state", "checkpoints", ""]

#: what the sentence of :attr:`FailureSite.done` says when a caller knows that nothing reached the hub
NOTHING_SENT = "Nothing was sent."

#: what the checkpoint sensor's error says happened: it never writes
SENSOR_ONLY_READS = "Nothing was written: the sensor only reads checkpoints."


@dataclass(frozen=True)
class FailureSite:
    """
    Where a failure happened, in the words of the connection that led there; never a credential.

    :param conn_id: the Airflow connection id.
    :param service: ``"Event Hubs"`` or ``"blob storage"``.
    :param address: the ``host:port`` the client connects to (the custom endpoint address when one is set).
    :param proxy: the HTTP proxy's ``host:port``, or ``None``.
    :param hub: the Event Hub, for an Event Hubs site.
    :param consumer_group: the consumer group read, if any.
    :param container: the blob container, for a storage site.
    :param done: a sentence of what already happened (``"Nothing was sent."``, ``"Partition 2 committed, 3
        pending: a retry resumes."``); empty when the caller cannot tell.
    :param address_field: the connection field that sets :attr:`address` (``custom_endpoint_address``,
        ``host``, the ``Endpoint`` of ``connection_string``).
    :param hub_field: where the hub's name comes from.
    :param credential_fields: the fields that make up the credential, and the role it needs.
    :param container_field: the argument or field naming the container.
    :param ca_bundle: the connection's ``ca_bundle`` path, or ``None`` (the system's CAs).
    :param role: what the container holds (``"producer state"``, ``"checkpoints"``), for the error of a missing one.
    :param doing: what was being done, to lead the message (``"reading the hub's properties"``); may be empty.
    """

    conn_id: str
    service: Service = EVENT_HUBS
    address: str = ""
    proxy: str | None = None
    hub: str | None = None
    consumer_group: str | None = None
    container: str | None = None
    done: str = ""
    address_field: str = "host"
    hub_field: str = "eventhub_name"
    credential_fields: str = "the credential fields"
    container_field: str = "the container"
    ca_bundle: str | None = None
    role: StoreRole = ""
    doing: str = ""

    @classmethod
    def of_endpoint(cls, conn_id: str, endpoint: EventHubsEndpoint, *, done: str = "",
                    consumer_group: str | None = None, hub_field: str | None = None) -> FailureSite:
        """The site of ``endpoint``'s hub reached through connection ``conn_id`` (no credential is kept).

        :param hub_field: where the hub's name came from, when the caller knows (an operator's argument).
        """
        network = endpoint.network
        websocket = network.transport == "websocket"
        if network.custom_endpoint_address:
            address = _host_port(network.custom_endpoint_address, 443 if websocket else 5671)
            address_field = "custom_endpoint_address"
        else:
            address = _host_port(endpoint.fully_qualified_namespace, 443 if websocket else 5671)
            address_field = "the Endpoint of connection_string" if endpoint.connection_string else "host"
        if endpoint.connection_string:
            in_string = "SharedAccessSignature" in endpoint.connection_string
            credential = ("the SAS token (SharedAccessSignature of connection_string)" if in_string else
                          "the SAS key name and key (SharedAccessKeyName and SharedAccessKey of connection_string)")
            default_hub_field = "the eventhub_name argument, the EntityPath of connection_string or the eventhub_name field"
        else:
            credential = ("login (client id), password (client secret) and tenant_id"
                          if endpoint.credential_kind == "client_secret" else "the identity DefaultAzureCredential finds")
            credential += (" and its role on the hub (Azure Event Hubs Data Sender to publish, Data Receiver to read)")
            default_hub_field = "the eventhub_name argument or the eventhub_name field"
        proxy = f"{network.proxy_host}:{network.proxy_port}" if network.proxy_host else None
        return cls(conn_id=conn_id, service=EVENT_HUBS, address=address, proxy=proxy, hub=endpoint.eventhub_name,
                   consumer_group=consumer_group, done=done, address_field=address_field,
                   hub_field=hub_field or default_hub_field, credential_fields=credential,
                   ca_bundle=network.ca_bundle)

    @classmethod
    def of_blob(cls, conn_id: str, account_url: str | None, *, container: str | None = None,
                container_field: str = "the container", proxy: str | None = None, ca_bundle: str | None = None,
                credential_fields: str = "the connection's key, SAS token or identity (and its Storage Blob Data role)",
                role: StoreRole = "", done: str = "") -> FailureSite:
        """The site of a blob account (``account_url``: the client's URL; a SAS in its query is dropped)."""
        address = _host_port(account_url or "", 443) if account_url else ""
        return cls(conn_id=conn_id, service=BLOB_STORAGE, address=address, proxy=proxy, container=container,
                   container_field=container_field, address_field="host (the account URL) or connection_string",
                   credential_fields=credential_fields, ca_bundle=ca_bundle, role=role, done=done)

    def having_done(self, done: str) -> FailureSite:
        """The same site with another sentence of what already happened."""
        return replace(self, done=done)

    def during(self, doing: str) -> FailureSite:
        """The same site, the message led by ``doing`` (``"reading the hub's properties"``)."""
        return replace(self, doing=doing)

    def describe(self) -> str:
        """``Event Hub 'orders' at ns.servicebus.windows.net:443 through HTTP proxy 10.0.0.1:3128``, or
        ``blob storage at acct.blob.core.windows.net:443, container 'eh-state'``."""
        if self.service == EVENT_HUBS:
            what = f"Event Hub {self.hub!r}" if self.hub else "Event Hubs"
            if self.consumer_group:
                what += f" (consumer group {self.consumer_group!r})"
        else:
            what = "blob storage"
        if self.address:
            what += f" at {self.address}"
        if self.service == BLOB_STORAGE and self.container:
            what += f", container {self.container!r}"
        if self.proxy:
            what += f" through HTTP proxy {self.proxy}"
        return what


def _host_port(address: str, default_port: int) -> str:
    """``host:port`` of an address or URL, with nothing else of it (no user, path or query)."""
    text = address.strip()
    parsed = urlparse(text if "://" in text else f"sb://{text}")
    host = parsed.hostname or text.split("/", 1)[0]
    try:
        port = parsed.port
    except ValueError:
        port = None
    if port is None and parsed.scheme == "http":
        port = 80
    return f"{host}:{port or default_port}"


# --- reading an error -------------------------------------------------------------------------------------------

_PROXY_STATUS = re.compile(r"(?:CONNECT via proxy status:|Tunnel connection failed:|proxy status:?)\s*(\d{3})", re.I)
_STATUS_CODE = re.compile(r"Status code:?\s*(\d{3})", re.I)
_CHAIN_ATTRIBUTES = ("__cause__", "__context__", "inner_error", "inner_exception", "os_error", "certificate_error",
                     "reason", "error")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception it carries, outermost first, each once."""
    seen: dict[int, BaseException] = {}
    todo = [exc]
    while todo:
        item = todo.pop(0)
        if id(item) in seen:
            continue
        seen[id(item)] = item
        for name in _CHAIN_ATTRIBUTES:
            inner = getattr(item, name, None)
            if isinstance(inner, BaseException):
                todo.append(inner)
        todo.extend(arg for arg in getattr(item, "args", ()) if isinstance(arg, BaseException))
    return list(seen.values())


def _names(chain: list[BaseException]) -> set[str]:
    return {cls.__name__ for item in chain for cls in type(item).__mro__}


def _condition(item: BaseException) -> str:
    """An AMQP error's condition as the wire spells it (``amqp:not-found``), or ``""``."""
    condition = getattr(item, "condition", None)
    if condition is None:
        return ""
    value = getattr(condition, "value", condition)
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _status(item: BaseException) -> int | None:
    for name in ("status_code", "status"):
        value = getattr(item, name, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    return None


_DNS_TEXT = re.compile(r"Name or service not known|nodename nor servname|No address associated|"
                       r"Temporary failure in name resolution|getaddrinfo failed")
_TLS_TEXT = re.compile(r"CERTIFICATE_VERIFY_FAILED|WRONG_VERSION_NUMBER|certificate verify failed|SSLError|"
                       r"record layer failure|UNEXPECTED_EOF_WHILE_READING|TLSV1_ALERT")
_VERIFY_MESSAGE = re.compile(r"certificate verify failed: ([^(\n]+?)\s*(?:\(_ssl|$|\n)", re.M)


@dataclass(frozen=True)
class _Reading:
    """What an error's chain (or a reported error's type and text) says, in the few facts the map needs.

    :param dns: why a name did not resolve (``None``: no resolution failure); ``dns_temporary``: the resolver
        did not answer (``EAI_AGAIN``), the name may be right.
    :param tls: why TLS failed (``None``: no TLS failure); ``tls_verify``: the certificate did not verify.
    """

    proxy_status: int | None
    dns: str | None
    dns_temporary: bool
    tls: str | None
    tls_verify: bool
    refused: bool
    conditions: frozenset[str]
    status: int | None
    text: str
    names: frozenset[str]

    @classmethod
    def of(cls, exc: BaseException) -> _Reading:
        chain = _chain(exc)
        proxy_status = next((_status(i) for i in chain if type(i).__name__ == "ClientHttpProxyError"), None)
        statuses = [s for s in (_status(i) for i in chain) if s]
        gai = next((i for i in chain if isinstance(i, socket.gaierror)), None)
        tls = next((i for i in chain if isinstance(i, ssl.SSLError)), None)
        reading = cls.of_text(
            "\n".join(str(item) for item in chain), _names(chain), status=statuses[0] if statuses else None,
            conditions=frozenset(c for c in (_condition(i) for i in chain) if c), proxy_status=proxy_status,
        )
        facts: dict[str, object] = {}
        if gai is not None:
            facts.update(dns=gai.strerror or "the name does not resolve", dns_temporary=gai.errno == socket.EAI_AGAIN)
        if tls is not None:
            verify = isinstance(tls, ssl.SSLCertVerificationError)
            facts.update(tls_verify=verify or reading.tls_verify,
                         tls=(getattr(tls, "verify_message", None) if verify else getattr(tls, "reason", None))
                         or reading.tls or type(tls).__name__)
        if any(isinstance(i, ConnectionRefusedError) for i in chain):
            facts["refused"] = True
        return replace(reading, **facts)  # type: ignore[arg-type]

    @classmethod
    def of_text(cls, text: str, names: set[str], *, status: int | None = None,
                conditions: frozenset[str] = frozenset(), proxy_status: int | None = None) -> _Reading:
        """The facts a text says (an executor's report carries the error's type name and first line only)."""
        match = _PROXY_STATUS.search(text)
        if proxy_status is None and match:
            proxy_status = int(match.group(1))
        dns_match = _DNS_TEXT.search(text)
        dns = dns_match.group(0) if dns_match else ("the name does not resolve" if "gaierror" in names else None)
        tls_match = _TLS_TEXT.search(text)
        verify = "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text
        reason = _VERIFY_MESSAGE.search(text)
        tls = (reason.group(1).strip() if reason else tls_match.group(0)) if tls_match else None
        code = _STATUS_CODE.search(text)
        return cls(
            proxy_status=proxy_status, dns=dns, dns_temporary=bool(dns and "Temporary failure" in dns),
            tls=tls, tls_verify=verify, refused="Connection refused" in text or "ConnectionRefusedError" in names,
            conditions=conditions, status=status or (int(code.group(1)) if code else None), text=text,
            names=frozenset(names),
        )

    def condition(self, *spellings: str) -> bool:
        """True when an AMQP condition, or the text, says one of ``spellings`` (``not-found``, ``NotFound``, ...)."""
        found = " ".join(self.conditions) + "\n" + self.text
        return any(s.lower() in found.lower() for s in spellings)

    def any_of(self, *names: str) -> bool:
        return bool(self.names.intersection(names))


_FAMILIES = ("EventHubError", "AMQPException", "AzureError", "WebSocketException", "ClientError", "HTTPError",
             "RequestException", "ProxyError", "OperationTimeoutError")


def _is_service_failure(exc: BaseException) -> bool:
    """True for what the map reads: the SDKs' errors and the network's, not a bug or bad input of ours."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False  # a local file (a CA bundle that is not there), not the network
    if isinstance(exc, (OSError, TimeoutError)):
        return True
    return bool({cls.__name__ for cls in type(exc).__mro__}.intersection(_FAMILIES))


# --- the map ----------------------------------------------------------------------------------------------------


def provider_error(exc: BaseException, site: FailureSite) -> EventHubsProviderError | None:
    """The package's error for ``exc`` raised at ``site`` (see the module's table); ``None`` when ``exc`` is no
    service or network failure (bad input, a bug) or already the package's own. Raise it ``from exc``."""
    if isinstance(exc, EventHubsProviderError) or not _is_service_failure(exc):
        return None
    if exc.__class__.__name__ in ("ClientClosedError", "EventDataError"):
        return None  # the client's own state or the event at fault, not the connection
    reading = _Reading.of(exc)
    if reading.condition("message-size-exceeded"):
        return None  # an event too large: the input, not the connection
    return _classify(reading, site, type(exc).__name__)


def retry_can_help(exc: BaseException) -> bool | None:
    """Whether the map classes ``exc`` as a failure that may pass (a lost connection, a busy service) rather than a
    setting to fix (a refused key, a missing hub); ``None`` when the map does not read ``exc``."""
    mapped = provider_error(exc, FailureSite(conn_id=UNKNOWN_CONNECTION))
    return None if mapped is None else mapped.retryable


#: the names of the errors an executor may report (:class:`~airflow_provider_eh.publishing.driver.SendOutcome`)
#: that the map reads: the SDKs' and the network's
_REPORTED = frozenset({
    "EventHubError", "EventDataSendError", "EventDataError", "ConnectError", "AuthenticationError", "ConnectionLostError",
    "OperationTimeoutError",
    "AzureError", "ServiceRequestError", "ServiceResponseError", "HttpResponseError", "ClientAuthenticationError",
    "ResourceNotFoundError", "OSError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
    "BrokenPipeError", "TimeoutError", "gaierror", "SSLError", "SSLCertVerificationError", "WebSocketProxyException",
    "WebSocketAddressException", "WebSocketTimeoutException", "WebSocketConnectionClosedException",
    "WebSocketBadStatusException",
})


def provider_error_of_report(error_type: str | None, message: str, site: FailureSite) -> EventHubsProviderError | None:
    """:func:`provider_error` for an error known only by its type's name and text, as an executor reports it
    across processes; ``None`` for a type the map does not read."""
    if error_type not in _REPORTED:
        return None
    return _classify(_Reading.of_text(message, {error_type}), site, error_type)


def _classify(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError:  # noqa: C901 - one table
    proxy_fields = "proxy_host and proxy_port"
    if r.proxy_status in (401, 407):
        return ProxyRefusedError(site.conn_id, _message(
            site, f"the HTTP proxy refused the connection's proxy credentials (CONNECT answered {r.proxy_status})",
            "proxy_username and proxy_password"))
    if r.proxy_status == 403:
        port = site.address.rpartition(":")[2] or "443"
        return ProxyRefusedError(site.conn_id, _message(
            site, f"the HTTP proxy does not allow CONNECT to {site.address or 'the service'} (CONNECT answered 403)",
            f"{proxy_fields} (a proxy that tunnels to port {port}), and the proxy's rules for that host"))
    if r.proxy_status is not None:
        return ConnectionUnreachableError(site.conn_id, _message(
            site, f"the HTTP proxy could not open a tunnel to {site.address or 'the service'} "
                  f"(CONNECT answered {r.proxy_status})", f"{proxy_fields}, and {site.address_field}"))
    if r.dns is not None:
        field = proxy_fields if site.proxy else site.address_field
        text = _message(site, f"the address does not resolve ({r.dns})", field)
        if r.dns_temporary:  # the resolver did not answer: the name may well be right
            return ConnectionUnreachableError(site.conn_id, text)
        return ConnectionConfigError(site.conn_id, text)
    if r.tls is not None:
        if r.tls_verify:
            trust = (f"ca_bundle ({site.ca_bundle}: does it hold the CA that signed the server's certificate?)"
                     if site.ca_bundle else "ca_bundle (the server's certificate is signed by a CA this machine does "
                                             "not trust: name a PEM file of it)")
            if "hostname" in r.tls.lower():
                trust = f"{site.address_field} (the certificate is for another name), and ca_bundle"
            return ConnectionConfigError(site.conn_id, _message(
                site, f"the server's TLS certificate is not trusted (CERTIFICATE_VERIFY_FAILED: {r.tls})", trust))
        return ConnectionConfigError(site.conn_id, _message(
            site, f"the TLS handshake failed ({r.tls}): is TLS spoken at this address and port?",
            f"{site.address_field} and transport"))
    if r.refused or r.any_of("ClientConnectorError"):  # no connection was made: never the credential's fault,
        return _transient(r, site, raised)               # although the async client words it AuthenticationError
    if site.service == BLOB_STORAGE:
        return _classify_storage(r, site, raised)
    if r.any_of("WebSocketBadStatusException", "WSServerHandshakeError") or "Handshake status" in r.text:
        status = f" {r.status}" if r.status else ""
        return ConnectionConfigError(site.conn_id, _message(
            site, f"the address answered the WebSocket upgrade with HTTP{status}: it is not an Event Hubs endpoint, "
                  "or not at this path", f"{site.address_field} and transport"))
    if r.condition("ConsumerGroups/", "consumer group") and r.condition("not-found", "NotFound", "could not be found"):
        return _with_conn(UnknownConsumerGroupError, site, _message(
            site, f"consumer group {site.consumer_group!r} does not exist on the hub" if site.consumer_group
            else "the consumer group does not exist on the hub", "the consumer_group argument (or create the group)"))
    if r.condition("amqp:not-found", "NotFound", "could not be found") or r.status == 404:
        return _with_conn(UnknownEventHubError, site, _message(
            site, "the Event Hub does not exist on this namespace (the service answered not-found)", site.hub_field))
    if r.any_of("TokenExpired") or r.condition("ExpiredToken", "token is expired", "token has expired"):
        if r.any_of("AuthenticationError", "AuthenticationException", "ClientAuthenticationError", "TokenExpired"):
            return CredentialRefusedError(site.conn_id, _message(
                site, "the service refused an expired token", site.credential_fields))
    claim = _MISSING_CLAIM.search(r.text)
    if claim is not None:  # a valid credential without the right: a SAS policy without it, an identity without the role
        right = claim.group(1)
        role = "Azure Event Hubs Data Sender" if right == "Send" else "Azure Event Hubs Data Receiver"
        doing = "send to" if right == "Send" else "read from" if right == "Listen" else "manage"
        return CredentialRefusedError(site.conn_id, _message(
            site, f"the connection's credential may not {doing} the hub: the service requires the {right!r} claim "
                  f"({raised}, unauthorized-access)",
            f"the rights of the SAS policy the key belongs to ({right}), or the identity's role on the hub ({role})"))
    if (r.any_of("AuthenticationError", "AuthenticationException", "TokenAuthFailure", "ClientAuthenticationError")
            or r.condition("unauthorized-access", "UnauthorizedAccess", "Unauthorized")
            or r.status in (401, 403)):
        status = f", status {r.status}" if r.status in (401, 403) else ""
        return CredentialRefusedError(site.conn_id, _message(
            site, f"the service refused the connection's credential ({raised}{status})", site.credential_fields))
    return _transient(r, site, raised)


#: the service's words for a valid credential without the right: "Unauthorized access. 'Send' claim(s) are required"
_MISSING_CLAIM = re.compile(r"'(Send|Listen|Manage)' claim\(s\) are required")


def _classify_storage(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError:
    if r.any_of("ResourceNotFoundError") or r.status == 404:
        if site.container:
            what = f"the container {site.container!r} does not exist in the account (404)"
            fix = f"{site.container_field} (or create the container)"
        else:
            what, fix = "the storage account answered 404", site.address_field
        error_class = {"producer state": ProducerStateStoreError, "checkpoints": CheckpointStoreError}.get(site.role)
        if error_class is None:
            return ConnectionConfigError(site.conn_id, _message(site, what, fix))
        return _with_conn(error_class, site, _message(site, what, fix))
    if r.any_of("ClientAuthenticationError") or r.status in (401, 403):
        status = f", status {r.status}" if r.status in (401, 403) else ""
        return CredentialRefusedError(site.conn_id, _message(
            site, f"the storage account refused the connection's credential ({raised}{status})",
            site.credential_fields))
    return _transient(r, site, raised)


def _transient(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError:
    busy = ("server-busy", "ServerBusy", "quota-exceeded", "being throttled")  # the last: the service's description
    if r.condition(*busy) or r.status in (429, 503):
        return _with_conn(ServiceBusyError, site, _message(
            site, f"the service is busy (ServerBusy: it kept throttling after the client's own retries, {raised})",
            "the namespace's throughput units or processing units", retry=True))
    if r.refused:
        if site.proxy:
            return ConnectionUnreachableError(site.conn_id, _message(
                site, f"the HTTP proxy {site.proxy} refused the connection (is it running?)",
                "proxy_host and proxy_port", retry=True))
        return ConnectionUnreachableError(site.conn_id, _message(
            site, "the address refused the connection (nothing listens there, or it is down)",
            site.address_field, retry=True))
    if r.status is not None and r.status >= 500:
        what = f"the service answered {r.status}"
    elif r.status is not None and 400 <= r.status < 500:
        return ConnectionConfigError(site.conn_id, _message(
            site, f"the service refused the request ({raised}, status {r.status})",
            f"{site.address_field} and {site.credential_fields}"))
    elif r.any_of("OperationTimeoutError", "TimeoutError", "timeout", "ServiceResponseTimeoutError",
                  "ServerTimeoutError", "WebSocketTimeoutException"):
        what = f"the service did not answer in time ({raised})"
    elif r.any_of("ConnectionLostError", "ConnectionResetError", "BrokenPipeError", "ServiceResponseError",
                  "WebSocketConnectionClosedException", "ServerDisconnectedError"):
        what = f"the connection was lost ({raised})"
    else:
        what = f"the service could not be reached ({raised})"
    path = f"{site.address_field}, proxy_host and proxy_port" if site.proxy else site.address_field
    fields = f"{path}, and that {site.address or 'the address'} is reachable from here if it persists"
    return ConnectionUnreachableError(site.conn_id, _message(site, what, fields, retry=True))


def _with_conn(error_class: type[EventHubsProviderError], site: FailureSite, message: str) -> EventHubsProviderError:
    """An error of a class without a connection id, its message led by the connection's as ``ConnectionConfigError``'s."""
    error = error_class(f"Connection {site.conn_id!r}: {message}")
    error.conn_id = site.conn_id
    return error


def _message(site: FailureSite, what: str, fields: str, *, retry: bool = False) -> str:
    done = f" {site.done}" if site.done else ""
    then = " A retry may succeed." if retry else ""
    lead = f"{site.doing} failed: " if site.doing else ""
    text = f"{lead}{site.describe()}: {what}.{done}{then} Check {fields}."
    return _scrub(text)


_SECRET_SHAPES = (
    re.compile(r"(SharedAccessKey|SharedAccessSignature|AccountKey|sig|password|token)=[^;&\s]+", re.I),
    re.compile(r"(://[^:/@\s]+):[^@\s]+@"),
)


def _scrub(text: str) -> str:
    """``text`` without anything shaped like a secret (a key in a connection string, a password in a URL)."""
    for shape in _SECRET_SHAPES:
        text = shape.sub(lambda m: m.group(0).split("=", 1)[0] + "=***" if "=" in m.group(0) else m.group(1) + ":***@",
                         text)
    return text


@contextmanager
def provider_errors(site: FailureSite) -> Iterator[None]:
    """Raise :func:`provider_error`'s error in place of a service failure, ``from`` it; anything else unchanged."""
    try:
        yield
    except Exception as exc:
        mapped = provider_error(exc, site)
        if mapped is None:
            raise
        raise mapped from exc


# --- the sites of the work in progress --------------------------------------------------------------------------

_SITES: ContextVar[list[FailureSite] | None] = ContextVar("airflow_provider_eh_failure_sites", default=None)


@contextmanager
def failure_scope(*sites: FailureSite) -> Iterator[list[FailureSite]]:
    """A scope whose failures happen at ``sites`` and at the sites :func:`note_site` adds while it is open.

    An Airflow task opens one around its work (``operators/task_errors.py``); the layers below it that know
    an endpoint but not the connection it came from (Spark's driver) find the connection with
    :func:`site_of`. Nested scopes see the sites of the scopes around them.
    """
    known = [*(_SITES.get() or ()), *sites]
    token = _SITES.set(known)
    try:
        yield known
    finally:
        _SITES.reset(token)


def note_site(site: FailureSite) -> None:
    """Add ``site`` to the open :func:`failure_scope` (nothing when none is open)."""
    sites = _SITES.get()
    if sites is not None and site not in sites:
        sites.append(site)


#: the connection id of a site no scope names (a Spark executor's): the driver puts the real one in
UNKNOWN_CONNECTION = "?"


def site_of(endpoint: EventHubsEndpoint, *, done: str = "") -> FailureSite:
    """The open scope's site of ``endpoint``'s hub; without one, a site whose connection id is
    :data:`UNKNOWN_CONNECTION`."""
    address = FailureSite.of_endpoint(UNKNOWN_CONNECTION, endpoint).address
    for site in reversed(_SITES.get() or []):
        if site.service == EVENT_HUBS and site.hub == endpoint.eventhub_name and site.address == address:
            return site.having_done(done) if done else site
    return FailureSite.of_endpoint(UNKNOWN_CONNECTION, endpoint, done=done)


def storage_failure(exc: BaseException, site: FailureSite) -> BaseException:
    """
    The error map's error for a failure of a checkpoint container at ``site``; ``exc`` when it maps to nothing.

    The checkpoint reader words a storage error as a ``CheckpointStoreError`` of its own, without the
    connection or the account's address: the storage error it was raised from is mapped instead. Any
    other error of the package (the hub's, mapped by its hook) is returned as it is.
    """
    cause = exc.__cause__ if isinstance(exc, CheckpointStoreError) else exc
    mapped = provider_error(cause, site) if cause is not None else None
    return exc if mapped is None else mapped
