"""The service side of the idempotent producer: duplicates dropped, gaps refused, lower owner levels
fenced, and producer groups rebuilt from what the partition's log stored."""

from __future__ import annotations

import pytest
from azure.eventhub._pyamqp import _encode
from azure.eventhub._pyamqp.message import Message

from airflow_provider_eh.emulator import codec, events, idempotence
from airflow_provider_eh.emulator.log import PartitionLog


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
