"""The hooks' failure sites: what the error map is told about a connection, and never its credentials."""

from __future__ import annotations

import json

import pytest
from azure.core.exceptions import ClientAuthenticationError, ResourceNotFoundError

from airflow_provider_eh.errors import CredentialRefusedError, ProducerStateStoreError
from airflow_provider_eh.hooks.blob import BlobStorageHook
from airflow_provider_eh.hooks.event_hubs import EventHubHook

ACCOUNT_KEY = "QWNjb3VudEtleS1ub3QtdG8tYmUtc2hvd24tYW55d2hlcmU="
PROXY_PASSWORD = "pr0xy-pass-not-to-show"


def connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_a_blob_site_names_account_proxy_container_and_credential_fields_but_no_secret(
        monkeypatch: pytest.MonkeyPatch) -> None:
    connection(monkeypatch, "wasb_site", conn_type="wasb", extra={
        "connection_string": f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={ACCOUNT_KEY};"
                             "EndpointSuffix=core.windows.net",
        "proxies": {"https": f"http://svc:{PROXY_PASSWORD}@10.1.2.3:3128"}, "ca_bundle": "/etc/ssl/corp.pem"})
    hook = BlobStorageHook("wasb_site")
    site = hook.failure_site("eh-state", container_field="state_container", role="producer state")
    assert (site.conn_id, site.address, site.proxy, site.ca_bundle) == (
        "wasb_site", "acct.blob.core.windows.net:443", "10.1.2.3:3128", "/etc/ssl/corp.pem")
    assert PROXY_PASSWORD not in repr(site) and ACCOUNT_KEY not in repr(site)
    missing = hook.failure(ResourceNotFoundError(message="The specified container does not exist."), "reading", "eh-state")
    assert "container 'eh-state'" in str(missing) and "does not exist" in str(missing)
    refused = hook.failure(ClientAuthenticationError(message=f"signature did not match {ACCOUNT_KEY}"), "reading")
    assert isinstance(refused, CredentialRefusedError) and "AccountKey or SharedAccessSignature of connection_string" in str(refused)
    assert ACCOUNT_KEY not in str(refused) and PROXY_PASSWORD not in str(refused)
    state = hook.failure_site("eh-state", container_field="state_container", role="producer state")
    from airflow_provider_eh.client.failures import provider_error

    assert isinstance(provider_error(ResourceNotFoundError(message="gone"), state), ProducerStateStoreError)


def test_an_event_hubs_site_names_the_custom_address_and_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    connection(monkeypatch, "eh_site", conn_type="azure_event_hubs", extra={
        "connection_string": "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=k3y-k3y-k3y",
        "eventhub_name": "orders", "proxy_host": "proxy.corp", "proxy_port": "3128", "proxy_username": "svc",
        "proxy_password": PROXY_PASSWORD, "custom_endpoint_address": "sb://gw.corp:8443"})
    hook = EventHubHook("eh_site")
    site = hook.failure_site(hook.get_endpoint(), consumer_group="analytics")
    assert (site.address, site.proxy, site.address_field, site.hub) == ("gw.corp:8443", "proxy.corp:3128",
                                                                        "custom_endpoint_address", "orders")
    assert site.describe() == ("Event Hub 'orders' (consumer group 'analytics') at gw.corp:8443 "
                               "through HTTP proxy proxy.corp:3128")
    assert PROXY_PASSWORD not in repr(site) and "k3y-k3y-k3y" not in repr(site)


def test_a_pooled_blob_client_keeps_the_connections_ca_bundle_and_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pool_size`` (the view's) swaps the HTTP transport: the CA bundle and the proxy still apply to it."""
    connection(monkeypatch, "wasb_pool", conn_type="wasb", extra={
        "connection_string": f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={ACCOUNT_KEY};"
                             "EndpointSuffix=core.windows.net",
        "proxies": {"https": "http://10.1.2.3:3128"}, "ca_bundle": "/etc/ssl/corp.pem"})
    client = BlobStorageHook("wasb_pool", pool_size=32).service_client
    transport = client._pipeline._transport  # the transport the pipeline sends with
    adapter = transport.session.get_adapter("https://acct.blob.core.windows.net/")
    assert adapter._pool_maxsize == 32 and transport.connection_config.verify == "/etc/ssl/corp.pem"
    assert client._config.proxy_policy.proxies == {"https": "http://10.1.2.3:3128"}  # applied to each request


def test_the_endpoint_a_hook_reads_names_its_connection_wherever_it_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read-back, Spark's driver and the engine know only the endpoint: it carries the connection id."""
    from azure.eventhub.exceptions import ConnectionLostError

    from airflow_provider_eh.client.failures import provider_error, site_of

    connection(monkeypatch, "eh_named", conn_type="azure_event_hubs", extra={
        "connection_string": "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=k3y-k3y-k3y",
        "eventhub_name": "orders"})
    endpoint = EventHubHook("eh_named").get_endpoint()
    assert endpoint.conn_id == "eh_named" and endpoint.with_hub("other").conn_id == "eh_named"
    mapped = provider_error(ConnectionLostError("lost"), site_of(endpoint))
    assert mapped is not None and str(mapped).startswith("Connection 'eh_named': Event Hub 'orders' at ns.servicebus")


def test_the_producer_state_hook_gives_its_containers_site_once_it_made_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_eh.hooks.producer_state import ProducerStateHook

    connection(monkeypatch, "wasb_state", conn_type="wasb", extra={
        "connection_string": f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={ACCOUNT_KEY};"
                             "EndpointSuffix=core.windows.net"})
    hook = ProducerStateHook("blob", wasb_conn_id="wasb_state", container="eh-state")
    assert hook.failure_site is None
    hook.get_store(create_container=False)
    site = hook.failure_site
    assert site is not None and (site.conn_id, site.container, site.role) == ("wasb_state", "eh-state", "producer state")
