"""The error map on the synchronous paths, each fault made for real: issue #41's own cases and their family.

The publish operator (``EventHubPublishOperator.execute``, as a task runs it) and the Event Hubs
view's partition reader meet a real HTTP proxy (``proxy.py``) with the wrong password, a proxy that
is down, a gateway address that does not resolve, a TLS gateway whose CA the connection does not
name, and a hub that does not exist. Each error must name the connection, the address or proxy and
the field to check, be classed (a configuration error fails the task without retries:
``AirflowFailException``; a transient one keeps its retryable type), never carry the password, come
within seconds, and the hub read back must hold nothing of the batch.

The services are the session's endpoint and Azurite, one proxy and one TLS gateway for the module.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.readback import read_hub
from airflow_provider_eh.errors import ConnectionUnreachableError, ViewReadError
from eventhubs_local import EmulatorProcess
from eventhubs_local.ports import free_port
from tests.conftest import connection_env, unique_name
from tests.support.proxy import HttpProxy
from tests.support.tls import Certificates, make_certificates

PROXY_USER, PROXY_PASSWORD, WRONG_PASSWORD = "svc", "the-right-pr0xy-pass", "a-wrong-pr0xy-pass"


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpProxy]:
    with HttpProxy(tmp_path_factory.mktemp("proxy"), PROXY_USER, PROXY_PASSWORD) as running:
        yield running


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmulatorProcess, Certificates, Certificates]]:
    """The endpoint behind TLS with a private CA's certificate, and another CA (a bundle that does not match)."""
    base = tmp_path_factory.mktemp("gateway")
    signed, other = make_certificates(base / "signed"), make_certificates(base / "other")
    with EmulatorProcess(base / "endpoint", tls=(signed.cert, signed.key)) as process:
        yield process, signed, other


@pytest.fixture(scope="module")
def state(azurite: Any) -> Iterator[str]:
    """The blob connection ``wasb_failures`` and a state container, for the module."""
    container = unique_name("c")
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(container)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(*connection_env("wasb_failures", "wasb", extra={"connection_string": azurite.connection_string}))
        yield container


def publish(conn_id: str, container: str) -> Any:
    """``EventHubPublishOperator.execute`` of 40 events, as the 2026-05-01 interval's first try runs it."""
    from airflow_provider_eh.operators.publish import EventHubPublishOperator

    operator = EventHubPublishOperator(
        task_id="publish", event_hubs_conn_id=conn_id, wasb_conn_id="wasb_failures", state_container=container,
        producer_group=unique_name("g"), events=[{"body": {"i": i}, "partition_id": str(i % 4)} for i in range(40)])
    start = datetime(2026, 5, 1, tzinfo=timezone.utc)
    context = {"ti": SimpleNamespace(try_number=1, map_index=-1), "data_interval_start": start,
               "data_interval_end": start, "logical_date": start, "run_id": "scheduled__2026-05-01"}
    return operator.execute(context)  # type: ignore[arg-type]


def proxied(event_hubs: Any, hub: str, proxy_port: int, password: str) -> dict[str, Any]:
    return {"connection_string": event_hubs.connection_string(hub), "proxy_host": "127.0.0.1", "proxy_port": proxy_port,
            "proxy_username": PROXY_USER, "proxy_password": password,
            "custom_endpoint_address": event_hubs.websocket_address}


def fails(call: Any, expected: type[BaseException], within: float) -> tuple[BaseException, float]:
    started = time.monotonic()
    with pytest.raises(expected) as raised:
        call()
    took = time.monotonic() - started
    assert took < within, f"{took:.1f} s to fail; a configuration error must not wait out retries"
    return raised.value, took


def test_a_wrong_proxy_password_fails_the_publish_task_without_retries_naming_proxy_and_field(
        event_hubs: Any, hub: str, proxy: HttpProxy, state: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #41's own case: it was ``EventHubError: failed CONNECT via proxy status: 407`` (twice), retried."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_eh.errors import ProxyRefusedError

    monkeypatch.setenv(*connection_env("eh_bad_proxy_password", "azure_event_hubs",
                                       extra=proxied(event_hubs, hub, proxy.port, WRONG_PASSWORD)))
    refused_before = proxy.refused()
    error, _ = fails(lambda: publish("eh_bad_proxy_password", state), AirflowFailException, within=15)
    text = str(error)
    assert text.startswith("Task 'publish': Connection 'eh_bad_proxy_password': "), text
    assert f"through HTTP proxy 127.0.0.1:{proxy.port}" in text and "proxy_password" in text, text
    assert text.count("CONNECT answered 407") == 1, text  # said once, not the SDK's text twice
    assert WRONG_PASSWORD not in text and PROXY_PASSWORD not in text
    assert isinstance(error.__cause__, ProxyRefusedError) and not error.__cause__.retryable  # the chain: Airflow's, ours, the SDK's
    deadline = time.monotonic() + 5  # proxy.py logs the refusal a moment later
    while proxy.refused() == refused_before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proxy.refused() > refused_before  # the proxy itself turned the tunnel away
    assert read_hub(EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)) == []


def test_a_proxy_that_is_down_is_retried_naming_the_proxy(
        event_hubs: Any, hub: str, state: str, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = free_port()
    monkeypatch.setenv(*connection_env("eh_proxy_down", "azure_event_hubs",
                                       extra=proxied(event_hubs, hub, closed, PROXY_PASSWORD)))
    error, _ = fails(lambda: publish("eh_proxy_down", state), ConnectionUnreachableError, within=20)
    assert error.retryable and f"HTTP proxy 127.0.0.1:{closed} refused the connection" in str(error)
    assert "proxy_host and proxy_port" in str(error) and PROXY_PASSWORD not in str(error)
    assert read_hub(EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)) == []


