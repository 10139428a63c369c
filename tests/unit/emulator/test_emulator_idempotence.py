"""The service side of the idempotent producer: duplicates dropped, gaps refused, lower owner levels
fenced, and producer groups rebuilt from what the partition's log stored."""

from __future__ import annotations

import pytest
from azure.eventhub._pyamqp import _encode
from azure.eventhub._pyamqp.message import Message
from eventhubs_local import codec, events, idempotence
from eventhubs_local.log import PartitionLog


def _event(producer_id: int, epoch: int, sequence: int) -> events.ParsedEvent:
    annotations = {
        idempotence.PRODUCER_ID: codec.long(producer_id),
        idempotence.PRODUCER_EPOCH: {_encode.TYPE: _encode.AMQPTypes.short, _encode.VALUE: epoch},
        idempotence.PRODUCER_SEQUENCE: {_encode.TYPE: _encode.AMQPTypes.int, _encode.VALUE: sequence},
    }
    return events.parse_event(bytes(_encode.encode_payload(bytearray(), Message(
        data=[f"e{sequence}".encode()], message_annotations=annotations))))


def _store(log: PartitionLog, events: list[events.ParsedEvent]) -> None:
    log.append([(lambda seq, off, ts, ev=ev: ev.stored(seq, off, ts, None)) for ev in events])


def test_duplicates_are_dropped_and_a_gap_is_refused(tmp_path):
    producers = idempotence.PartitionProducers(PartitionLog(tmp_path))
    group = producers.attach(None, None, None).group
    events = [_event(group.producer_id, 0, s) for s in (0, 1, 2)]
    assert producers.admit(group, 0, [idempotence.event_annotations(e) for e in events]) == [True, True, True]
    retry = [_event(group.producer_id, 0, s) for s in (1, 2, 3)]
    assert producers.admit(group, 0, [idempotence.event_annotations(e) for e in retry]) == [False, False, True]
    with pytest.raises(idempotence.OutOfOrder, match="5 .* last stored 3"):
        producers.admit(group, 0, [idempotence.event_annotations(_event(group.producer_id, 0, 5))])
    assert group.last_sequence == 3  # a refused delivery changes nothing


def test_a_higher_owner_level_fences_the_lower_one_on_attach_and_on_send(tmp_path):
    producers = idempotence.PartitionProducers(PartitionLog(tmp_path))
    group = producers.attach(None, 1, None).group
    again = producers.attach(group.producer_id, 2, None)
    assert again.group is group and again.epoch_raised and group.epoch == 2
    with pytest.raises(idempotence.Fenced):
        producers.admit(group, 1, [idempotence.event_annotations(_event(group.producer_id, 1, 0))])
    with pytest.raises(idempotence.Fenced):
        producers.attach(group.producer_id, 1, None)


def test_producer_groups_are_rebuilt_from_the_log_after_a_restart(tmp_path):
    log = PartitionLog(tmp_path)
    _store(log, [_event(7, 3, s) for s in range(4)])
    _store(log, [events.parse_event(bytes(_encode.encode_payload(bytearray(), Message(data=[b"plain"]))))])
    log.sync()
    log.close()

    producers = idempotence.PartitionProducers(PartitionLog(tmp_path))

    attached = producers.attach(7, None, None)
    group = attached.group
    assert (group.epoch, group.last_sequence, attached.sequence, attached.epoch_raised) == (3, 3, 3, False)
    assert producers.admit(group, 3, [idempotence.event_annotations(_event(7, 3, s)) for s in (3, 4)]) == [False, True]
    assert producers.attach(7, 3, 1).sequence == 1  # a client naming its own number continues from it


def _payload(sequence: int, producer_id: int = 7, epoch: int = 2, **more: object) -> bytes:
    annotations = {
        **{key.encode(): value for key, value in more.items()},
        idempotence.PRODUCER_ID: codec.long(producer_id),
        idempotence.PRODUCER_EPOCH: {_encode.TYPE: _encode.AMQPTypes.short, _encode.VALUE: epoch},
        idempotence.PRODUCER_SEQUENCE: {_encode.TYPE: _encode.AMQPTypes.int, _encode.VALUE: sequence},
    }
    return bytes(_encode.encode_payload(bytearray(), Message(data=[f"e{sequence}".encode()], message_annotations=annotations)))


def _fields(event: events.ParsedEvent) -> tuple:
    return event.head, event.extra_annotations, event.extra_count, event.tail, event.partition_key, event.producer


