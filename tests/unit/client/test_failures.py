"""The one error map (:mod:`airflow_provider_eh.client.failures`) on real exception objects of the SDKs.

Each error is built as the SDK builds it (the ``EventHubError`` with the AMQP error and the socket
error in its chain, azure-core's errors with their inner exception), with no network: the map must
class it (a configuration error is not retried, a transient one is) and name the connection, the
address or proxy, the field to check and what already happened, and never a secret.
"""

from __future__ import annotations

import socket
import ssl

import pytest
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError, ServiceRequestError
from azure.eventhub._pyamqp.error import (  # the SDK's own AMQP errors, as its transport raises them
    AMQPConnectionError,
    AMQPLinkError,
    ErrorCondition,
    TokenAuthFailure,
    TokenExpired,
)
from azure.eventhub.exceptions import (
    AuthenticationError,
    ConnectError,
    ConnectionLostError,
    EventDataError,
    EventHubError,
    OperationTimeoutError,
)

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.failures import BLOB_STORAGE, NOTHING_SENT, FailureSite, provider_error, provider_errors
from airflow_provider_eh.client.network import NetworkOptions
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

SAS_KEY = "c2VjcmV0LXNhcy1rZXktbmV2ZXItc2hvd24="
PROXY_PASSWORD = "pr0xy-s3cret-pass"
TOKEN = "SharedAccessSignature sr=sb%3A%2F%2Fns&sig=T0KEN-SIGNATURE-VALUE&se=1&skn=send"
SECRETS = (SAS_KEY, PROXY_PASSWORD, "T0KEN-SIGNATURE-VALUE")


def chained(outer: BaseException, *inner: BaseException) -> BaseException:
    """``outer`` raised from ``inner[0]``, itself raised from ``inner[1]``, ... as the SDK's ``raise ... from``."""
    for cause, effect in zip(reversed((outer, *inner[:-1])), reversed(inner)):
        cause.__cause__ = effect
    return outer


def sdk_error(amqp: Exception, cls: type[EventHubError] = ConnectError, *inner: BaseException) -> EventHubError:
    """The ``EventHubError`` the SDK builds from a pyamqp error (``_create_eventhub_exception``), chained to it."""
    return chained(cls(str(amqp), amqp), amqp, *inner)  # type: ignore[arg-type,return-value]


def endpoint(**network: object) -> EventHubsEndpoint:
    conn_str = f"Endpoint=sb://orders-ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={SAS_KEY}"
    return EventHubsEndpoint.from_connection_string(conn_str, "orders", network=NetworkOptions.from_fields(network))


PROXIED = endpoint(proxy_host="10.1.2.3", proxy_port=3128, proxy_username="svc", proxy_password=PROXY_PASSWORD)
SITE = FailureSite.of_endpoint("eh_orders", endpoint(), done=NOTHING_SENT)
PROXIED_SITE = FailureSite.of_endpoint("eh_orders", PROXIED, done=NOTHING_SENT)
BLOB_SITE = FailureSite.of_blob("wasb_state", "https://acct.blob.core.windows.net/?sv=1&sig=T0KEN-SIGNATURE-VALUE",
                                container="eh-state", container_field="state_container", role="producer state",
                                done=NOTHING_SENT)


def mapped(exc: BaseException, site: FailureSite = SITE) -> EventHubsProviderError:
    error = provider_error(exc, site)
    assert error is not None, f"{exc!r} was not mapped"
    text = str(error)
    assert f"Connection {site.conn_id!r}" in text and error.conn_id == site.conn_id, text
    for secret in SECRETS:
        assert secret not in text, text
    return error


def proxy_refusal(status: int) -> EventHubError:
    """What the sync SDK raises when the proxy answers CONNECT with ``status`` (websocket-client's exception)."""
    from websocket import WebSocketProxyException

    inner = WebSocketProxyException(f"failed CONNECT via proxy status: {status}")
    return chained(EventHubError(f"{inner}\n{inner}", inner), inner)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [401, 407])