def test_a_custom_endpoint_address_that_does_not_resolve_fails_without_retries(
        event_hubs: Any, hub: str, state: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    monkeypatch.setenv(*connection_env("eh_unresolvable", "azure_event_hubs", extra={
        "connection_string": event_hubs.connection_string(hub), "custom_endpoint_address": "sb://no-such-host.invalid:5672"}))
    error, _ = fails(lambda: publish("eh_unresolvable", state), AirflowFailException, within=15)
    text = str(error)
    assert "Connection 'eh_unresolvable'" in text and "no-such-host.invalid:5672" in text
    assert "does not resolve" in text and "custom_endpoint_address" in text, text


def test_a_ca_bundle_that_does_not_match_the_gateway_names_ca_bundle(
        gateway: tuple[EmulatorProcess, Certificates, Certificates], state: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_eh.client.network import NetworkOptions

    process, signed, other = gateway
    hub = unique_name("tls")
    process.admin.create_hub(hub, partitions=4)
    fields = {"transport": "websocket", "custom_endpoint_address": process.websocket_address}
    conn_str = process.connection_string(hub).replace(";UseDevelopmentEmulator=true", "")
    monkeypatch.setenv(*connection_env("eh_wrong_ca", "azure_event_hubs", extra={
        "connection_string": conn_str, **fields, "ca_bundle": str(other.ca)}))
    error, _ = fails(lambda: publish("eh_wrong_ca", state), AirflowFailException, within=15)
    text = str(error)
    assert "Connection 'eh_wrong_ca'" in text and f"ca_bundle ({other.ca}" in text and "CERTIFICATE_VERIFY_FAILED" in text
    trusted = NetworkOptions.from_fields({**fields, "ca_bundle": str(signed.ca)})
    assert read_hub(EventHubsEndpoint.from_connection_string(conn_str, hub, network=trusted)) == []


def test_a_hub_that_does_not_exist_fails_the_publish_task_naming_connection_and_hub(
        event_hubs: Any, state: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    missing = unique_name("nohub")
    monkeypatch.setenv(*connection_env("eh_publish_missing", "azure_event_hubs",
                                       extra={"connection_string": event_hubs.connection_string(missing)}))
    error, _ = fails(lambda: publish("eh_publish_missing", state), AirflowFailException, within=15)
    text = str(error)
    assert text.startswith("Task 'publish': Connection 'eh_publish_missing': "), text
    assert repr(missing) in text and "Nothing was sent." in text, text


def view_partitions(conn_id: str) -> Any:
    from airflow_provider_eh.plugins.readers.partitions import partition_properties
    from airflow_provider_eh.plugins.readers.reading import Reading, Source

    return partition_properties(Reading(Source(event_hubs_conn_id=conn_id)))


def test_the_view_asked_for_a_hub_that_does_not_exist_says_so_at_once(
        event_hubs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #41: 3.3 s, then 'the service did not answer (ConnectError)'; the service had answered 404."""
    missing = unique_name("nohub")
    monkeypatch.setenv(*connection_env("eh_view_missing", "azure_event_hubs",
                                       extra={"connection_string": event_hubs.connection_string(missing)}))
    error, took = fails(lambda: view_partitions("eh_view_missing"), ViewReadError, within=2.5)
    assert isinstance(error, ViewReadError) and error.status_code == 404 and not error.retryable
    text = error.message
    assert f"Event Hub {missing!r}" in text and "does not exist" in text and "Connection 'eh_view_missing'" in text
    assert "did not answer" not in text and "EntityPath" in text, text


def test_the_view_behind_a_proxy_that_refuses_the_password_names_proxy_and_field(
        event_hubs: Any, hub: str, proxy: HttpProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(*connection_env("eh_view_proxy", "azure_event_hubs",
                                       extra=proxied(event_hubs, hub, proxy.port, WRONG_PASSWORD)))
    error, _ = fails(lambda: view_partitions("eh_view_proxy"), ViewReadError, within=10)
    assert isinstance(error, ViewReadError)
    text = error.message
    assert f"HTTP proxy 127.0.0.1:{proxy.port}" in text and "proxy_password" in text and "407" in text, text
    assert WRONG_PASSWORD not in text


def test_the_connection_tests_name_what_to_fix(
        event_hubs: Any, azurite: Any, hub: str, proxy: HttpProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """``test_connection`` of both hooks, as the UI's Test button calls it: a missing hub, a refused account key."""
    from airflow_provider_eh.hooks.blob import BlobStorageHook
    from airflow_provider_eh.hooks.event_hubs import EventHubHook

    missing = unique_name("nohub")
    monkeypatch.setenv(*connection_env("eh_test_missing", "azure_event_hubs",
                                       extra={"connection_string": event_hubs.connection_string(missing)}))
    ok, message = EventHubHook("eh_test_missing").test_connection()
    assert not ok and f"Event Hub {missing!r}" in message and "does not exist" in message, message
    wrong = azurite.connection_string.replace("AccountKey=", "AccountKey=AAAA")
    monkeypatch.setenv(*connection_env("wasb_test_wrong", "wasb", extra={"connection_string": wrong}))
    ok, message = BlobStorageHook("wasb_test_wrong").test_connection()
    assert not ok and "Connection 'wasb_test_wrong'" in message and "403" in message, message
    assert f"blob storage at 127.0.0.1:{azurite.port}" in message and "AccountKey" in message
    assert wrong.split("AccountKey=", 1)[1].split(";", 1)[0] not in message

