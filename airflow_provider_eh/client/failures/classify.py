"""The map itself: the package's error for an SDK's raw error at a site.

The table of what maps to what is :mod:`~airflow_provider_eh.client.failures`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from airflow_provider_eh.client.failures.reading import _is_service_failure, _Reading
from airflow_provider_eh.client.failures.sites import (
    BLOB_STORAGE,
    EVENT_HUBS,
    SCHEMA_REGISTRY,
    UNKNOWN_CONNECTION,
    FailureSite,
)
from airflow_provider_eh.client.sdk_internals import ErrorKind, error_kinds
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


def provider_error(exc: BaseException, site: FailureSite) -> EventHubsProviderError | None:
    """The package's error for ``exc`` raised at ``site`` (see the module's table); ``None`` when ``exc`` is no
    service or network failure (bad input, a bug) or already the package's own. Raise it ``from exc``."""
    if isinstance(exc, EventHubsProviderError) or not _is_service_failure(exc):
        return None
    if ErrorKind.CLIENT_STATE in error_kinds(exc):
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
#: that the map reads: the SDKs' and the network's. A report crosses processes as text: its class's name is all
#: there is to read its type by.
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
    return _classify(_Reading.of_report(error_type, message), site, error_type)


#: a row of the map: the package's error for what a reading says at a site, or ``None`` (the next row reads it)
_Row = Callable[[_Reading, FailureSite, str], EventHubsProviderError | None]
_PROXY_FIELDS = "proxy_host and proxy_port"


