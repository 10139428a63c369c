"""Acknowledged events and run-time hubs survive restarts and crashes; retention trims the head."""

from __future__ import annotations

import os
import time

from azure.eventhub import EventData, EventHubProducerClient


def _send(conn_str: str, partition: str, bodies: list[str], separately: bool = False) -> None:
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        if separately:
            for body in bodies:
                producer.send_event(EventData(body), partition_id=partition)
            return
        batch = producer.create_batch(partition_id=partition)
        for body in bodies:
            batch.add(EventData(body))
        producer.send_batch(batch)


def _props(conn_str: str, partition: str = "0") -> dict:
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        return producer.get_partition_properties(partition)


def test_sigkill_then_restart_keeps_every_acknowledged_event_and_runtime_hubs(private_emulator, receive):
    em = private_emulator()
    em.admin.create_hub("durable", partitions=2, consumer_groups=["audit"])
    bodies = [f"d{i}" for i in range(50)]
    _send(em.connection_string("durable"), "1", bodies[:25])
    _send(em.connection_string("durable"), "1", bodies[25:], separately=True)
    port = em.port
    em.kill()  # no chance to flush or close anything
    em.start()
    assert em.port == port
    assert [h["name"] for h in em.admin.list_hubs()] == ["durable"]
    events = receive(em.connection_string("durable"), "1", 50, consumer_group="audit")
    assert [e.body_as_str() for e in events] == bodies
    assert [e.sequence_number for e in events] == list(range(50))
    _send(em.connection_string("durable"), "1", ["after-restart"])
    assert _props(em.connection_string("durable"), "1")["last_enqueued_sequence_number"] == 50


def test_graceful_restart_keeps_offsets_and_continues_numbering(private_emulator, receive):
    em = private_emulator("--fsync", "always", hubs={"h": 1})
    _send(em.connection_string("h"), "0", ["a", "b"])
    before = receive(em.connection_string("h"), "0", 2)
    em.restart()
    _send(em.connection_string("h"), "0", ["c"])
    after = receive(em.connection_string("h"), "0", 3)
    assert [e.offset for e in after[:2]] == [e.offset for e in before]
    assert [e.sequence_number for e in after] == [0, 1, 2]
    assert int(after[2].offset) > int(after[1].offset)


def test_torn_tail_record_is_cut_off_on_recovery(private_emulator, receive):
    em = private_emulator(hubs={"h": 1})
    _send(em.connection_string("h"), "0", ["whole-1", "whole-2"])
    em.kill()
    partition_dir = em.data_dir / "hubs" / "h" / "0"
    [segment] = sorted(partition_dir.iterdir())
    with open(segment, "ab") as fh:  # a crash in the middle of writing the next record
        fh.write(b"\x00\x00\x01\x00\x12\x34")
    size_with_garbage = segment.stat().st_size
    em.start()
    assert segment.stat().st_size == size_with_garbage - 6
    events = receive(em.connection_string("h"), "0", 2)
    assert [e.body_as_str() for e in events] == ["whole-1", "whole-2"]
    _send(em.connection_string("h"), "0", ["next"])
    assert _props(em.connection_string("h"))["last_enqueued_sequence_number"] == 2


def test_size_retention_trims_the_head_and_moves_begin_sequence_number(private_emulator, receive):
    em = private_emulator("--segment-bytes", "1000", "--retention-bytes", "2500", hubs={"h": 1})
    _send(em.connection_string("h"), "0", [f"{i:03d}" + "r" * 200 for i in range(30)], separately=True)
    em.admin.apply_retention()
    props = _props(em.connection_string("h"))
    begin = props["beginning_sequence_number"]
    assert 0 < begin < 30
    assert props["last_enqueued_sequence_number"] == 29
    stored = sum(f.stat().st_size for f in (em.data_dir / "hubs" / "h" / "0").iterdir())
    assert stored <= 2500
    events = receive(em.connection_string("h"), "0", 30 - begin)
    assert events[0].sequence_number == begin
    assert events[0].body_as_str().startswith(f"{begin:03d}")
    assert events[-1].sequence_number == 29


def test_time_retention_drops_segments_older_than_the_limit(private_emulator):
    em = private_emulator("--segment-bytes", "300", "--retention-seconds", "1", hubs={"h": 1})
    _send(em.connection_string("h"), "0", ["old-" + "o" * 300, "old2-" + "o" * 300], separately=True)
    time.sleep(1.5)
    _send(em.connection_string("h"), "0", ["new-" + "n" * 300], separately=True)
    em.admin.apply_retention()
    props = _props(em.connection_string("h"))
    assert props["beginning_sequence_number"] == 2
    assert props["last_enqueued_sequence_number"] == 2
    assert len(os.listdir(em.data_dir / "hubs" / "h" / "0")) == 1
