"""The lean producer client against the local endpoint, counted at the endpoint: one kept management link
shared by a publish's partitions, a partition's batch limit from its own sender link, and a kept link
that broke replaced without a failed request."""

from __future__ import annotations

import json
from typing import Any

from azure.eventhub import EventData, EventHubProducerClient
from azure.storage.blob import ContainerClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.lean import KeptManagement
from airflow_provider_eh.client.readback import read_hub
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher


def connections(event_hubs: Any) -> int:
    return int(event_hubs.admin.stats()["connections_total"])


def test_a_publish_opens_one_management_link_and_one_sender_per_partition(
    event_hubs: Any, azurite: Any, hub: str, container: str,
) -> None:
    endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
    store = BlobProducerStateStore(ContainerClient.from_connection_string(azurite.connection_string, container),
                                   claim_timeout=0)
    publisher = IdempotentPublisher(endpoint, store, producer_group="lean")
    events = [{"body": {"id": i}, "partition_id": str(i % 4)} for i in range(400)]
    before = connections(event_hubs)
    result = publisher.publish(events, batch_id="lean-1")
    # the partition ids, every partition's end before its intent and after its send, and the fences: one link;
    # then one sender link per partition (the SDK alone opens six connections per partition for this)
    assert connections(event_hubs) - before == 1 + 4
    assert {r.status for r in result.values()} == {"published"}
    assert sorted(json.loads(e.body)["id"] for e in read_hub(endpoint)) == list(range(400))
    before = connections(event_hubs)
    again = publisher.publish(events, batch_id="lean-1")
    assert {r.status for r in again.values()} == {"already_committed"}
    assert connections(event_hubs) - before == 1  # a re-run only asks for the partition ids


def test_a_partitions_batch_takes_its_limit_from_its_open_link_and_the_send_reuses_it(event_hubs: Any, hub: str) -> None:
    endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
    before = connections(event_hubs)
    with endpoint.producer() as client:
        client._start_producer("2", None)  # the partition's sender, opened first (the engine's open_fenced does)
        client._producers["2"]._open_with_retry()
        batch = client.create_batch(partition_id="2")
        for i in range(50):
            batch.add(EventData(f"e{i}"))
        client.send_batch(batch)
        assert batch.max_size_in_bytes == client._producers["2"]._max_message_size_on_link > 0
    assert connections(event_hubs) - before == 2  # the partition ids (kept link) and partition 2's sender
    before = connections(event_hubs)
    with EventHubProducerClient.from_connection_string(event_hubs.connection_string(hub)) as plain:
        batch = plain.create_batch(partition_id="2")
        batch.add(EventData("plain"))
        plain.send_batch(batch)
    assert connections(event_hubs) - before == 3  # the SDK's: the partition ids, a link to no partition, the sender


def test_the_kept_link_is_shared_and_one_that_broke_is_replaced_without_a_failed_request(event_hubs: Any, hub: str) -> None:
    endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
    with EventHubProducerClient.from_connection_string(event_hubs.connection_string(hub)) as plain:
        expected = {p: plain.get_partition_properties(p)["last_enqueued_sequence_number"] for p in plain.get_partition_ids()}
    management = KeptManagement()
    before = connections(event_hubs)
    with endpoint.producer(management=management) as first, endpoint.producer(management=management) as second:
        assert {p: first.get_partition_properties(p)["last_enqueued_sequence_number"] for p in second.get_partition_ids()} == expected
        assert (management.opened, connections(event_hubs) - before) == (1, 1)
        management._client._connection.close()  # the kept link's connection goes away under it
        assert second.get_partition_ids() == sorted(expected)  # answered the SDK's way
        assert second.get_partition_properties("1")["last_enqueued_sequence_number"] == expected["1"]
        assert management.opened == 2
    management.close()
    assert management._client is None