def test_a_proxy_refusing_the_password_is_a_configuration_error_naming_proxy_and_field(status: int) -> None:
    error = mapped(proxy_refusal(status), PROXIED_SITE)
    assert isinstance(error, ProxyRefusedError) and not error.retryable
    text = str(error)
    assert "HTTP proxy 10.1.2.3:3128" in text and "proxy_password" in text and str(status) in text
    assert "orders-ns.servicebus.windows.net:443" in text and "Nothing was sent." in text
    assert text.count(f"CONNECT answered {status}") == 1


def test_a_proxy_refusing_the_port_names_the_port_and_is_not_retried() -> None:
    error = mapped(proxy_refusal(403), PROXIED_SITE)
    assert isinstance(error, ProxyRefusedError) and not error.retryable
    assert "port 443" in str(error) and "proxy_host" in str(error)


def test_an_async_proxy_refusal_is_read_from_aiohttp_status() -> None:
    from aiohttp import ClientHttpProxyError, RequestInfo
    from multidict import CIMultiDict, CIMultiDictProxy
    from yarl import URL

    info = RequestInfo(URL("http://10.1.2.3:3128"), "CONNECT", CIMultiDictProxy(CIMultiDict()))
    inner = ClientHttpProxyError(info, (), status=407, message="Proxy Authentication Required")
    error = mapped(chained(ConnectError(str(inner), inner), inner), PROXIED_SITE)  # type: ignore[arg-type]
    assert isinstance(error, ProxyRefusedError) and "proxy_password" in str(error)


def test_a_proxy_that_cannot_reach_the_service_is_retried() -> None:
    error = mapped(proxy_refusal(502), PROXIED_SITE)
    assert type(error) is ConnectionUnreachableError and error.retryable and "502" in str(error)


def test_a_proxy_that_is_down_is_retried_and_named() -> None:
    amqp = AMQPConnectionError(ErrorCondition.SocketError,
                               description="Failed to initiate the connection due to exception: [Errno 111] Connection refused")
    error = mapped(sdk_error(amqp, ConnectError, ConnectionRefusedError(111, "Connection refused")), PROXIED_SITE)
    assert type(error) is ConnectionUnreachableError and error.retryable
    assert "HTTP proxy 10.1.2.3:3128 refused the connection" in str(error) and "proxy_port" in str(error)


def test_a_refused_proxy_the_async_client_words_as_an_authentication_error_is_retried() -> None:
    """aiohttp's connector error at a custom endpoint address reaches the SDK as ``AuthenticationException``."""
    from aiohttp import ClientProxyConnectionError
    from aiohttp.client_reqrep import ConnectionKey
    from azure.eventhub._pyamqp.error import AuthenticationException

    key = ConnectionKey("10.1.2.3", 3128, False, True, None, None, None)
    connector = ClientProxyConnectionError(key, ConnectionRefusedError(111, "Connect call failed ('10.1.2.3', 3128)"))
    amqp = AuthenticationException(ErrorCondition.ClientError, description=f"Failed to authenticate ... {connector}",
                                   error=connector)
    error = mapped(sdk_error(amqp, AuthenticationError, connector), PROXIED_SITE)
    assert type(error) is ConnectionUnreachableError and error.retryable and "HTTP proxy 10.1.2.3:3128 refused" in str(error)


def test_an_endpoint_that_refuses_is_retried_and_names_its_address_field() -> None:
    site = FailureSite.of_endpoint("eh_orders", endpoint(custom_endpoint_address="sb://gw.example.com:5671"))
    amqp = AMQPConnectionError(ErrorCondition.SocketError, description="[Errno 111] Connection refused")
    error = mapped(sdk_error(amqp, ConnectError, ConnectionRefusedError(111, "Connection refused")), site)
    assert type(error) is ConnectionUnreachableError and error.retryable
    assert "gw.example.com:5671" in str(error) and "custom_endpoint_address" in str(error)


