"""Unit tests of the emulator's message surgery, frame splitting, partition log, filters and SAS checks."""

from __future__ import annotations

import time

import pytest
from azure.eventhub._pyamqp import _decode, _encode
from azure.eventhub._pyamqp.message import Message, Properties
from eventhubs_local import codec, events, frames
from eventhubs_local.attach import parse_start
from eventhubs_local.auth import AuthError, SasValidator, sign
from eventhubs_local.entities import Refused as LinkRefused
from eventhubs_local.log import PartitionLog


def _encoded(message: Message) -> bytes:
    return bytes(_encode.encode_payload(bytearray(), message))


def test_stored_event_carries_broker_annotations_and_keeps_client_sections():
    payload = _encoded(Message(
        properties=Properties(message_id="m1"), application_properties={"k": "v"}, data=[b"body"],
        message_annotations={"custom": "x", "x-opt-partition-key": "pk-1"}))
    event = events.parse_event(payload)
    assert event.partition_key == b"pk-1"
    decoded = _decode.decode_payload(memoryview(event.stored(7, 1234, 1700000000000, None)))
    annotations = decoded.message_annotations
    assert annotations[b"x-opt-sequence-number"] == 7
    assert annotations[b"x-opt-offset"] == b"1234"
    assert annotations[b"x-opt-enqueued-time"] == 1700000000000
    assert annotations[b"x-opt-partition-key"] == b"pk-1"
    assert annotations[b"custom"] == b"x"
    assert decoded.data == [b"body"]
    assert decoded.application_properties == {b"k": b"v"}
    assert decoded.properties.message_id == b"m1"


def test_batch_is_split_into_its_inner_messages_with_the_batch_partition_key():
    inner = [_encoded(Message(data=[f"e{i}".encode()])) for i in range(3)]
    batch = _encoded(Message(data=inner, message_annotations={"x-opt-partition-key": "k"}))
    parts, key = events.batch_parts(batch)
    assert [bytes(p) for p in parts] == inner
    assert key == b"k"


@pytest.mark.parametrize("payload", [b"", b"\x01\x02", b"\x00\x53\x75\xa0\x10abc", b"\x00\x53\x99\x45"])
def test_malformed_messages_raise_codec_errors(payload):
    with pytest.raises(codec.CodecError):
        events.parse_event(payload)


def test_large_delivery_is_split_into_frames_below_the_peer_max_frame_size():
    payload = bytes(range(256)) * 40  # 10 KiB
    chunks = frames.transfer_frames(0, 3, 9, payload, 4096)
    assert len(chunks) == 3 and all(len(f) <= 4096 for f in chunks)
    rebuilt = b""
    for i, frame in enumerate(chunks):
        fields = _decode.decode_frame(memoryview(frame[8:]))[1]
        assert fields[0] == 3 and fields[1] == 9 and fields[4] is True
        assert fields[5] is (i < 2)  # more
        rebuilt += bytes(fields[11])
    assert rebuilt == payload


def _append(log: PartitionLog, bodies: list[bytes], now_ms: int | None = None) -> None:
    log.append([(lambda s, o, t, b=b: b) for b in bodies], now_ms)


def test_log_offsets_are_byte_positions_and_survive_reopen(tmp_path):
    log = PartitionLog(tmp_path, segment_bytes=100)
    _append(log, [b"a" * 50, b"b" * 50])
    _append(log, [b"c" * 50])  # second segment (the first is full)
    assert list(log.offsets) == [0, 74, 148]
    assert len(log.segments) == 2
    log.close()
    again = PartitionLog(tmp_path, segment_bytes=100)
    assert (again.begin_seq, again.next_seq, list(again.offsets)) == (0, 3, [0, 74, 148])
    assert [bytes(p) for p in again.read(1, 10)] == [b"b" * 50]  # a read stops at a segment end
    assert [bytes(p) for p in again.read(2, 10)] == [b"c" * 50]


def test_retention_by_size_drops_head_segments_and_moves_begin(tmp_path):
    log = PartitionLog(tmp_path, segment_bytes=100)
    for i in range(5):
        _append(log, [bytes([65 + i]) * 90])
    assert log.trim(None, 250) == 3
    assert log.begin_seq == 3 and log.next_seq == 5
    assert [bytes(p)[:1] for p in log.read(0, 10)] == [b"D"]


def test_selector_filters_map_to_start_sequence_numbers(tmp_path):
    log = PartitionLog(tmp_path)
    _append(log, [b"x" * 10], now_ms=1000)
    _append(log, [b"y" * 10], now_ms=2000)
    _append(log, [b"z" * 10], now_ms=3000)
    key = b"apache.org:selector-filter:string"

    def start(expr: str) -> int:
        return parse_start([None] * 7 + [{key: expr.encode()}], log)

    assert start("amqp.annotation.x-opt-offset > '-1'") == 0
    assert start("amqp.annotation.x-opt-offset > '@latest'") == 3
    assert start("amqp.annotation.x-opt-offset >= '34'") == 1
    assert start("amqp.annotation.x-opt-offset > '34'") == 2
    assert start("amqp.annotation.x-opt-sequence-number >= '1'") == 1
    assert start("amqp.annotation.x-opt-sequence-number > '1'") == 2
    assert start("amqp.annotation.x-opt-enqueued-time >= '2000'") == 1
    assert start("amqp.annotation.x-opt-enqueued-time > '2000'") == 2
    with pytest.raises(LinkRefused):
        start("amqp.annotation.x-opt-offset = 'x'")


def test_sas_validator_checks_key_hub_and_expiry():
    validator = SasValidator("k", "secret")
    good = sign("sb://host:1/orders", "k", "secret", int(time.time()) + 60)
    assert validator.validate(good, "sb://host:1/orders/consumergroups/$default") == "orders"
    with pytest.raises(AuthError, match="not for hub"):
        validator.validate(good, "sb://host:1/audit")
    with pytest.raises(AuthError, match="signature"):
        validator.validate(sign("sb://host:1/orders", "k", "other", int(time.time()) + 60), "sb://host:1/orders")
    with pytest.raises(AuthError, match="expired"):
        validator.validate(sign("sb://host:1/orders", "k", "secret", int(time.time()) - 1), "sb://host:1/orders")
