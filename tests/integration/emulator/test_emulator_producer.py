"""Hub and partition properties and every way of sending, through the real sync and async SDK."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from azure.eventhub import EventData, EventHubProducerClient
from azure.eventhub.aio import EventHubProducerClient as AsyncProducer
from azure.eventhub.exceptions import ConnectError, EventDataSendError

MIB = 1024 * 1024


def test_hub_properties_list_every_partition(hub):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        props = producer.get_eventhub_properties()
    assert props["eventhub_name"] == hub.name
    assert props["partition_ids"] == ["0", "1", "2", "3"]
    assert props["created_at"].year >= 2024


def test_partition_properties_follow_sends(hub):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        empty = producer.get_partition_properties("2")
        batch = producer.create_batch(partition_id="2")
        for i in range(3):
            batch.add(EventData(f"e{i}"))
        producer.send_batch(batch)
        after = producer.get_partition_properties("2")
    assert empty["is_empty"] is True
    assert empty["last_enqueued_sequence_number"] == -1
    assert after["is_empty"] is False
    assert after["beginning_sequence_number"] == 0
    assert after["last_enqueued_sequence_number"] == 2
    assert int(after["last_enqueued_offset"]) > 0
    assert after["last_enqueued_time_utc"] > empty["last_enqueued_time_utc"]


def test_async_client_reads_properties_and_sends(hub, emulator):
    async def run():
        async with AsyncProducer.from_connection_string(hub.conn_str) as producer:
            props = await producer.get_eventhub_properties()
            batch = await producer.create_batch(partition_id="1")
            batch.add(EventData(b"async-1"))
            batch.add(EventData(b"async-2"))
            await producer.send_batch(batch)
            await producer.send_event(EventData(b"async-3"), partition_id="1")
            return props, await producer.get_partition_properties("1")

    props, partition = asyncio.run(run())
    assert props["partition_ids"] == ["0", "1", "2", "3"]
    assert partition["last_enqueued_sequence_number"] == 2


def test_send_by_partition_id_lands_in_that_partition(hub, receive):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        producer.send_event(EventData("to-three"), partition_id="3")
        counts = {pid: producer.get_partition_properties(pid)["last_enqueued_sequence_number"] for pid in "0123"}
    assert counts == {"0": -1, "1": -1, "2": -1, "3": 0}
    [event] = receive(hub.conn_str, "3", 1)
    assert event.body_as_str() == "to-three"


def test_same_partition_key_always_lands_in_one_partition_and_is_delivered(hub, receive):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        for i in range(3):
            batch = producer.create_batch(partition_key="customer-42")
            batch.add(EventData(f"k{i}"))
            producer.send_batch(batch)
        producer.send_event(EventData("k3"), partition_key="customer-42")
        last = {pid: producer.get_partition_properties(pid)["last_enqueued_sequence_number"] for pid in "0123"}
    used = [pid for pid, seq in last.items() if seq >= 0]
    assert len(used) == 1 and last[used[0]] == 3
    events = receive(hub.conn_str, used[0], 4)
    assert [e.body_as_str() for e in events] == ["k0", "k1", "k2", "k3"]
    assert {e.partition_key for e in events} == {b"customer-42"}  # the SDK returns annotation strings as bytes


def test_round_robin_sends_spread_over_all_partitions(hub):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        for i in range(8):
            batch = producer.create_batch()
            batch.add(EventData(f"rr{i}"))
            producer.send_batch(batch)
        sizes = Counter({pid: producer.get_partition_properties(pid)["last_enqueued_sequence_number"] + 1
                         for pid in "0123"})
    assert sum(sizes.values()) == 8
    assert all(count == 2 for count in sizes.values())


def test_batch_near_the_one_mib_limit_is_accepted(hub, receive):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        batch = producer.create_batch(partition_id="0")
        assert batch.max_size_in_bytes == MIB
        batch.add(EventData(b"y" * (MIB - 1024)))
        assert batch.size_in_bytes > MIB - 1024
        producer.send_batch(batch)
    [event] = receive(hub.conn_str, "0", 1)
    assert len(b"".join(event.body)) == MIB - 1024


def test_batch_over_the_limit_raises_the_sdk_size_error(hub):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        batch = producer.create_batch(partition_id="0")
        with pytest.raises(ValueError, match="size limit"):
            batch.add(EventData(b"z" * MIB))


def test_single_event_over_the_limit_is_rejected_by_the_server(hub):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        with pytest.raises(EventDataSendError, match="exceeds the limit") as info:
            producer.send_event(EventData(b"z" * (MIB + 10)), partition_id="0")
        assert "LinkMessageSizeExceeded" in str(info.value) or "message-size-exceeded" in str(info.value)
        assert producer.get_partition_properties("0")["is_empty"] is True


def test_unknown_hub_answers_not_found(emulator):
    with EventHubProducerClient.from_connection_string(emulator.connection_string("no-such-hub"), retry_total=0) as producer:
        with pytest.raises(ConnectError, match="404"):
            producer.get_eventhub_properties()


def test_hubs_created_at_run_time_are_listed_by_the_admin_endpoint(hub, emulator):
    names = [h["name"] for h in emulator.admin.list_hubs()]
    assert hub.name in names
    again = emulator.admin.create_hub(hub.name, partitions=4)
    assert again["consumer_groups"] == ["$Default", "analytics"]
