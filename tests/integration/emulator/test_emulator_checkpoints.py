"""The SDK's BlobCheckpointStore on Azurite resumes from checkpoints after consumer and server restart."""

from __future__ import annotations

import threading
import uuid

from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient
from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore
from azure.storage.blob import BlobServiceClient


def _consume(conn_str, store, stop_after_seq, checkpoint_at_seq=None, timeout=40):
    """Load-balanced receive with the checkpoint store until ``stop_after_seq`` arrives."""
    client = EventHubConsumerClient.from_connection_string(
        conn_str, consumer_group="$Default", checkpoint_store=store, load_balancing_interval=1)
    seen: list[int] = []
    done = threading.Event()

    def on_event(ctx, event):
        if event is None:
            return
        seen.append(event.sequence_number)
        if checkpoint_at_seq is not None and event.sequence_number == checkpoint_at_seq:
            ctx.update_checkpoint(event)
        if event.sequence_number >= stop_after_seq:
            done.set()

    worker = threading.Thread(target=client.receive, args=(on_event,), kwargs={"starting_position": "-1"},
                              daemon=True)
    worker.start()
    done.wait(timeout)
    client.close()
    worker.join(20)
    return seen


def test_consumer_resumes_from_blob_checkpoint_after_consumer_and_server_restart(private_emulator, emulator_azurite):
    em = private_emulator(hubs={"cp": 1})
    conn_str = em.connection_string("cp")
    container = f"checkpoints-{uuid.uuid4().hex[:8]}"
    BlobServiceClient.from_connection_string(emulator_azurite.connection_string).create_container(container)
    store = BlobCheckpointStore.from_connection_string(emulator_azurite.connection_string, container)

    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        batch = producer.create_batch(partition_id="0")
        for i in range(10):
            batch.add(EventData(f"c{i}"))
        producer.send_batch(batch)

    first = _consume(conn_str, store, stop_after_seq=9, checkpoint_at_seq=5)
    assert first[:10] == list(range(10))
    checkpoints = store.list_checkpoints(f"127.0.0.1:{em.port}", "cp", "$Default")
    assert [c["sequence_number"] for c in checkpoints] == [5]

    em.restart()  # server down and up again, same port and data
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        producer.send_event(EventData("after"), partition_id="0")

    second = _consume(conn_str, BlobCheckpointStore.from_connection_string(emulator_azurite.connection_string,
                                                                           container), stop_after_seq=10)
    assert second == [6, 7, 8, 9, 10]
