"""Hubs reached the way companies expose them: AMQP over WebSockets, an HTTP proxy, a gateway with a private CA.

The local endpoint serves AMQP over WebSockets beside its AMQP listener (``/$servicebus/websocket``,
subprotocol ``AMQPWSB10``); :class:`~tests.support.proxy.HttpProxy` runs a real HTTP
proxy, the ``proxy.py`` package (``CONNECT`` tunnels, Basic authentication), whose access log says
where it tunnelled to. The
clients are the real SDK's, built from the connection's network fields by the package's one client
factory (:class:`~airflow_provider_eh.client.endpoint.EventHubsEndpoint`): the publishing engine
with idempotent-producer links, read-back, the sync and async hooks. What went over WebSockets is
counted by the endpoint, what went through the proxy by the proxy, and every event is read back.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from azure.eventhub import EventData, EventHubProducerClient
from azure.storage.blob import ContainerClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.network import NetworkOptions
from airflow_provider_eh.client.readback import read_hub
from eventhubs_local import EmulatorProcess
from airflow_provider_eh.errors import ConnectionConfigError
from airflow_provider_eh.hooks.event_hubs import EventHubAsyncHook, EventHubHook
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher
from tests.support.proxy import HttpProxy
from tests.support.tls import make_certificates
from tests.conftest import connection_env, unique_name


def _websocket_connections(event_hubs: Any) -> int:
    return int(event_hubs.admin.stats()["websocket_connections_total"])


def _tcp_connections(event_hubs: Any) -> int:
    """AMQP connections the endpoint accepted on its TCP listener (no WebSocket) since it started."""
    stats = event_hubs.admin.stats()
    return int(stats["connections_total"]) - int(stats["websocket_connections_total"])


def _through(proxy: HttpProxy, password: str, event_hubs: Any, hub: str) -> EventHubsEndpoint:
    """The hub reached over the endpoint's WebSocket listener through ``proxy`` as user ``svc``."""
    network = NetworkOptions.from_fields({
        "proxy_host": "127.0.0.1", "proxy_port": proxy.port, "proxy_username": "svc", "proxy_password": password,
        "custom_endpoint_address": event_hubs.websocket_address,
    })
    return EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub, network=network)


def _publisher(endpoint: EventHubsEndpoint, azurite: Any, container: str, group: str) -> IdempotentPublisher:
    store = BlobProducerStateStore(ContainerClient.from_connection_string(azurite.connection_string, container))
    return IdempotentPublisher(endpoint, store, producer_group=group)