def test_a_name_that_does_not_resolve_is_a_configuration_error() -> None:
    site = FailureSite.of_endpoint("eh_orders", endpoint(custom_endpoint_address="sb://no-such-gw.example.com"))
    gai = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    amqp = AMQPConnectionError(ErrorCondition.SocketError, description=f"Failed to initiate the connection due to exception: {gai}")
    error = mapped(sdk_error(amqp, ConnectError, gai), site)
    assert type(error) is ConnectionConfigError and not error.retryable
    assert "does not resolve" in str(error) and "custom_endpoint_address" in str(error) and "no-such-gw.example.com:5671" in str(error)


def test_a_name_the_sync_websocket_client_cannot_resolve_is_not_taken_for_a_refused_credential() -> None:
    """websocket-client's address error reaches the SDK as an ``AuthenticationException``."""
    from azure.eventhub._pyamqp.error import AuthenticationException
    from websocket import WebSocketAddressException

    gai = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    address = chained(WebSocketAddressException(str(gai)), gai)
    amqp = AuthenticationException(ErrorCondition.ClientError, description=f"Failed to authenticate ... {address}", error=address)
    error = mapped(sdk_error(amqp, AuthenticationError, address, gai))
    assert type(error) is ConnectionConfigError and "does not resolve" in str(error)
    assert "the Endpoint of connection_string" in str(error)


def test_a_resolver_that_does_not_answer_is_retried() -> None:
    gai = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    amqp = AMQPConnectionError(ErrorCondition.SocketError, description=str(gai))
    assert mapped(sdk_error(amqp, ConnectError, gai)).retryable


def test_a_certificate_nobody_here_trusts_names_ca_bundle() -> None:
    cert = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                           "unable to get local issuer certificate (_ssl.c:1000)")
    cert.verify_message = "unable to get local issuer certificate"
    site = FailureSite.of_endpoint("eh_orders", endpoint(transport="websocket", ca_bundle="/etc/ca/company.pem"))
    error = mapped(chained(ConnectError(f"Websocket failed to establish connection: {cert!r}"), ConnectionError("ws"), cert), site)
    assert type(error) is ConnectionConfigError and not error.retryable
    assert "ca_bundle (/etc/ca/company.pem" in str(error) and "unable to get local issuer certificate" in str(error)


def test_tls_spoken_to_a_plain_port_names_address_and_transport() -> None:
    wrong = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1000)")
    error = mapped(sdk_error(AMQPConnectionError(ErrorCondition.SocketError, description=str(wrong)), ConnectError, wrong))
    assert type(error) is ConnectionConfigError and "transport" in str(error)


def test_an_address_that_is_no_event_hubs_endpoint_is_not_taken_for_a_missing_hub() -> None:
    """A web server at the custom endpoint address answers the WebSocket upgrade with 404."""
    from websocket import WebSocketBadStatusException

    upgrade = WebSocketBadStatusException("Handshake status %d %s -+-+- %s -+-+- %s", 404, "Not Found", {}, b"")
    site = FailureSite.of_endpoint("eh_orders", endpoint(transport="websocket", custom_endpoint_address="sb://web.corp"))
    error = mapped(chained(ConnectError(f"Websocket failed to establish connection: {upgrade!r}"), upgrade), site)
    assert type(error) is ConnectionConfigError and "custom_endpoint_address" in str(error) and "404" in str(error)


def test_a_missing_hub_says_the_hub_is_not_there() -> None:
    amqp = AMQPConnectionError(ErrorCondition.NotFound, description=(
        'Management connection failed. Status code: 404, Description: "The messaging entity \'orders\' could not be found."'))
    error = mapped(sdk_error(amqp))
    assert isinstance(error, UnknownEventHubError) and not error.retryable
    assert "Event Hub 'orders'" in str(error) and "does not exist" in str(error) and "EntityPath" in str(error)


