"""The process's one connection to a hub, counted at the local endpoint: a publish (its metadata, partition
ends, fences, sends and read-back, across partitions) opens one; many threads sending and reading on it
lose and reorder nothing; a partition's batch takes its limit from its own sender link; the kept
management link rides on it, and a connection that broke is replaced without a failed request."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from azure.eventhub import EventData, EventHubProducerClient
from azure.storage.blob import ContainerClient

from airflow_provider_eh.client import connection as shared_connections
from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.readback import read_hub, read_partition
from airflow_provider_eh.publishing import BlobProducerStateStore, Fingerprint, IdempotentPublisher, send_partition
from tests.support.events import send_filled
from tests.support.forking import fork_run


def connections(event_hubs: Any) -> int:
    return int(event_hubs.admin.stats()["connections_total"])


def settled(endpoint: EventHubsEndpoint, timeout: float = 20.0) -> None:
    """Wait until the process holds no connection to ``endpoint`` (readers close theirs in the background)."""
    deadline = time.monotonic() + timeout
    while endpoint in shared_connections._SHARED:
        assert time.monotonic() < deadline, "a client of the hub was never closed"
        time.sleep(0.05)


def publisher_of(endpoint: EventHubsEndpoint, azurite: Any, container: str, **kwargs: Any) -> IdempotentPublisher:
    store = BlobProducerStateStore(ContainerClient.from_connection_string(azurite.connection_string, container),
                                   claim_timeout=kwargs.pop("claim_timeout", 0))
    return IdempotentPublisher(endpoint, store, producer_group="lean", **kwargs)


def test_a_publish_runs_on_one_connection_and_a_rerun_on_one_more(
    event_hubs: Any, azurite: Any, hub: str, container: str,
) -> None:
    endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
    publisher = publisher_of(endpoint, azurite, container)
    events = [{"body": {"id": i}, "partition_id": str(i % 4)} for i in range(400)]
    before = connections(event_hubs)
    result = publisher.publish(events, batch_id="lean-1")
    # the partition ids, every partition's end before its intent and after its send, the four fenced
    # sender links: one connection (the SDK alone opens three per partition for a send)
    assert connections(event_hubs) - before == 1
    assert endpoint not in shared_connections._SHARED  # closed with the publish
    assert {r.status for r in result.values()} == {"published"}
    assert sorted(json.loads(e.body)["id"] for e in read_hub(endpoint)) == list(range(400))
    settled(endpoint)
    before = connections(event_hubs)
    again = publisher.publish(events, batch_id="lean-1")
    assert {r.status for r in again.values()} == {"already_committed"}
    assert connections(event_hubs) - before == 1


def test_a_recovery_reads_back_on_the_publishs_connection(event_hubs: Any, azurite: Any, hub: str, container: str) -> None:
    endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
    events = [{"body": {"id": i}, "partition_id": str(i % 4)} for i in range(2000)]
    crashed = publisher_of(endpoint, azurite, container)
    for pid, outgoing in crashed.prepare(events).items():  # sent under an intent, never committed: a crash after the send
        fp = Fingerprint()
        for event in outgoing:
            fp.update(event.body, event.properties)
        session = crashed.begin(pid, "in-doubt", fp.count, fp.hexdigest())
        send_partition(endpoint, session.plan, outgoing)
        crashed.abort(session)
    settled(endpoint)
    before = connections(event_hubs)
    results = publisher_of(endpoint, azurite, container, claim_timeout=30).publish(events, batch_id="in-doubt")
    assert {r.status for r in results.values()} == {"recovered"}
    assert sum(r.landed_count for r in results.values()) == 2000 and sum(r.resent for r in results.values()) == 0
    assert connections(event_hubs) - before == 1  # four partitions read back beside the metadata, on one connection


def test_threads_sending_and_reading_on_one_connection_lose_and_reorder_nothing(event_hubs: Any, hub: str) -> None:
    """Without the connection's read lock, threads handle each other's frames at once: refused attaches,
    broken pipes and missing events."""
    endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
    per_partition, body = 60_000, b"x" * 180
    errors: list[BaseException] = []

    def send(pid: str) -> None:
        try:
            with endpoint.producer(retry_total=0) as client:
                send_filled(client, pid, (body + f"{i:08d}".encode() for i in range(per_partition)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    before = connections(event_hubs)
    with shared_connections.held(endpoint):
        threads = [threading.Thread(target=send, args=(pid,)) for pid in ("0", "1", "2", "3")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, errors
        parts = {pid: read_partition(endpoint, pid) for pid in ("0", "1", "2", "3")}
        settled_reads = connections(event_hubs) - before
    assert settled_reads == 1
    for pid, events in parts.items():
        assert [int(e.body[-8:]) for e in events] == list(range(per_partition)), f"partition {pid}"
        assert [e.sequence_number for e in events] == list(range(per_partition))


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
    assert connections(event_hubs) - before == 1  # the partition ids (kept link) and partition 2's sender
    before = connections(event_hubs)
    with EventHubProducerClient.from_connection_string(event_hubs.connection_string(hub)) as plain:
        batch = plain.create_batch(partition_id="2")
        batch.add(EventData("plain"))
        plain.send_batch(batch)
    assert connections(event_hubs) - before == 3  # the SDK's: the partition ids, a link to no partition, the sender


def test_the_kept_link_rides_on_the_shared_connection_and_one_that_broke_is_replaced(event_hubs: Any, hub: str) -> None:
    endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
    with EventHubProducerClient.from_connection_string(event_hubs.connection_string(hub)) as plain:
        expected = {p: plain.get_partition_properties(p)["last_enqueued_sequence_number"] for p in plain.get_partition_ids()}
    before = connections(event_hubs)
    with endpoint.producer() as first, endpoint.producer() as second:
        shared = first.shared_connection
        assert shared is second.shared_connection and first._kept is second._kept is shared.management
        ends = {p: first.get_partition_properties(p)["last_enqueued_sequence_number"] for p in second.get_partition_ids()}
        assert ends == expected
        assert (shared.management.opened, shared.opened, connections(event_hubs) - before) == (1, 1, 1)
        shared.connection.close()  # the connection goes away under both clients
        assert second.get_partition_ids() == sorted(expected)  # answered (the SDK's way, then on a new connection)
        assert second.get_partition_properties("1")["last_enqueued_sequence_number"] == expected["1"]
        assert (shared.management.opened, shared.opened) == (2, 2)
    assert endpoint not in shared_connections._SHARED and shared.connection is None


def test_a_forked_child_opens_its_own_connection(event_hubs: Any, hub: str) -> None:
    """A child (a Celery or Spark worker forked from a parent that published) must not write on its parent's socket."""
    endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
    with endpoint.producer() as parent:
        ids = parent.get_partition_ids()
        before = connections(event_hubs)

        def child() -> int:
            with endpoint.producer() as own:
                return 0 if own.shared_connection is not parent.shared_connection and own.get_partition_ids() == ids else 2

        assert fork_run(child) == 0
        assert connections(event_hubs) - before == 1  # the child's own
        assert parent.get_partition_properties(ids[0])["id"] == ids[0]  # the parent's connection is still its own
