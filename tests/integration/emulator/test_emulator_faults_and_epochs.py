"""Injected faults give the client-side symptom they model; higher owner levels steal partitions."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient
from azure.eventhub.exceptions import EventHubError


def _last_seq(hub, partition="0"):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        return producer.get_partition_properties(partition)["last_enqueued_sequence_number"]


def test_drop_after_closes_the_connection_but_the_event_landed(hub, emulator):
    emulator.admin.set_fault("drop_after", hub=hub.name, transfers=1)
    producer = EventHubProducerClient.from_connection_string(hub.conn_str, retry_total=0)
    with producer, pytest.raises(EventHubError) as info:
        producer.send_event(EventData("lost-ack"), partition_id="0")
    assert "onnection" in str(info.value) or "Socket" in str(info.value)
    assert _last_seq(hub) == 0  # stored although the client saw a failure
    assert emulator.admin.faults() == []  # a one-shot fault


def test_store_no_ack_times_out_the_client_although_the_event_landed(hub, emulator):
    emulator.admin.set_fault("store_no_ack", hub=hub.name)
    producer = EventHubProducerClient.from_connection_string(hub.conn_str, retry_total=0)
    started = time.monotonic()
    with producer, pytest.raises(EventHubError) as info:
        producer.send_event(EventData("unacknowledged"), partition_id="0", timeout=3)
    assert time.monotonic() - started >= 2.5
    assert "imeout" in str(info.value) or "timed out" in str(info.value)
    emulator.admin.clear_faults()
    assert _last_seq(hub) == 0


def test_server_busy_rejects_without_storing(hub, emulator):
    emulator.admin.set_fault("server_busy", hub=hub.name)
    producer = EventHubProducerClient.from_connection_string(hub.conn_str, retry_total=0)
    with producer, pytest.raises(EventHubError) as info:
        producer.send_event(EventData("busy"), partition_id="0")
    assert "server-busy" in str(info.value) or "ServerBusy" in str(info.value)
    emulator.admin.clear_faults()
    assert _last_seq(hub) == -1


def test_fault_scoped_to_another_hub_leaves_this_hub_alone(hub, emulator):
    other = f"hub-{uuid.uuid4().hex[:12]}"
    emulator.admin.create_hub(other, partitions=1)
    emulator.admin.set_fault("server_busy", hub=other)
    with EventHubProducerClient.from_connection_string(hub.conn_str, retry_total=0) as producer:
        producer.send_event(EventData("fine"), partition_id="0")
    assert _last_seq(hub) == 0


def test_delay_ack_delays_the_acknowledgement(hub, emulator):
    emulator.admin.set_fault("delay_ack", hub=hub.name, ms=1500)
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        producer.get_eventhub_properties()
        started = time.monotonic()
        producer.send_event(EventData("slow"), partition_id="0")
        elapsed = time.monotonic() - started
    assert elapsed >= 1.4
    assert _last_seq(hub) == 0


def test_unknown_fault_kind_is_refused_with_a_clear_error(emulator):
    from eventhubs_local import EmulatorAdminError

    with pytest.raises(EmulatorAdminError, match="unknown fault kind"):
        emulator.admin.set_fault("explode")


class _Receiver:
    """A sync consumer on one partition in a thread, recording events and errors."""

    def __init__(self, conn_str, owner_level=None):
        self.client = EventHubConsumerClient.from_connection_string(conn_str, consumer_group="$Default")
        self.events, self.errors = [], []
        self.got_error = threading.Event()
        kwargs = dict(partition_id="0", starting_position="-1", on_error=self._on_error)
        if owner_level is not None:
            kwargs["owner_level"] = owner_level
        self.thread = threading.Thread(target=self.client.receive, args=(self._on_event,), kwargs=kwargs, daemon=True)
        self.thread.start()

    def _on_event(self, _ctx, event):
        if event is not None:
            self.events.append(event)

    def _on_error(self, _ctx, error):
        self.errors.append(error)
        self.got_error.set()

    def close(self):
        self.client.close()
        self.thread.join(15)


def test_higher_owner_level_steals_the_partition(hub, emulator, until):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        producer.send_event(EventData("one"), partition_id="0")
    low = _Receiver(hub.conn_str, owner_level=1)
    try:
        assert until(lambda: len(low.events) == 1, 15)
        high = _Receiver(hub.conn_str, owner_level=2)
        try:
            assert low.got_error.wait(15)
            assert "stolen" in str(low.errors[0]).lower() or "owner level" in str(low.errors[0])
            assert until(lambda: len(high.events) == 1, 15)
            with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
                producer.send_event(EventData("two"), partition_id="0")
            assert until(lambda: len(high.events) == 2, 15)
        finally:
            high.close()
    finally:
        low.close()
    assert [e.body_as_str() for e in high.events] == ["one", "two"]


def test_lower_owner_level_is_refused_while_a_higher_one_holds(hub, emulator, until):
    high = _Receiver(hub.conn_str, owner_level=5)
    try:
        assert until(lambda: emulator.admin.receivers(hub.name), 30), "the owner-level-5 receiver was never admitted"
        low = _Receiver(hub.conn_str, owner_level=3)
        try:
            assert low.got_error.wait(20)
            assert "owner level" in str(low.errors[0]) or "stolen" in str(low.errors[0]).lower()
            assert not high.errors
        finally:
            low.close()
    finally:
        high.close()
