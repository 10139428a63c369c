"""Receiving from every kind of starting position, with bodies, properties and annotations checked."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time

import pytest
from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient


@pytest.fixture
def five_events(hub, receive):
    """Five events in partition 1 with bodies, application properties and a partition key; their metadata."""
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        for i in range(5):
            batch = producer.create_batch(partition_id="1")
            event = EventData(f"event-{i}")
            event.properties = {"index": i, "kind": "test"}
            batch.add(event)
            producer.send_batch(batch)
            time.sleep(0.01)  # distinct enqueued times
    events = receive(hub.conn_str, "1", 5)
    assert len(events) == 5
    return events


def _bodies(events):
    return [e.body_as_str() for e in events]


def test_receive_from_start_returns_every_event_with_metadata(hub, five_events):
    events = five_events
    assert _bodies(events) == [f"event-{i}" for i in range(5)]
    assert [e.sequence_number for e in events] == [0, 1, 2, 3, 4]
    offsets = [int(e.offset) for e in events]
    assert offsets == sorted(offsets) and offsets[0] == 0 and len(set(offsets)) == 5
    assert all(isinstance(e.offset, str) for e in events)
    assert [e.properties[b"index"] for e in events] == [0, 1, 2, 3, 4]
    assert all(e.properties[b"kind"] == b"test" for e in events)
    times = [e.enqueued_time for e in events]
    assert times == sorted(times)
    assert abs(times[-1] - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(minutes=1)
    assert all(e.partition_key is None for e in events)


def test_receive_from_inclusive_sequence_number_starts_at_that_event(hub, five_events, receive):
    events = receive(hub.conn_str, "1", 3, starting_position=2, inclusive=True)
    assert [e.sequence_number for e in events] == [2, 3, 4]


def test_receive_from_exclusive_sequence_number_starts_after_that_event(hub, five_events, receive):
    events = receive(hub.conn_str, "1", 2, starting_position=2, inclusive=False)
    assert [e.sequence_number for e in events] == [3, 4]


def test_receive_from_inclusive_offset_starts_at_that_event(hub, five_events, receive):
    events = receive(hub.conn_str, "1", 2, starting_position=five_events[3].offset, inclusive=True)
    assert _bodies(events) == ["event-3", "event-4"]
    assert events[0].offset == five_events[3].offset


def test_receive_from_exclusive_offset_starts_after_that_event(hub, five_events, receive):
    events = receive(hub.conn_str, "1", 1, starting_position=five_events[3].offset, inclusive=False)
    assert _bodies(events) == ["event-4"]


def test_receive_from_enqueued_time_inclusive_and_exclusive(hub, five_events, receive):
    at = five_events[2].enqueued_time
    inclusive = receive(hub.conn_str, "1", 3, starting_position=at, inclusive=True)
    exclusive = receive(hub.conn_str, "1", 2, starting_position=at, inclusive=False)
    assert inclusive[0].sequence_number == 2
    assert exclusive[0].sequence_number == 3


def test_receive_from_latest_gets_only_new_events(hub, five_events, until):
    client = EventHubConsumerClient.from_connection_string(hub.conn_str, consumer_group="$Default")
    got: list[EventData] = []
    ready = threading.Event()

    def on_event(_ctx, event):
        if event is not None:
            got.append(event)
            ready.set()

    worker = threading.Thread(target=client.receive, args=(on_event,),
                              kwargs=dict(partition_id="1", starting_position="@latest"), daemon=True)
    worker.start()
    # "@latest" is fixed when the endpoint admits the link: send only after that
    assert until(lambda: hub.emulator.admin.receivers(hub.name), 30), "the @latest receiver was never admitted"
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        producer.send_event(EventData("fresh"), partition_id="1")
    ready.wait(15)
    client.close()
    worker.join(15)
    assert _bodies(got) == ["fresh"]
    assert got[0].sequence_number == 5


def test_receive_in_a_named_consumer_group(hub, five_events, receive):
    events = receive(hub.conn_str, "1", 5, consumer_group="analytics")
    assert _bodies(events) == [f"event-{i}" for i in range(5)]


def test_unknown_consumer_group_is_not_found(hub):
    client = EventHubConsumerClient.from_connection_string(hub.conn_str, consumer_group="nope", retry_total=0)
    errors = []
    done = threading.Event()

    def on_error(_ctx, error):
        errors.append(error)
        done.set()

    worker = threading.Thread(target=client.receive, args=(lambda *_: None,),
                              kwargs=dict(partition_id="0", on_error=on_error), daemon=True)
    worker.start()
    done.wait(20)
    client.close()
    worker.join(15)
    assert errors and "could not be found" in str(errors[0])


def test_async_consumer_receives_from_sequence_number(hub, five_events, areceive):
    events = asyncio.run(areceive(hub.conn_str, "1", 2, starting_position=3, inclusive=True))
    assert [e.sequence_number for e in events] == [3, 4]
    assert _bodies(events) == ["event-3", "event-4"]


def test_async_consumer_receives_from_offset_and_enqueued_time(hub, five_events, areceive):
    by_offset = asyncio.run(areceive(hub.conn_str, "1", 1, starting_position=five_events[3].offset))
    by_time = asyncio.run(areceive(hub.conn_str, "1", 3, starting_position=five_events[2].enqueued_time,
                                   inclusive=True))
    assert [e.sequence_number for e in by_offset] == [4]
    assert [e.sequence_number for e in by_time] == [2, 3, 4]
