"""The network path of a connection: fields checked with errors that name them, one set of SDK arguments."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from azure.eventhub import TransportType

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.network import NetworkOptions
from airflow_provider_eh.errors import ConnectionConfigError
from airflow_provider_eh.hooks.event_hubs import EventHubHook

CONN_STR = "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=a2V5;EntityPath=orders"
PROXY_SECRET = "pr0xy-s3cret-value"


def test_no_fields_mean_the_sdks_defaults() -> None:
    options = NetworkOptions.from_fields({})
    assert options.is_default and options.client_kwargs() == {}
    assert options.describe() == "AMQP over TCP (5671)"


@pytest.mark.parametrize("spelling", ["websocket", "WebSockets", "amqp-over-websocket", "AmqpOverWebsocket", "ws"])
def test_websocket_transport_in_any_usual_spelling(spelling: str) -> None:
    assert NetworkOptions.from_fields({"transport": spelling}).client_kwargs() == {
        "transport_type": TransportType.AmqpOverWebsocket}


def test_a_proxy_means_websockets_and_is_passed_with_its_credentials(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    options = NetworkOptions.from_fields({
        "transport": "amqp", "proxy_host": "proxy.corp", "proxy_port": "3128", "proxy_username": "svc",
        "proxy_password": PROXY_SECRET, "custom_endpoint_address": "gateway.corp:8443", "ca_bundle": str(ca),
    })
    assert options.transport == "websocket"  # the SDK tunnels through a proxy only over WebSockets
    assert options.client_kwargs() == {
        "transport_type": TransportType.AmqpOverWebsocket,
        "http_proxy": {"proxy_hostname": "proxy.corp", "proxy_port": 3128, "username": "svc", "password": PROXY_SECRET},
        "custom_endpoint_address": "sb://gateway.corp:8443",
        "connection_verify": str(ca),
    }
    assert PROXY_SECRET not in repr(options) and PROXY_SECRET not in options.describe()
    assert "through HTTP proxy proxy.corp:3128 as svc" in options.describe()


def test_the_async_clients_get_the_proxy_host_with_a_scheme() -> None:
    """Their WebSocket transport hands ``host:port`` to aiohttp, which refuses it without one."""
    options = NetworkOptions.from_fields({"proxy_host": "proxy.corp", "proxy_port": "3128"})
    assert options.client_kwargs(aio=True)["http_proxy"]["proxy_hostname"] == "http://proxy.corp"
    assert options.client_kwargs()["http_proxy"]["proxy_hostname"] == "proxy.corp"


def test_a_proxy_given_as_a_url_takes_its_port_from_it() -> None:
    options = NetworkOptions.from_fields({"proxy_host": "http://proxy.corp:8080"})
    assert (options.proxy_host, options.proxy_port) == ("proxy.corp", 8080)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"transport": "udp"}, "field 'transport' is 'udp'; use 'amqp'"),
        ({"proxy_host": "proxy.corp"}, "field 'proxy_port' is empty"),
        ({"proxy_port": "3128"}, "field 'proxy_host' is empty"),
        ({"proxy_host": "p", "proxy_port": "70000"}, "field 'proxy_port' is '70000'"),
        ({"proxy_host": "p", "proxy_port": "http"}, "field 'proxy_port' is 'http'"),
        ({"proxy_username": "svc"}, "'proxy_host' is empty"),
        ({"proxy_host": "p", "proxy_port": "1", "proxy_password": "x"}, "'proxy_username' is empty"),
        ({"custom_endpoint_address": "ftp://gw"}, "field 'custom_endpoint_address' is 'ftp://gw'"),
        ({"custom_endpoint_address": "sb://gw:port"}, "its port is not a number"),
    ],
)
def test_bad_fields_are_named_with_what_they_accept(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        NetworkOptions.from_fields(fields)


def test_a_ca_bundle_missing_where_a_client_opens_is_named() -> None:
    options = NetworkOptions.from_fields({"ca_bundle": "/nonexistent/ca.pem"})
    with pytest.raises(ValueError, match="field 'ca_bundle' names '/nonexistent/ca.pem', which is not a file"):
        options.client_kwargs()


def test_every_client_of_an_endpoint_gets_the_network_path_and_the_callers_arguments_win() -> None:
    network = NetworkOptions.from_fields({"transport": "websocket", "custom_endpoint_address": "sb://127.0.0.1:9"})
    endpoint = EventHubsEndpoint.from_connection_string(CONN_STR, network=network)
    assert endpoint.client_kwargs({"retry_total": 0}) == {
        "transport_type": TransportType.AmqpOverWebsocket, "custom_endpoint_address": "sb://127.0.0.1:9", "retry_total": 0}
    assert endpoint.client_kwargs({"transport_type": TransportType.Amqp})["transport_type"] == TransportType.Amqp
    # with_hub (other hubs of the namespace) and pickling (Spark executors) keep the path
    assert endpoint.with_hub("other").network == network
    assert pickle.loads(pickle.dumps(endpoint)).network == network
    for client in (endpoint.producer(), endpoint.consumer(), endpoint.async_producer(), endpoint.async_consumer()):
        config = client._config  # noqa: SLF001 - what the SDK will connect with
        assert config.transport_type == TransportType.AmqpOverWebsocket
        assert config.custom_endpoint_address.startswith("sb://127.0.0.1:9")


def test_connection_fields_reach_the_endpoint_and_bad_ones_name_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.common.compat.sdk import redact

    fields = {"connection_string": CONN_STR, "proxy_host": "proxy.corp", "proxy_port": 3128, "proxy_username": "svc",
              "proxy_password": PROXY_SECRET}
    monkeypatch.setenv("AIRFLOW_CONN_EH_NET", json.dumps({"conn_type": "azure_event_hubs", "extra": fields}))
    endpoint = EventHubHook("eh_net").get_endpoint()
    assert endpoint.network.proxy_port == 3128 and endpoint.network.transport == "websocket"
    assert PROXY_SECRET not in repr(endpoint)
    assert PROXY_SECRET not in str(redact(f"password={PROXY_SECRET}"))  # registered with the masker

    monkeypatch.setenv("AIRFLOW_CONN_EH_NET", json.dumps({"conn_type": "azure_event_hubs",
                                                          "extra": {"connection_string": CONN_STR, "transport": "udp"}}))
    with pytest.raises(ConnectionConfigError, match="eh_net.*field 'transport' is 'udp'"):
        EventHubHook("eh_net").get_endpoint()


def test_the_connection_form_offers_every_network_field() -> None:
    from airflow_provider_eh.client.network import FIELDS
    from airflow_provider_eh.get_provider_info import connection_type

    form = connection_type("azure_event_hubs")["conn-fields"]
    assert set(FIELDS) <= set(form)
    assert form["proxy_password"]["schema"]["format"] == "password"
