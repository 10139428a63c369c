"""The ingest run's mirrored blob checkpoints, as the Python and JavaScript SDKs' event processors read them."""

from __future__ import annotations

import json
import threading

from azure.eventhub import EventHubConsumerClient
from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore
from azure.storage.blob import ContainerClient
from conftest import ingest, publish, stamped, table_rows

from airflow_provider_eh.client.endpoint import EventHubsEndpoint

OLD = 6  # per partition, ingested by the provider
NEW = 3  # per partition, published after the ingestion
PARTITIONS = "01"


def python_processor_reads(eh_conn_str: str, azurite, container: str, count: int, wait: float = 20.0) -> list[str]:
    """Ids the Python SDK's processor (``BlobCheckpointStore``, earliest where no checkpoint) receives: ``count``, then a second more."""
    store = BlobCheckpointStore.from_connection_string(azurite.connection_string, container)
    client = EventHubConsumerClient.from_connection_string(
        eh_conn_str, consumer_group="$Default", checkpoint_store=store,
        load_balancing_strategy="greedy", load_balancing_interval=1,
    )
    ids: list[str] = []
    enough = threading.Event()

    def on_event(context, event) -> None:
        if event is not None:
            ids.append(json.loads(event.body_as_str())["id"])
            if len(ids) >= count:
                enough.set()

    with client:
        worker = threading.Thread(target=client.receive, kwargs={"on_event": on_event, "starting_position": "-1",
                                                                  "max_wait_time": 1}, daemon=True)
        worker.start()
        if enough.wait(wait):
            enough.clear()
            enough.wait(1.5)  # any event beyond the new ones would arrive here
    worker.join(10)
    return ids


def test_python_and_javascript_processors_resume_from_the_ingest_runs_mirrored_checkpoints(
    eh_conn_str, sink_db, azurite, container, event_hubs, hub, js
):
    publish(eh_conn_str, {p: stamped(p, OLD) for p in PARTITIONS})
    ingest(eh_conn_str, sink_db, container=ContainerClient.from_connection_string(azurite.connection_string, container))
    assert len(table_rows(sink_db)) == OLD * len(PARTITIONS)
    publish(eh_conn_str, {p: stamped(p, NEW, start=OLD) for p in PARTITIONS})
    new = sorted(f"p{p}-{i}" for p in PARTITIONS for i in range(OLD, OLD + NEW))

    # neither processor checkpoints: each one's start is the mirror's, and both may start from it
    assert sorted(python_processor_reads(eh_conn_str, azurite, container, len(new))) == new

    (resumed,) = js(event_hubs, hub, [{
        "op": "resumeFromCheckpoints", "consumerGroup": "$Default", "storageConnectionString": azurite.connection_string,
        "container": container, "count": len(new), "waitMs": 20000,
    }], timeout=40)
    assert resumed["errors"] == []
    assert sorted(json.loads(e["body"])["id"] for e in resumed["events"]) == new


def test_a_mirrored_checkpoint_missing_under_one_spelling_is_restored_by_the_next_run(eh_conn_str, sink_db, azurite, container, hub):
    blobs = ContainerClient.from_connection_string(azurite.connection_string, container)
    publish(eh_conn_str, {"0": stamped("0", OLD)})
    ingest(eh_conn_str, sink_db, container=blobs)
    host, port = EventHubsEndpoint.from_connection_string(eh_conn_str).fully_qualified_namespace.rsplit(":", 1)
    spellings = [f"{host}:{port}/{hub}/$default/checkpoint/0".lower(), f"{host}/{hub}/$default/checkpoint/0".lower()]
    # as after a crash between the two writes: the checkpoint the JavaScript SDK reads is gone
    blobs.delete_blob(spellings[1])

    summary = ingest(eh_conn_str, sink_db, container=blobs)

    assert summary["events"] == 0
    for name in spellings:
        assert blobs.get_blob_client(name).get_blob_properties().metadata["sequencenumber"] == str(OLD - 1)
