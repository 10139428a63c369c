"""Ownership claims against real Azurite: one winner per partition, whatever the order of the racers;
a partition an instance stops working on is given up at once."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore
from azure.storage.blob import ContainerClient
from conftest import ingest, publish, stamped

from airflow_provider_eh.checkpoints.blob_layout import CheckpointReader
from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.ingest import SqlIngestStore, Stream
from airflow_provider_eh.ingest.mirror import write_checkpoint
from airflow_provider_eh.ingest.ownership import PartitionOwnership
from airflow_provider_eh.steps import observe

NAMESPACE = "127.0.0.1:5672"
HUB = "orders"
GROUP = "$Default"


@pytest.fixture
def instances(azurite, container):
    def make(owner_id: str) -> PartitionOwnership:
        client = ContainerClient.from_connection_string(azurite.connection_string, container)
        store = BlobCheckpointStore(client.url, container, container_client=client)
        return PartitionOwnership(
            store, CheckpointReader(client, NAMESPACE, HUB),
            fully_qualified_namespace=NAMESPACE, eventhub_name=HUB, consumer_group=GROUP, owner_id=owner_id, expiry=30,
        )

    return make


def test_a_first_claim_made_on_a_stale_listing_loses_to_the_instance_that_claimed_meanwhile(instances):
    # Both instances list before either claims: partition 0 has no ownership blob in either listing.
    first, late = instances("i0"), instances("i1")
    stale = late.list()
    assert first.claim(["0"], first.list()) == {"0"}
    # Azurite accepts the SDK's own first claim (set metadata with If-None-Match: *) on the blob i0
    # just created, so without a claim on the blob's ETag both would own the partition.
    assert late.claim(["0"], stale) == set()
    assert {p: c.owner_id for p, c in late.list().items()} == {"0": "i0"}
    assert "0" not in late.owned


def test_concurrent_first_claims_have_one_winner_per_partition(instances):
    racers = [instances(f"i{k}") for k in range(3)]
    partitions = [str(p) for p in range(24)]
    listings = [r.list() for r in racers]  # all empty: every claim is a first claim
    won: dict[str, set[str]] = {}

    def race(k: int) -> None:
        won[racers[k].owner_id] = racers[k].claim(partitions, listings[k])

    threads = [threading.Thread(target=race, args=(k,)) for k in range(len(racers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    owners = {p: c.owner_id for p, c in racers[0].list().items()}
    for p in partitions:
        winners = [o for o, ps in won.items() if p in ps]
        assert winners == [owners[p]], f"partition {p}: won by {winners}, blob names {owners.get(p)!r}"


def test_a_run_whose_batch_another_instance_committed_gives_the_partition_up_at_once(
    eh_conn_str, sink_db, azurite, container
):
    """The partition is left to the instance that committed it, or to any other run: its claim is
    released, not held until it expires (every later run would wait ``ownership_expiry`` for it)."""
    publish(eh_conn_str, {"0": stamped("0", 4)})
    endpoint = EventHubsEndpoint.from_connection_string(eh_conn_str)
    stream = Stream(endpoint.namespace, endpoint.eventhub_name, "$Default")
    client = ContainerClient.from_connection_string(azurite.connection_string, container)

    def another_instance_commits_first(step, batch, detail):
        if step == "ingest_received" and batch == 1:  # the run read its batch; another instance commits it first
            other = SqlIngestStore(sqlite3.connect(sink_db), stream)
            try:
                with other.transaction() as tx:
                    tx.advance_checkpoint(detail["partition"], -1, detail["last"], None, "other")
            finally:
                other.close()
            # and mirrors it to the blob checkpoint, so the run has no mirror to repair there
            write_checkpoint(BlobCheckpointStore(client.url, container, container_client=client),
                             endpoint.fully_qualified_namespace, endpoint.eventhub_name, "$Default",
                             detail["partition"], detail["last"], None)

    stop = observe(another_instance_commits_first)
    try:
        summary = ingest(eh_conn_str, sink_db, container=client, partition_ids=["0"], ownership_expiry=300)
    finally:
        stop()
    assert summary["partitions"]["0"]["batches"] == 0, summary  # its batch was rolled back
    ownership = CheckpointReader(client, endpoint.fully_qualified_namespace, endpoint.eventhub_name).read("$Default").ownership
    assert ownership["0"].owner_id == "", f"partition 0 is still claimed by {ownership['0'].owner_id!r}"