def test_a_missing_consumer_group_is_named() -> None:
    site = FailureSite.of_endpoint("eh_orders", endpoint(), consumer_group="analytics")
    amqp = AMQPLinkError(b"amqp:not-found",
                         description="The messaging entity 'orders/ConsumerGroups/analytics' could not be found. (404)")
    error = mapped(sdk_error(amqp), site)
    assert isinstance(error, UnknownConsumerGroupError) and not error.retryable
    assert "consumer group 'analytics' does not exist" in str(error)


def test_a_refused_or_expired_credential_names_the_key_fields_and_never_the_token() -> None:
    refused = mapped(sdk_error(TokenAuthFailure(401, f"InvalidSignature: {TOKEN}".encode()), AuthenticationError))
    assert isinstance(refused, CredentialRefusedError) and not refused.retryable
    assert "SharedAccessKeyName and SharedAccessKey of connection_string" in str(refused)
    expired = mapped(sdk_error(TokenExpired(ErrorCondition.UnauthorizedAccess, description=f"token {TOKEN} expired"),
                               AuthenticationError))
    assert isinstance(expired, CredentialRefusedError) and "expired" in str(expired)


def test_an_identity_without_the_role_names_the_role() -> None:
    identity = EventHubsEndpoint("orders-ns.servicebus.windows.net", "orders")
    amqp = AMQPLinkError(ErrorCondition.UnauthorizedAccess, description="Unauthorized access. 'Send' claim(s) are required")
    error = mapped(sdk_error(amqp, ConnectError), FailureSite.of_endpoint("eh_orders", identity))
    assert isinstance(error, CredentialRefusedError) and "Data Sender" in str(error)


def test_a_sas_key_without_the_right_names_the_right_and_both_ways_to_grant_it() -> None:
    amqp = AMQPLinkError(ErrorCondition.UnauthorizedAccess, description=(
        "Unauthorized access. 'Listen' claim(s) are required to perform this operation. Resource: 'sb://ns/orders/"
        "consumergroups/$default/partitions/0'."))
    error = mapped(sdk_error(amqp, ConnectionLostError))
    assert isinstance(error, CredentialRefusedError) and not error.retryable
    text = str(error)
    assert "may not read from the hub" in text and "'Listen' claim" in text, text
    assert "rights of the SAS policy" in text and "Azure Event Hubs Data Receiver" in text, text


def test_a_setting_to_fix_is_not_retried_in_the_task_and_a_lost_connection_is() -> None:
    from airflow_provider_eh.client.failures import retry_can_help
    from airflow_provider_eh.publishing.driver import is_transient

    deleted = sdk_error(AMQPLinkError(b"amqp:not-found", description="The messaging entity 'sb://ns/orders' could not be "
                                                                     "found."), ConnectionLostError)
    no_right = sdk_error(AMQPLinkError(ErrorCondition.UnauthorizedAccess, description="Unauthorized access. 'Send' "
                                       "claim(s) are required to perform this operation."), ConnectionLostError)
    lost = ConnectionLostError("connection lost")
    assert retry_can_help(deleted) is False and not is_transient(deleted)
    assert retry_can_help(no_right) is False and not is_transient(no_right)
    assert retry_can_help(lost) is True and is_transient(lost)
    assert retry_can_help(ValueError("a bad row")) is None


def test_throttling_that_outlasts_the_sdk_is_retried() -> None:
    amqp = AMQPLinkError(b"com.microsoft:server-busy", description="The request was terminated because the namespace is busy")
    error = mapped(sdk_error(amqp))
    assert isinstance(error, ServiceBusyError) and error.retryable and "busy" in str(error)
    reported = "The request was terminated because the entity is being throttled. Error code : 50002."
    from airflow_provider_eh.client.failures import provider_error_of_report

    assert isinstance(provider_error_of_report("ConnectError", reported, SITE), ServiceBusyError)  # an executor's report