def _classify(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError:
    """The first answer of the rows the network's failures share, then of the site's service's; else a transient
    failure."""
    for row in (*_NETWORK_ROWS, *_SERVICE_ROWS[site.service]):
        error = row(r, site, raised)
        if error is not None:
            return error
    return _transient(r, site, raised)


def _proxy(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    if r.proxy_status in (401, 407):
        return ProxyRefusedError(site.conn_id, _message(
            site, f"the HTTP proxy refused the connection's proxy credentials (CONNECT answered {r.proxy_status})",
            "proxy_username and proxy_password"))
    if r.proxy_status == 403:
        port = site.address.rpartition(":")[2] or "443"
        return ProxyRefusedError(site.conn_id, _message(
            site, f"the HTTP proxy does not allow CONNECT to {site.address or 'the service'} (CONNECT answered 403)",
            f"{_PROXY_FIELDS} (a proxy that tunnels to port {port}), and the proxy's rules for that host"))
    if r.proxy_status is not None:
        return ConnectionUnreachableError(site.conn_id, _message(
            site, f"the HTTP proxy could not open a tunnel to {site.address or 'the service'} "
                  f"(CONNECT answered {r.proxy_status})", f"{_PROXY_FIELDS}, and {site.address_field}"))
    return None


def _dns(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    if r.dns is None:
        return None
    text = _message(site, f"the address does not resolve ({r.dns})", _PROXY_FIELDS if site.proxy else site.address_field)
    if r.dns_temporary:  # the resolver did not answer: the name may well be right
        return ConnectionUnreachableError(site.conn_id, text)
    return ConnectionConfigError(site.conn_id, text)


def _tls(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    if r.tls is None:
        return None
    if not r.tls_verify:
        return ConnectionConfigError(site.conn_id, _message(
            site, f"the TLS handshake failed ({r.tls}): is TLS spoken at this address and port?",
            f"{site.address_field} and transport"))
    trust = (f"ca_bundle ({site.ca_bundle}: does it hold the CA that signed the server's certificate?)"
             if site.ca_bundle else "ca_bundle (the server's certificate is signed by a CA this machine does "
                                    "not trust: name a PEM file of it)")
    if "hostname" in r.tls.lower():
        trust = f"{site.address_field} (the certificate is for another name), and ca_bundle"
    return ConnectionConfigError(site.conn_id, _message(
        site, f"the server's TLS certificate is not trusted (CERTIFICATE_VERIFY_FAILED: {r.tls})", trust))


def _no_connection(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    """No connection was made: never the credential's fault, although the async client words it AuthenticationError."""
    return _transient(r, site, raised) if r.refused or r.has(ErrorKind.NO_CONNECTION) else None


def _handshake(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    if not (r.has(ErrorKind.HANDSHAKE) or "Handshake status" in r.text):  # text: websocket-client's own words
        return None
    status = f" {r.status}" if r.status else ""
    return ConnectionConfigError(site.conn_id, _message(
        site, f"the address answered the WebSocket upgrade with HTTP{status}: it is not an Event Hubs endpoint, "
              "or not at this path", f"{site.address_field} and transport"))


def _missing_entity(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    # text: the service names the missing entity in its description only
    not_found = r.condition("not-found", "NotFound", "could not be found")
    if r.condition("ConsumerGroups/", "consumer group") and not_found:
        return _with_conn(UnknownConsumerGroupError, site, _message(
            site, f"consumer group {site.consumer_group!r} does not exist on the hub" if site.consumer_group
            else "the consumer group does not exist on the hub", "the consumer_group argument (or create the group)"))
    if r.condition("amqp:not-found", "NotFound", "could not be found") or r.status == 404:
        return _with_conn(UnknownEventHubError, site, _message(
            site, "the Event Hub does not exist on this namespace (the service answered not-found)", site.hub_field))
    return None


def _expired_token(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    expired = r.has(ErrorKind.TOKEN_EXPIRED) or r.condition("ExpiredToken", "token is expired", "token has expired")
    if not (expired and r.has(ErrorKind.CREDENTIAL)):
        return None
    return CredentialRefusedError(site.conn_id, _message(site, "the service refused an expired token",
                                                         site.credential_fields))


#: the service's words for a valid credential without the right: "Unauthorized access. 'Send' claim(s) are required"
#: (text: the service says it in its description only)
_MISSING_CLAIM = re.compile(r"'(Send|Listen|Manage)' claim\(s\) are required")


def _missing_claim(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    """A valid credential without the right: a SAS policy without it, an identity without the role."""
    claim = _MISSING_CLAIM.search(r.text)
    if claim is None:
        return None
    right = claim.group(1)
    role = "Azure Event Hubs Data Sender" if right == "Send" else "Azure Event Hubs Data Receiver"
    doing = "send to" if right == "Send" else "read from" if right == "Listen" else "manage"
    return CredentialRefusedError(site.conn_id, _message(
        site, f"the connection's credential may not {doing} the hub: the service requires the {right!r} claim "
              f"({raised}, unauthorized-access)",
        f"the rights of the SAS policy the key belongs to ({right}), or the identity's role on the hub ({role})"))


def _refused_credential(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    if not (r.has(ErrorKind.CREDENTIAL) or r.condition("unauthorized-access", "UnauthorizedAccess", "Unauthorized")
            or r.status in (401, 403)):
        return None
    status = f", status {r.status}" if r.status in (401, 403) else ""
    return CredentialRefusedError(site.conn_id, _message(
        site, f"the service refused the connection's credential ({raised}{status})", site.credential_fields))


def _storage_not_found(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    if not (r.has(ErrorKind.NOT_FOUND) or r.status == 404):
        return None
    if site.container:
        what = f"the container {site.container!r} does not exist in the account (404)"
        fix = f"{site.container_field} (or create the container)"
    else:
        what, fix = "the storage account answered 404", site.address_field
    error_class = {"producer state": ProducerStateStoreError, "checkpoints": CheckpointStoreError}.get(site.role)
    if error_class is None:
        return ConnectionConfigError(site.conn_id, _message(site, what, fix))
    return _with_conn(error_class, site, _message(site, what, fix))


def _storage_credential(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    if not (r.has(ErrorKind.HTTP_CREDENTIAL) or r.status in (401, 403)):
        return None
    status = f", status {r.status}" if r.status in (401, 403) else ""
    return CredentialRefusedError(site.conn_id, _message(
        site, f"the storage account refused the connection's credential ({raised}{status})", site.credential_fields))


def _registry_credential(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    if not (r.has(ErrorKind.HTTP_CREDENTIAL) or r.status in (401, 403)):
        return None
    return CredentialRefusedError(site.conn_id, _registry_message(
        site, f"refused the credential ({r.said}); check {site.credential_fields}."))


def _registry_unreachable(r: _Reading, site: FailureSite, raised: str) -> EventHubsProviderError | None:
    return ConnectionUnreachableError(site.conn_id, _registry_message(
        site, f"did not answer ({raised}: {r.said}).", retry=True))


def _registry_message(site: FailureSite, what: str, *, retry: bool = False) -> str:
    """The registry's words, which repeat what it answered (scrubbed): ``the Schema Registry at <ns> <what>``."""
    done = f" {site.done}" if site.done else ""
    return _scrub(f"the Schema Registry at {site.address} {what}{done}{' A retry may succeed.' if retry else ''}")


#: what any service's failure is read for first: the path to it (proxy, name, TLS, a connection not made)
_NETWORK_ROWS: tuple[_Row, ...] = (_proxy, _dns, _tls, _no_connection)
#: then what each service says
_SERVICE_ROWS: dict[str, tuple[_Row, ...]] = {
    EVENT_HUBS: (_handshake, _missing_entity, _expired_token, _missing_claim, _refused_credential),
    BLOB_STORAGE: (_storage_not_found, _storage_credential),
    SCHEMA_REGISTRY: (_registry_credential, _registry_unreachable),
}


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
    elif r.has(ErrorKind.TIMEOUT):
        what = f"the service did not answer in time ({raised})"
    elif r.has(ErrorKind.LOST):
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