def _read_in_full(payload: bytes) -> events.ParsedEvent:
    events._SEEN.prefixes.clear()
    return events.parse_event(payload)


def test_a_senders_next_events_read_only_their_sequence_number_and_read_as_in_full(monkeypatch):
    """After a sender's first event, its next ones decode no map entry, and read exactly as a full read does."""
    senders = [
        {},
        {"x-opt-partition-key": "customer-9"},
        {"app-annotation": "kept", "x-opt-partition-key": "k"},
        {"producer_id": 8},
        {"epoch": 3},
    ]
    payloads = [_payload(seq, **{k: v for k, v in sender.items() if k in ("producer_id", "epoch")},
                         **{k: v for k, v in sender.items() if k not in ("producer_id", "epoch")})
                for sender in senders for seq in (0, 1, 127, 128, -1, 2**31 - 1, 40_000)]
    expected = [_fields(_read_in_full(p)) for p in payloads]

    events._SEEN.prefixes.clear()
    reads = []
    real_map_entries = events.map_entries
    monkeypatch.setattr(events, "map_entries", lambda *a: reads.append(1) or real_map_entries(*a))
    got = [_fields(events.parse_event(p)) for p in payloads]
    assert got == expected
    assert len(reads) == len(senders)  # one full read of the annotations per sender, then none
    stored = [events.parse_event(p).stored(5, 100, 0, None) for p in payloads]
    assert stored == [_read_in_full(p).stored(5, 100, 0, None) for p in payloads]


def test_annotations_that_only_look_like_a_known_senders_are_read_in_full():
    """Another count, trailing bytes, or the sequence key inside a value are not taken for a known sender."""
    first = _payload(1)
    events._SEEN.prefixes.clear()
    events.parse_event(first)
    assert events._SEEN.prefixes

    # the same entries but a map count of 8: a full read, which finds the map short of entries
    section_at = first.index(b"\x00\x53\x72") + 3
    assert first[section_at] == 0xC1
    miscounted = bytearray(first)
    miscounted[section_at + 2] = 8
    with pytest.raises(codec.CodecError):
        events.parse_event(bytes(miscounted))

    # the sequence key's bytes at the end of the map's last value, a string after the real number:
    # read in full (twice, nothing remembered from it), and right
    key = b"\xa3\x26com.microsoft:producer-sequence-number"
    annotations = {
        idempotence.PRODUCER_ID: codec.long(7),
        idempotence.PRODUCER_EPOCH: {_encode.TYPE: _encode.AMQPTypes.short, _encode.VALUE: 2},
        idempotence.PRODUCER_SEQUENCE: {_encode.TYPE: _encode.AMQPTypes.int, _encode.VALUE: 3},
        b"note": key + b"\x71\x00\x00\x00\x09",
    }
    sneaky = bytes(_encode.encode_payload(bytearray(), Message(data=[b"e"], message_annotations=annotations)))
    assert sneaky.endswith(key + b"\x71\x00\x00\x00\x09" + b"\x00\x53\x75\xa0\x01e")
    expected = _fields(_read_in_full(sneaky))
    assert not events._SEEN.prefixes
    assert _fields(events.parse_event(sneaky)) == expected
    assert expected[-1][idempotence.PRODUCER_SEQUENCE] == 3


def test_runtime_metrics_go_after_a_stored_events_header_also_when_it_is_read_from_disk():
    """Delivery annotations stand between the header and the message annotations (AMQP 1.0, 3.2)."""
    from azure.eventhub._pyamqp.message import Header

    encoded = bytes(_encode.encode_payload(bytearray(), Message(data=[b"x"], header=Header(durable=True))))
    stored = events.parse_event(encoded).stored(7, 100, 0, None)
    section = events.runtime_metrics(9, 120, 1_700_000_000_000, 1_700_000_000_500)
    for form in (stored, memoryview(stored)):  # a segment file's events are read as memoryviews
        delivered = events.with_delivery_annotations(form, section)
        sections = [d for d, *_ in codec.split_sections(delivered)]
        assert sections == [codec.SEC_HEADER, codec.SEC_DELIVERY_ANN, codec.SEC_MESSAGE_ANN, codec.SEC_DATA]
    headless = events.parse_event(_payload(1)).stored(0, 0, 0, None)
    assert [d for d, *_ in codec.split_sections(events.with_delivery_annotations(memoryview(headless), section))][:2] \
        == [codec.SEC_DELIVERY_ANN, codec.SEC_MESSAGE_ANN]