def test_server_busy_on_a_send_is_retried_and_an_event_too_large_is_left_to_the_input() -> None:
    from azure.eventhub._pyamqp.error import MessageException
    from azure.eventhub.exceptions import EventDataSendError

    busy = MessageException(b"com.microsoft:server-busy", description="The request was terminated because the entity "
                                                                       "is being throttled.")
    assert isinstance(mapped(sdk_error(busy, EventDataSendError)), ServiceBusyError)
    large = MessageException(b"amqp:link:message-size-exceeded", description="The received message exceeds the limit.")
    assert provider_error(sdk_error(large, EventDataSendError), SITE) is None


@pytest.mark.parametrize("raised", [
    OperationTimeoutError("Send operation timed out"),
    ConnectionLostError("connection lost"),
    EventHubError("something else the SDK raised"),
    TimeoutError("timed out"),
    ConnectionResetError(104, "Connection reset by peer"),
])
def test_lost_connections_timeouts_and_unknown_sdk_errors_are_retried(raised: BaseException) -> None:
    error = mapped(raised)
    assert type(error) is ConnectionUnreachableError and error.retryable and "A retry may succeed." in str(error)


def test_what_already_happened_is_said() -> None:
    site = SITE.having_done("Partition 2 committed, 3 pending: a retry resumes.")
    assert "Partition 2 committed, 3 pending: a retry resumes." in str(mapped(ConnectionLostError("lost"), site))


def test_a_missing_state_container_is_the_stores_error_naming_the_argument() -> None:
    error = mapped(ResourceNotFoundError(message="The specified container does not exist."), BLOB_SITE)
    assert isinstance(error, ProducerStateStoreError) and not error.retryable
    assert "container 'eh-state'" in str(error) and "state_container" in str(error) and "acct.blob.core.windows.net:443" in str(error)
    checkpoints = FailureSite.of_blob("wasb", "http://127.0.0.1:10000/devstoreaccount1", container="ckpt", role="checkpoints")
    assert isinstance(mapped(ResourceNotFoundError(message="gone"), checkpoints), CheckpointStoreError)


def test_a_storage_account_that_answers_403_refuses_the_credential() -> None:
    forbidden = HttpResponseError(message="AuthorizationPermissionMismatch sig=T0KEN-SIGNATURE-VALUE")
    forbidden.status_code = 403
    assert isinstance(mapped(forbidden, BLOB_SITE), CredentialRefusedError)
    assert isinstance(mapped(ClientAuthenticationError(message="Server failed to authenticate"), BLOB_SITE),
                      CredentialRefusedError)


@pytest.mark.parametrize(("status", "kind"), [(500, ConnectionUnreachableError), (503, ServiceBusyError)])
def test_storage_5xx_is_retried(status: int, kind: type) -> None:
    failed = HttpResponseError(message="Server Error")
    failed.status_code = status
    error = mapped(failed, BLOB_SITE)
    assert type(error) is kind and error.retryable


def test_storage_behind_a_proxy_that_refuses_the_password() -> None:
    import requests
    import urllib3

    tunnel = OSError("Tunnel connection failed: 407 Proxy Authentication Required")
    proxy = urllib3.exceptions.ProxyError("Unable to connect to proxy", tunnel)
    request = ServiceRequestError(message=str(requests.exceptions.ProxyError(proxy)), error=requests.exceptions.ProxyError(proxy))
    site = FailureSite.of_blob("wasb_state", f"https://svc:{PROXY_PASSWORD}@acct.blob.core.windows.net",
                               proxy="10.1.2.3:3128", container="eh-state")
    error = mapped(request, site)
    assert isinstance(error, ProxyRefusedError) and "proxy_password" in str(error) and "10.1.2.3:3128" in str(error)


