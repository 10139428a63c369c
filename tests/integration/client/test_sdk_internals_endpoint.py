"""The adapter of the SDK's private names against the local endpoint, with the real SDK.

Each of its named steps is driven on its own: the idempotent-producer attach and its undoing, the
kept management link on the shared connection, a receiver of our own handing AMQP messages over,
and the batch limit taken from an open sender link. ``test_sdk_releases.py`` runs this file on
every azure-eventhub release of the declared range.
"""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest
from azure.eventhub import EventData, EventHubProducerClient

from airflow_provider_eh.client import sdk_internals
from airflow_provider_eh.client.connection import held
from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.fencing import CAPABILITY, PRODUCER_EPOCH, _offers, _typed_link_properties, _value


def _endpoint(event_hubs: Any, hub: str) -> EventHubsEndpoint:
    return EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)


def test_a_sender_link_attaches_as_an_idempotent_producer_and_plainly_again(event_hubs: Any, hub: str) -> None:
    endpoint = _endpoint(event_hubs, hub)
    with endpoint.producer(retry_total=0) as client:
        producer = sdk_internals.partition_producer(client, "1", 30.0)
        sdk_internals.attach_as(producer, CAPABILITY, _typed_link_properties(12345, 4))
        sdk_internals.reattach(producer)
        answer = sdk_internals.attach_answer(producer)
        assert _offers(answer.offered_capabilities) and _value(answer.properties, PRODUCER_EPOCH) == 4
        assert sdk_internals.detach_error(producer, wait=0.1) is None  # the hub kept the link
        with pytest.raises(Exception, match="lacks com.microsoft:producer-sequence-number"):
            client.send_batch([EventData(b"plain")], partition_id="1")  # the link is the hub's idempotent one
    with endpoint.producer(retry_total=0) as client:
        producer = sdk_internals.partition_producer(client, "1", 30.0)
        sdk_internals.attach_as(producer, CAPABILITY, _typed_link_properties(12345, 4))
        sdk_internals.reattach(producer)
        sdk_internals.attach_plain(client, "1")
        sdk_internals.reattach(producer)
        assert not _offers(sdk_internals.attach_answer(producer).offered_capabilities)


def test_a_lower_owner_level_is_refused_and_the_detach_read(event_hubs: Any, hub: str) -> None:
    endpoint = _endpoint(event_hubs, hub)
    with endpoint.producer(retry_total=0) as high, endpoint.producer(retry_total=0) as low:
        first = sdk_internals.partition_producer(high, "2", 30.0)
        sdk_internals.attach_as(first, CAPABILITY, _typed_link_properties(777, 9))
        sdk_internals.reattach(first)
        second = sdk_internals.partition_producer(low, "2", 30.0)
        sdk_internals.attach_as(second, CAPABILITY, _typed_link_properties(777, 8))
        try:
            sdk_internals.reattach(second)
        except Exception as exc:  # refused at attach
            assert "producer-epoch-stolen" in f"{type(exc).__name__}: {exc}"
        else:  # or answered, then detached at once
            refused = sdk_internals.detach_error(second, wait=2.0)
            assert refused is not None and "producer-epoch-stolen" in refused


def test_management_requests_ride_one_kept_link_on_the_shared_connection(event_hubs: Any, hub: str) -> None:
    endpoint = _endpoint(event_hubs, hub)
    with held(endpoint) as shared:
        with endpoint.producer() as first, endpoint.producer() as second:
            assert first.get_partition_ids() == second.get_partition_ids() == ["0", "1", "2", "3"]
            assert second.get_partition_properties("3")["id"] == "3"
        assert shared.management.opened == 1 and shared.opened == 1
        assert sdk_internals.connection_usable(shared.connection)


def test_the_sdks_own_management_request_still_answers(event_hubs: Any, hub: str) -> None:
    plain: EventHubProducerClient = sdk_internals.HookedProducerClient.from_connection_string(
        event_hubs.connection_string(hub), eventhub_name=hub)
    with plain:
        assert plain.get_partition_ids() == ["0", "1", "2", "3"]  # the SDK's way, through the hook


def test_a_receiver_of_our_own_hands_over_the_amqp_messages(event_hubs: Any, hub: str) -> None:
    endpoint = _endpoint(event_hubs, hub)
    with endpoint.producer() as producer:
        producer.send_batch([EventData(f"m{i}") for i in range(3)], partition_id="0")
    got: queue.Queue[Any] = queue.Queue()
    with endpoint.consumer("$Default", shared=True) as client:
        assert sdk_internals.can_create_consumers(client)
        consumer = sdk_internals.create_consumer(client, "$Default", "0", "-1", lambda events: None,
                                                 event_position_inclusive=False, prefetch=10)
        assert sdk_internals.hand_over_messages(consumer, lambda messages: [got.put(m) for m in messages])
        failures: list[BaseException] = []
        sdk_internals.wrap_consumer_errors(consumer, lambda handle: lambda exc, **kw: failures.append(exc) or handle(exc, **kw))
        deadline = time.monotonic() + 30
        while got.qsize() < 3 and time.monotonic() < deadline:
            consumer.receive(batch=True, max_batch_size=10, max_wait_time=1)
        consumer.close()
    messages = [got.get_nowait() for _ in range(3)]
    assert [b"".join(m.data) for m in messages] == [b"m0", b"m1", b"m2"] and failures == []
    assert sdk_internals.event_data_of(messages[0]).body_as_str() == "m0"
    assert sdk_internals.client_max_retries(client) >= 0


def test_a_partitions_batch_takes_its_limit_from_its_open_sender_link(event_hubs: Any, hub: str) -> None:
    endpoint = _endpoint(event_hubs, hub)
    with endpoint.producer(retry_total=0) as client:
        producer = sdk_internals.partition_producer(client, "3", 30.0)
        sdk_internals.reattach(producer)
        batch = client.create_batch(partition_id="3")
        assert batch.max_size_in_bytes > 0 and sdk_internals.batch_fast_path(batch)
