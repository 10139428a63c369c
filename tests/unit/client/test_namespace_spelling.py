"""One namespace, one spelling: every way of writing a namespace names the same producer state."""

from __future__ import annotations

import pytest

from airflow_provider_eh.client.endpoint import EventHubsEndpoint, canonical_namespace
from airflow_provider_eh.publishing.publisher import IdempotentPublisher

SPELLINGS = [
    "mynamespace.servicebus.windows.net",
    "MyNamespace.ServiceBus.Windows.Net",
    "mynamespace.servicebus.windows.net:5671",
    "mynamespace.servicebus.windows.net:443",
    "sb://mynamespace.servicebus.windows.net/",
    "sb://MYNAMESPACE.servicebus.windows.net:5671/",
    "amqps://mynamespace.servicebus.windows.net/orders",
]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_a_namespace_is_one_name(spelling: str) -> None:
    assert canonical_namespace(spelling) == "mynamespace.servicebus.windows.net"


def test_a_port_other_than_the_default_is_part_of_the_name() -> None:
    assert canonical_namespace("sb://127.0.0.1:5672/") == "127.0.0.1:5672"
    assert canonical_namespace("LocalHost:5672") == "localhost:5672"
    assert canonical_namespace("[::1]:5671") == "[::1]"
    assert canonical_namespace("[::1]:5672") == "[::1]:5672"
    assert canonical_namespace("::1") == "::1"  # a bare IPv6 address: its last group is no port


def test_two_connection_strings_spelling_the_namespace_differently_share_one_producer_state() -> None:
    a = EventHubsEndpoint.from_connection_string(
        "Endpoint=sb://MyNamespace.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v", "Orders")
    b = EventHubsEndpoint.from_connection_string(
        "Endpoint=sb://mynamespace.servicebus.windows.net:5671;SharedAccessKeyName=k;SharedAccessKey=v", "orders")
    c = EventHubsEndpoint(fully_qualified_namespace="mynamespace.servicebus.windows.net", eventhub_name="orders")
    keys = {IdempotentPublisher(e, store=None, producer_group="daily")._key("3").blob_name  # type: ignore[arg-type]
            for e in (a, b, c)}
    assert keys == {"mynamespace.servicebus.windows.net/orders/daily/producer-state/3"}
