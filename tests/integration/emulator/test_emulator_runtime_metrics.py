"""Receiver runtime metrics: a receiver that asks (``com.microsoft:enable-receiver-runtime-metric``) gets the
partition's last enqueued event with every delivery, in both Microsoft SDKs' own fields.

Python: ``track_last_enqueued_event_properties=True`` fills ``PartitionContext.last_enqueued_event_properties``;
JavaScript: ``trackLastEnqueuedEventProperties: true`` fills ``PartitionContext.lastEnqueuedEventProperties``.
The figures must be the partition's, as ``get_partition_properties`` reads them; a receiver that does
not ask gets none.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient
from azure.eventhub.amqp import AmqpMessageHeader


def _send(conn_str: str, count: int) -> dict:
    """``count`` events to partition 0, every other one with a message header (delivery annotations go after it)."""
    events = [EventData(f"m{i}") for i in range(count)]
    for event in events[::2]:
        event.raw_amqp_message.header = AmqpMessageHeader(durable=True)
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        producer.send_batch(events, partition_id="0")
        return producer.get_partition_properties("0")


def _python_receive(conn_str: str, count: int, track: bool) -> list:
    client = EventHubConsumerClient.from_connection_string(conn_str, consumer_group="$Default")
    seen: list = []

    def on_event(context, event):
        if event is not None:
            seen.append(context.last_enqueued_event_properties)

    thread = threading.Thread(target=client.receive, args=(on_event,), daemon=True,
                              kwargs={"partition_id": "0", "starting_position": "-1",
                                      "track_last_enqueued_event_properties": track})
    thread.start()
    deadline = time.monotonic() + 20
    while len(seen) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    client.close()
    thread.join(10)
    assert len(seen) == count, f"received {len(seen)} of {count}"
    return seen


def test_the_python_sdk_gets_the_partitions_last_enqueued_event_with_every_delivery(hub):
    props = _send(hub.conn_str, 40)
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    tracked = _python_receive(hub.conn_str, 40, track=True)
    last = tracked[-1]
    assert last["sequence_number"] == props["last_enqueued_sequence_number"] == 39
    assert last["offset"] == props["last_enqueued_offset"]
    assert last["enqueued_time"] == props["last_enqueued_time_utc"]
    assert last["retrieval_time"] >= before  # read when delivered, not when stored
    assert all(t["sequence_number"] == 39 for t in tracked)
    assert _python_receive(hub.conn_str, 40, track=False) == [None] * 40


def test_the_javascript_sdk_gets_the_partitions_last_enqueued_event_with_every_delivery(hub, emulator, js):
    props = _send(hub.conn_str, 25)
    reads = [{"partitionId": "0", "start": "earliest", "count": 25, "waitMs": 5000, "trackLastEnqueued": True},
             {"partitionId": "0", "start": "earliest", "count": 25, "waitMs": 5000}]
    (result,) = js(emulator, hub.name, [{"op": "receive", "reads": reads}], timeout=60)
    tracked, plain = result["reads"]
    assert not tracked["errors"] and len(tracked["bodies"]) == 25
    last = tracked["lastEnqueued"]
    assert last["sequenceNumber"] == props["last_enqueued_sequence_number"] == 24
    assert last["offset"] == props["last_enqueued_offset"]
    assert datetime.fromisoformat(last["enqueuedOn"].replace("Z", "+00:00")) == props["last_enqueued_time_utc"]
    assert last["retrievedOn"] is not None
    assert plain["lastEnqueued"] is None and len(plain["bodies"]) == 25