def test_storage_that_does_not_resolve() -> None:
    gai = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    error = mapped(ServiceRequestError(message=f"<urllib3 connection>: Failed to resolve ({gai})", error=gai), BLOB_SITE)
    assert type(error) is ConnectionConfigError and BLOB_STORAGE in str(error)


def test_the_proxy_password_and_key_of_the_context_never_appear() -> None:
    """The site keeps no credential, and no text of the SDK's error is repeated."""
    assert PROXY_PASSWORD not in repr(PROXIED_SITE) and SAS_KEY not in repr(PROXIED_SITE)
    text = f"failed CONNECT via proxy status: 407 http://svc:{PROXY_PASSWORD}@10.1.2.3:3128 {TOKEN} {SAS_KEY}"
    for exc in (EventHubError(text), ConnectError(text), AuthenticationError(text)):
        mapped(exc, PROXIED_SITE)  # checks every secret is absent


@pytest.mark.parametrize("exc", [ValueError("bad argument"), KeyError("bug"), EventDataError("too large"),
                                 FileNotFoundError(2, "No such file", "/etc/ca.pem"),
                                 UnknownEventHubError("already ours")])
def test_what_is_no_service_failure_is_left_alone(exc: BaseException) -> None:
    assert provider_error(exc, SITE) is None
    with pytest.raises(type(exc)) as raised, provider_errors(SITE):
        raise exc
    assert raised.value is exc


def test_the_context_manager_raises_the_mapped_error_from_the_sdks() -> None:
    original = proxy_refusal(407)
    with pytest.raises(ProxyRefusedError) as raised, provider_errors(PROXIED_SITE):
        raise original
    assert raised.value.__cause__ is original


REGISTRY = FailureSite.of_registry("reg", "ns.servicebus.windows.net", ca_bundle="/etc/ca/company.pem",
                                   done="Nothing of the batch was committed.")


def test_the_schema_registrys_errors_go_through_the_same_map() -> None:
    refused = provider_error(ClientAuthenticationError(message="401 Unauthorized"), REGISTRY)
    assert isinstance(refused, CredentialRefusedError) and not refused.retryable
    assert str(refused) == ("Connection 'reg': the Schema Registry at ns.servicebus.windows.net refused the credential "
                            "(401 Unauthorized); check the connection's key, or give its identity the Schema Registry "
                            "Reader role. Nothing of the batch was committed.")
    down = provider_error(ServiceRequestError("no answer"), REGISTRY)
    assert type(down) is ConnectionUnreachableError and down.retryable
    assert "the Schema Registry at ns.servicebus.windows.net did not answer (ServiceRequestError: no answer)" in str(down)


def test_a_registry_behind_an_untrusted_certificate_is_named_as_such_and_not_retried() -> None:
    tls = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    tls.verify_message = "unable to get local issuer certificate"
    mapped = provider_error(ServiceRequestError("SSL failed", error=tls), REGISTRY)
    assert type(mapped) is ConnectionConfigError and not mapped.retryable
    assert str(mapped).startswith("Connection 'reg': Schema Registry at ns.servicebus.windows.net: the server's TLS "
                                  "certificate is not trusted"), str(mapped)
    assert "ca_bundle (/etc/ca/company.pem" in str(mapped)


def test_the_scope_of_old_is_deprecated_maps_at_the_sites_it_is_given_and_finds_nothing_at_a_distance() -> None:
    from airflow_provider_eh.client.failures import failure_scope, note_site, site_of

    site = FailureSite.of_endpoint("eh_orders", endpoint())
    with pytest.warns(DeprecationWarning, match="failure_scope is deprecated"), pytest.raises(
            ConnectionUnreachableError, match="^Connection 'eh_orders'"), failure_scope(site):
        raise ConnectionLostError("lost")
    with pytest.warns(DeprecationWarning, match="note_site is deprecated"):
        note_site(site)
    assert site_of(endpoint()).conn_id == "?"