def _raw_upgrade(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        if answer.startswith(b"HTTP/1.1 101"):
            sock.sendall(bytes((0x81, 0x80 | 2)) + b"\x00\x00\x00\x00" + b"hi")  # a masked text frame
            sock.settimeout(10)
            closing = sock.recv(4096)
            answer += b"|" + closing
        else:
            answer += sock.recv(4096)
    return answer


def test_the_endpoint_answers_what_is_no_amqp_websocket_with_its_fault(event_hubs: Any) -> None:
    port = event_hubs.websocket_port
    head = ("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Protocol: {protocol}\r\n\r\n")
    wrong_path = _raw_upgrade(port, head.format(path="/ws", protocol="AMQPWSB10").encode())
    assert wrong_path.startswith(b"HTTP/1.1 404") and b"AMQP over WebSockets is at /$servicebus/websocket" in wrong_path
    no_amqp = _raw_upgrade(port, head.format(path="/$servicebus/websocket", protocol="mqtt").encode())
    assert no_amqp.startswith(b"HTTP/1.1 400") and b"AMQPWSB10" in no_amqp
    text = _raw_upgrade(port, head.format(path="/$servicebus/websocket", protocol="AMQPWSB10").encode())
    assert text.startswith(b"HTTP/1.1 101")
    closing = text.split(b"|", 1)[1]
    assert closing[0] == 0x88 and int.from_bytes(closing[2:4], "big") == 1003  # close: unsupported data


def test_the_engine_publishes_through_an_http_proxy_over_websockets_each_event_once(
        event_hubs: Any, azurite: Any, hub: str, container: str, tmp_path: Path) -> None:
    """Fenced sends, read-back and management calls all go through the proxy; a retry sends nothing."""
    before, tcp_before = _websocket_connections(event_hubs), _tcp_connections(event_hubs)
    with HttpProxy(tmp_path / "proxy", "svc", "pr0xy-pass") as proxy:
        endpoint = _through(proxy, "pr0xy-pass", event_hubs, hub)
        publisher = _publisher(endpoint, azurite, container, "behind-proxy")
        events = [{"body": json.dumps({"id": i}), "partition_id": str(i % 4)} for i in range(2000)]
        results = publisher.publish(events, batch_id="day-1")
        assert {r.fencing for r in results.values()} == {"hub"}  # idempotent-producer links over WebSockets
        again = publisher.publish(events, batch_id="day-1")
        assert sum(r.resent for r in again.values()) == 0 and {r.status for r in again.values()} == {"already_committed"}
        read = read_hub(endpoint)
        opened = _websocket_connections(event_hubs) - before
        tunnels = proxy.tunnels(at_least=opened)  # the proxy's log, once every client closed
        assert tunnels and set(tunnels) == {f"127.0.0.1:{event_hubs.websocket_port}"}
        assert proxy.refused() == 0
    assert opened == len(tunnels)  # every client's connection, one tunnel each
    assert _tcp_connections(event_hubs) == tcp_before  # nothing went around the proxy
    ids = Counter(json.loads(e.body)["id"] for e in read)
    assert len(ids) == 2000 and set(ids.values()) == {1}


def test_a_proxy_that_refuses_the_credentials_fails_the_connection_test_naming_it(
        event_hubs: Any, hub: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with HttpProxy(tmp_path / "proxy", "svc", "right") as proxy:
        name, value = connection_env("eh_proxied", "azure_event_hubs", extra={
            "connection_string": event_hubs.connection_string(hub), "proxy_host": "127.0.0.1",
            "proxy_port": proxy.port, "proxy_username": "svc", "proxy_password": "wrong",
            "custom_endpoint_address": event_hubs.websocket_address,
        })
        monkeypatch.setenv(name, value)
        started = time.monotonic()
        ok, message = EventHubHook("eh_proxied").test_connection()
        assert time.monotonic() - started < 30, "a refused proxy must fail fast, not time out"
        assert not ok and "407" in message and f"HTTP proxy 127.0.0.1:{proxy.port}" in message, message
        assert "wrong" not in message
        assert proxy.tunnels(at_least=0) == [] and proxy.refused() >= 1


def test_a_gateway_with_a_private_ca_is_reached_with_the_connections_ca_bundle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``wss://`` at a custom endpoint address, as a Private Link or application gateway serves it; sync and async hooks."""
    certs = make_certificates(tmp_path / "certs")
    with EmulatorProcess(tmp_path / "gateway", tls=(certs.cert, certs.key)) as gateway:
        hub = unique_name("tls")
        gateway.admin.create_hub(hub, partitions=2)
        # a namespace's connection string: TLS on (no UseDevelopmentEmulator), reached at the gateway's address
        conn_str = gateway.connection_string(hub).replace(";UseDevelopmentEmulator=true", "")
        fields = {"connection_string": conn_str, "transport": "websocket",
                  "custom_endpoint_address": gateway.websocket_address}
        monkeypatch.setenv(*connection_env("eh_untrusted", "azure_event_hubs", extra=fields))
        monkeypatch.setenv(*connection_env("eh_gateway", "azure_event_hubs", extra={**fields, "ca_bundle": str(certs.ca)}))

        ok, message = EventHubHook("eh_untrusted").test_connection()
        assert not ok and "CERTIFICATE_VERIFY_FAILED" in message

        ok, message = EventHubHook("eh_gateway").test_connection()
        assert ok, message
        assert EventHubHook("eh_gateway").get_partition_ids() == ["0", "1"]
        assert asyncio.run(EventHubAsyncHook("eh_gateway").get_partition_ids()) == ["0", "1"]
        assert gateway.admin.stats()["websocket_connections_total"] >= 3
        assert gateway.admin.stats()["connections_total"] == gateway.admin.stats()["websocket_connections_total"]

        with pytest.raises(ConnectionConfigError) as untrusted:  # a setting to fix: not retried
            EventHubHook("eh_untrusted").get_partition_ids()
        assert not untrusted.value.retryable and "ca_bundle" in str(untrusted.value)


def test_spark_executors_publish_through_the_proxy_with_the_endpoint_they_are_sent(
        spark: Any, event_hubs: Any, azurite: Any, hub: str, container: str, tmp_path: Path) -> None:
    """The executors build their clients from the pickled endpoint: the proxy (and its password) go with it."""
    from airflow_provider_eh.spark.job import SparkPublishJob, SparkSource
    from airflow_provider_eh.spark.mapping import RowMapping

    path = str(tmp_path / "orders")
    spark.range(3000).selectExpr("id", "concat('customer-', cast(id % 101 as string)) as customer") \
        .repartition(3).write.parquet(path)
    tcp_before = _tcp_connections(event_hubs)
    with HttpProxy(tmp_path / "proxy", "svc", "spark-pr0xy") as proxy:
        endpoint = _through(proxy, "spark-pr0xy", event_hubs, hub)
        publisher = _publisher(endpoint, azurite, container, "spark-behind-proxy")
        job = SparkPublishJob(spark, publisher, RowMapping(key_column="customer", order_by=["id"]))
        results = job.publish(SparkSource(path=path), "spark-day-1")
        assert sum(r.events for r in results.values()) == 3000
        assert {r.fencing for r in results.values() if r.events} == {"hub"}
        read = read_hub(endpoint)
        assert _tcp_connections(event_hubs) == tcp_before  # driver and executors alike went through the proxy
        assert set(proxy.tunnels()) == {f"127.0.0.1:{event_hubs.websocket_port}"} and proxy.refused() == 0
    ids = Counter(json.loads(e.body)["id"] for e in read)
    assert len(ids) == 3000 and set(ids.values()) == {1}


def test_the_event_trigger_reads_through_the_proxy_from_a_tls_gateway(
        connections: dict[str, str], container: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The async side (the event trigger, as the triggerer runs it) through a proxy to ``wss://``, as a namespace is reached.

    The async clients tunnel only ``wss://`` through a proxy (aiohttp forwards a plaintext ``ws://``
    request instead of tunnelling it), so this is the gateway with a private CA behind the proxy.
    """
    from tests.support.events import fire_trigger, send_json
    from airflow_provider_eh.triggers.event import EventHubEventTrigger

    certs = make_certificates(tmp_path / "certs")
    with EmulatorProcess(tmp_path / "gateway", tls=(certs.cert, certs.key)) as gateway, \
            HttpProxy(tmp_path / "proxy", "svc", "trigger-pr0xy") as proxy:
        hub = unique_name("trig")
        gateway.admin.create_hub(hub, partitions=2, consumer_groups=["analytics"])
        monkeypatch.setenv(*connection_env(connections["event_hubs"], "azure_event_hubs", extra={
            "connection_string": gateway.connection_string(hub).replace(";UseDevelopmentEmulator=true", ""),
            "proxy_host": "127.0.0.1", "proxy_port": proxy.port, "proxy_username": "svc",
            "proxy_password": "trigger-pr0xy", "custom_endpoint_address": gateway.websocket_address,
            "ca_bundle": str(certs.ca),
        }))
        send_json(connections["event_hubs"], "1", [{"n": i} for i in range(5)])  # the sync side, through the proxy too
        trigger = EventHubEventTrigger(eventhub_name=hub, consumer_group="analytics", checkpoint_container=container,
                                       batch_size=100, batch_window=1.0, include_bodies=True)
        (payload,) = fire_trigger(trigger, 1)
        assert payload["partitions"] == {"1": {"first": 0, "last": 4, "count": 5}}
        assert sorted(json.loads(b["body"])["n"] for b in payload["bodies"]) == [0, 1, 2, 3, 4]
        stats = gateway.admin.stats()
        assert stats["connections_total"] == stats["websocket_connections_total"]  # no client went another way
        tunnels = proxy.tunnels(at_least=stats["websocket_connections_total"])
        assert set(tunnels) == {f"127.0.0.1:{gateway.websocket_port}"} and proxy.refused() == 0
        assert len(tunnels) == stats["websocket_connections_total"]  # and every one through the proxy


def test_a_namespace_reached_at_a_custom_endpoint_address_keeps_its_own_name(
        event_hubs: Any, azurite: Any, hub: str, container: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Private Link: the connection names the namespace, the address is another (here, the local endpoint).

    The namespace's name does not resolve here, so every client must connect at the custom address;
    the producer state is still keyed by the namespace's name, as it is wherever it is reached from.
    """
    conn_str = event_hubs.connection_string(hub).replace(
        f"sb://{event_hubs.host}:{event_hubs.port}", "sb://orders-prod.servicebus.windows.net")
    assert "orders-prod.servicebus.windows.net" in conn_str
    monkeypatch.setenv(*connection_env("eh_private_link", "azure_event_hubs", extra={
        "connection_string": conn_str, "transport": "websocket",
        "custom_endpoint_address": event_hubs.websocket_address,
    }))
    hook = EventHubHook("eh_private_link")
    assert hook.get_partition_ids() == ["0", "1", "2", "3"]
    endpoint = hook.get_endpoint()
    assert endpoint.namespace == "orders-prod.servicebus.windows.net"
    client = ContainerClient.from_connection_string(azurite.connection_string, container)
    publisher = _publisher(endpoint, azurite, container, "private-link")
    results = publisher.publish([{"body": json.dumps({"id": i}), "partition_id": "2"} for i in range(300)], batch_id="d1")
    assert results["2"].events == 300 and results["2"].fencing == "hub"
    assert any(b.name.startswith("orders-prod.servicebus.windows.net/") for b in client.list_blobs())
    ids = Counter(json.loads(e.body)["id"] for e in read_hub(endpoint))
    assert len(ids) == 300 and set(ids.values()) == {1}


def test_ingestion_reads_through_the_proxy_and_reports_lag(
        event_hubs: Any, hub: str, tmp_path: Path) -> None:
    import sqlite3

    from airflow_provider_eh.ingest import BatchProcessor, IngestRun, RunLimits, SqlIngestStore, Stream

    with EventHubProducerClient.from_connection_string(event_hubs.connection_string(hub)) as producer:
        producer.send_batch([EventData(json.dumps({"id": f"e{i}"})) for i in range(40)], partition_id="3")
    tcp_before = _tcp_connections(event_hubs)
    with HttpProxy(tmp_path / "proxy", "svc", "ingest-pr0xy") as proxy:
        endpoint = _through(proxy, "ingest-pr0xy", event_hubs, hub)
        sink = sqlite3.connect(tmp_path / "sink.db")
        sink.execute("CREATE TABLE events (id TEXT PRIMARY KEY)")  # the default row function: the JSON body's fields
        store = SqlIngestStore(sink, Stream(endpoint.namespace, hub, "$Default"))
        try:
            summary = IngestRun(endpoint, "$Default", store, BatchProcessor("events"), owner_id="behind-proxy",
                                limits=RunLimits(max_wait_time=0.3, max_duration=60, max_events=30)).run()
        finally:
            store.close()
        assert summary["events"] == 30
        report = summary["partitions"]["3"]
        assert report["checkpoint"] == 29 and report["last_enqueued"] == 39 and report["lag"] == 10
        assert _tcp_connections(event_hubs) == tcp_before  # nothing went around the proxy
        assert proxy.tunnels() and proxy.refused() == 0


def test_the_checkpoint_sensor_and_the_views_reads_go_through_the_proxy(
        connections: dict[str, str], container: str, event_hubs: Any, hub: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.common.compat.sdk import AirflowSensorTimeout

    from airflow_provider_eh.plugins.readers import partitions
    from airflow_provider_eh.plugins.readers.reading import Reading, Source
    from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor

    with EventHubProducerClient.from_connection_string(event_hubs.connection_string(hub)) as producer:
        producer.send_batch([EventData("x")] * 3, partition_id="2")
    tcp_before = _tcp_connections(event_hubs)
    with HttpProxy(tmp_path / "proxy", "svc", "view-pr0xy") as proxy:
        monkeypatch.setenv(*connection_env(connections["event_hubs"], "azure_event_hubs", extra={
            "connection_string": event_hubs.connection_string(hub), "proxy_host": "127.0.0.1",
            "proxy_port": proxy.port, "proxy_username": "svc", "proxy_password": "view-pr0xy",
            "custom_endpoint_address": event_hubs.websocket_address,
        }))
        sensor = EventHubCheckpointSensor(
            task_id="wait", checkpoint_container=container, consumer_groups="analytics", targets=None, poke_interval=0.5,
            timeout=2, event_hubs_conn_id=connections["event_hubs"], wasb_conn_id=connections["wasb"], deferrable=False)
        with pytest.raises(AirflowSensorTimeout, match="partition 2: checkpoint none, target 2"):
            sensor.execute({})  # type: ignore[arg-type]

        partitions._PROPERTIES.clear()
        partitions._PARTITION_IDS.clear()
        props = partitions.partition_properties(Reading(Source(connections["event_hubs"], hub)))
        assert props["2"]["last_enqueued_sequence_number"] == 2 and set(props) == {"0", "1", "2", "3"}
        assert _tcp_connections(event_hubs) == tcp_before  # nothing went around the proxy
        assert proxy.tunnels() and proxy.refused() == 0


def test_the_javascript_sdk_reaches_a_tls_gateway_over_websockets_and_the_python_sdk_reads_back(
        tmp_path: Path, js: Any) -> None:
    """Microsoft's JavaScript SDK with ``webSocketOptions`` and ``customEndpointAddress`` (its WebSockets are
    always ``wss://``) against the endpoint's TLS listener, as against a gateway with a private CA."""
    certs = make_certificates(tmp_path / "certs")
    with EmulatorProcess(tmp_path / "gateway", tls=(certs.cert, certs.key)) as gateway:
        hub = unique_name("js-ws")
        gateway.admin.create_hub(hub, partitions=2)
        conn_str = gateway.connection_string(hub).replace(";UseDevelopmentEmulator=true", "")
        network = {"webSocket": True, "customEndpointAddress": gateway.websocket_address, "caFile": str(certs.ca)}
        sent, read, props = js(gateway, hub, [
            {"op": "send", "sends": [{"bodies": [f"js-{i}" for i in range(20)], "partitionId": "1"}]},
            {"op": "receive", "reads": [{"partitionId": "1", "start": "earliest", "count": 20, "waitMs": 5000}]},
            {"op": "properties"},
        ], timeout=60, network=network, connection_string=conn_str)
        assert sent.get("error") is None and sent["sent"] == [20], sent
        assert read["reads"][0]["bodies"] == [f"js-{i}" for i in range(20)] and not read["reads"][0]["errors"]
        assert [p["lastEnqueuedSequenceNumber"] for p in props["partitions"]] == [-1, 19]
        stats = gateway.admin.stats()
        assert stats["websocket_connections_total"] >= 3 and stats["connections_total"] == stats["websocket_connections_total"]
        network_options = NetworkOptions.from_fields({"transport": "websocket", "ca_bundle": str(certs.ca),
                                                      "custom_endpoint_address": gateway.websocket_address})
        endpoint = EventHubsEndpoint.from_connection_string(conn_str, hub, network=network_options)
        assert sorted(json.loads(e.body) for e in read_hub(endpoint)) == sorted(f"js-{i}" for i in range(20))
