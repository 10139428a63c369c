"""A received event's fields read straight from its AMQP message equal what the SDK's ``EventData`` gives.

Messages are written by the SDK's own encoder, with the annotations the service adds on delivery, and
read back by the SDK's own decoder, as its receiver does: the fast path is compared with ``EventData``
on the very objects a link hands over.
"""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timezone
from typing import Any

import pytest
from azure.eventhub import EventData
from azure.eventhub._pyamqp import types
from azure.eventhub._pyamqp._decode import decode_payload
from azure.eventhub._pyamqp._encode import encode_payload
from azure.eventhub._transport._pyamqp_transport import PyamqpTransport

from airflow_provider_eh.client.received_fields import (
    ENQUEUED_TIME,
    OFFSET,
    SEQUENCE_NUMBER,
    MessageFields,
    fields_of_event_data,
    fields_of_message,
)


def received(event: EventData, sequence_number: int, enqueued_ms: int | None = 1_764_000_000_123) -> Any:
    """``event`` as a receiver decodes it after the service stamped it."""
    message = PyamqpTransport.to_outgoing_amqp_message(event.raw_amqp_message)
    annotations: dict[Any, Any] = {SEQUENCE_NUMBER: sequence_number, OFFSET: str(sequence_number * 1000).encode()}
    if enqueued_ms is not None:
        annotations[ENQUEUED_TIME] = {"TYPE": types.AMQPTypes.timestamp, "VALUE": enqueued_ms}
    message = message._replace(message_annotations=annotations)
    return decode_payload(memoryview(encode_payload(bytearray(), message)))


def random_event(rng: random.Random) -> EventData:
    body = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 3000)))
    event = EventData(body if rng.random() < 0.5 else body.decode("latin-1"))
    values: list[Any] = [
        "text", "", "ünïcode", 0, -7, 2**31 - 1, {"TYPE": types.AMQPTypes.long, "VALUE": 2**40}, 1.5, True, False,
        None, b"bytes", b"\xff\xfe", uuid.uuid4(),
    ]
    event.properties = {f"p{i}": rng.choice(values) for i in range(rng.randrange(0, 12))}
    if rng.random() < 0.3:
        event.properties[b"raw-key"] = "by bytes"
    if rng.random() < 0.4:  # typed events name their schema id in the content type
        event.content_type = rng.choice(["avro/binary+" + uuid.uuid4().hex, "application/json;serialization=Json+7",
                                         "application/json", ""])
    return event


def test_fields_of_400_random_messages_equal_the_sdks_eventdata():
    rng = random.Random(7)
    for seq in range(400):
        message = received(random_event(rng), seq, enqueued_ms=1_764_000_000_000 + rng.randrange(10**6))
        fast = fields_of_message(message)
        assert fast is not None
        assert fast == fields_of_event_data(EventData._from_message(message)), seq


def test_cached_keys_and_shared_enqueued_times_give_the_same_fields():
    reader = MessageFields("partition 0")
    rng = random.Random(11)
    for seq in range(100):
        message = received(random_event(rng), seq, enqueued_ms=1_764_000_000_000 + seq // 10)  # ten events a send
        assert fields_of_message(message, reader) == fields_of_event_data(EventData._from_message(message))


def test_a_trusted_links_batches_read_in_one_loop_equal_the_sdks_eventdata():
    reader = MessageFields("partition 1")
    rng = random.Random(13)
    messages = [received(random_event(rng), seq, enqueued_ms=1_764_000_000_000 + seq // 7) for seq in range(200)]
    messages[90] = messages[90]._replace(data=None, value={b"k": 1})  # not data sections: through EventData
    assert reader.many(messages[:MessageFields.CHECKED]) and reader.trusted is True
    batches = [messages[MessageFields.CHECKED:100], messages[100:]]  # a send's enqueued time spans both batches
    assert [f for batch in batches for f in reader.many(batch)] == [
        fields_of_event_data(EventData._from_message(m)) for m in messages[MessageFields.CHECKED:]]


def test_plain_values_of_properties_and_the_utc_enqueued_time():
    event = EventData(b'{"a": 1}')
    event.properties = {"eh.seq": 41, "eh.group": "orders", "blob": b"\xff\x00", "none": None}
    fields = fields_of_message(received(event, 9, enqueued_ms=1_764_000_000_123))
    assert fields is not None
    assert fields.sequence_number == 9 and fields.offset == "9000"
    assert fields.enqueued_time == datetime(2025, 11, 24, 16, 0, 0, 123000, tzinfo=timezone.utc)
    assert fields.body == b'{"a": 1}'
    assert fields.properties == {"eh.seq": 41, "eh.group": "orders", "blob": "/wA=", "none": None}


def test_a_message_without_data_sections_is_left_to_eventdata_and_read_as_json():
    message = received(EventData(b"x"), 1)._replace(data=None, value={b"k": 1, b"b": [b"x", 2]})
    assert fields_of_message(message) is None
    fields = MessageFields("partition 0")(message)  # read through EventData
    assert (fields.sequence_number, fields.body) == (1, b'{"b":["x",2],"k":1}')
    sequence = received(EventData(b"x"), 2)._replace(data=None, sequence=[[1, "a"], [2]])
    assert MessageFields("partition 0")(sequence).body == b'[[1,"a"],[2]]'


def test_the_fast_path_is_trusted_only_after_agreeing_on_the_first_messages():
    reader = MessageFields("partition 3")
    for seq in range(MessageFields.CHECKED - 1):
        reader(received(EventData(b"x"), seq))
        assert reader.trusted is None
    reader(received(EventData(b"x"), MessageFields.CHECKED))
    assert reader.trusted is True


def test_one_difference_sends_the_link_through_eventdata(monkeypatch: pytest.MonkeyPatch, caplog):
    import airflow_provider_eh.client.received_fields as module

    reader = MessageFields("partition 2 of 'orders'")
    real = module.fields_of_message
    monkeypatch.setattr(module, "fields_of_message", lambda m, r=None: real(m, r)._replace(offset="wrong"))
    fields = reader(received(EventData(b"x"), 5))
    assert fields.offset == "5000"  # EventData's answer is the one handed over
    assert reader.trusted is False
    assert "partition 2 of 'orders'" in caplog.text and "through EventData from now on" in caplog.text
    monkeypatch.setattr(module, "fields_of_message", lambda m, r=None: pytest.fail("the fast path was used again"))
    assert reader(received(EventData(b"y"), 6)).body == b"y"


def test_the_content_type_of_a_typed_event_is_read_from_its_properties():
    event = EventData(b"\x02")
    event.content_type = "avro/binary+0123abcd"
    assert fields_of_message(received(event, 1)).content_type == "avro/binary+0123abcd"
    assert fields_of_message(received(EventData(b"{}"), 2)).content_type is None
