"""What the endpoint parses, held to AMQP 1.0 rather than to what the Python SDK happens to send:
trailing fields omitted, descriptors as ulong or symbol, message-ids of every type echoed as sent."""

from __future__ import annotations

import struct
import uuid

import pytest
from azure.eventhub._pyamqp import _decode, _encode
from azure.eventhub._pyamqp.message import Message, Properties
from eventhubs_local import codec, events, frames, messages


def _list(*items: bytes) -> bytes:
    body = b"".join(items)
    return b"\xc0" + bytes((len(body) + 1, len(items))) + body


def _performative(code: int, *items: bytes, descriptor: str = "smallulong") -> memoryview:
    if descriptor == "smallulong":
        head = b"\x00\x53" + bytes((code,))
    elif descriptor == "ulong":
        head = b"\x00\x80" + struct.pack(">Q", code)
    else:
        names = {v: k for k, v in codec.DESCRIPTOR_NAMES.items()}
        head = b"\x00\xa3" + bytes((len(names[code]),)) + names[code]
    return memoryview(head + (_list(*items) if items else b"\x45"))


UINT0, TRUE, FALSE, NULL = b"\x43", b"\x41", b"\x42", b"\x40"


def _str(text: str) -> bytes:
    return b"\xa1" + bytes((len(text),)) + text.encode()


# The shortest form a sender may write of each performative the endpoint reads: mandatory fields only.
SHORTEST = {
    codec.OPEN: (_str("container"),),
    codec.BEGIN: (NULL, UINT0, b"\x52\x64", b"\x52\x64"),
    codec.ATTACH: (_str("link"), UINT0, TRUE),
    codec.FLOW: (UINT0, b"\x52\x64", UINT0, b"\x52\x64"),
    codec.DISPOSITION: (TRUE, UINT0),
    codec.DETACH: (UINT0,),
    codec.END: (),
    codec.CLOSE: (),
    codec.SASL_INIT: (b"\xa3\x09ANONYMOUS",),
}


@pytest.mark.parametrize("code", sorted(SHORTEST), ids=lambda c: f"0x{c:x}")
def test_performative_with_trailing_fields_omitted_is_padded_to_its_full_arity(code):
    decoded, fields = frames.decode_performative(_performative(code, *SHORTEST[code]))
    assert decoded == code
    assert len(fields) == frames.ARITY[code]
    assert fields[len(SHORTEST[code]):] == [None] * (frames.ARITY[code] - len(SHORTEST[code]))


def test_transfer_of_six_fields_has_its_payload_at_the_fixed_index():
    # what the JavaScript SDK's AMQP library (rhea) writes: handle .. more, then the message
    payload = b"\x00\x53\x77\xa1\x05token"
    body = _performative(codec.TRANSFER, UINT0, b"\x52\x07", b"\xa0\x01\x07", UINT0, FALSE, FALSE)
    code, fields = frames.decode_performative(memoryview(bytes(body) + payload))
    assert code == codec.TRANSFER
    assert len(fields) == frames.TRANSFER_PAYLOAD + 1
    assert fields[1] == 7 and fields[5] is False and fields[9] is None
    assert bytes(fields[frames.TRANSFER_PAYLOAD]) == payload


@pytest.mark.parametrize("descriptor", ["ulong", "symbol"])
def test_performative_descriptor_may_be_a_ulong_or_a_symbol(descriptor):
    shortest = frames.decode_performative(_performative(codec.BEGIN, *SHORTEST[codec.BEGIN]))
    assert frames.decode_performative(_performative(codec.BEGIN, *SHORTEST[codec.BEGIN], descriptor=descriptor)) \
        == shortest


def test_performative_with_more_fields_than_amqp_defines_is_a_decode_error():
    with pytest.raises(codec.CodecError, match="defines 1"):
        frames.decode_performative(_performative(codec.END, NULL, NULL))


def test_message_sections_with_symbolic_descriptors_are_read_like_coded_ones():
    annotations = b"\x00\xa3\x1camqp:message-annotations:map" + b"\xc1\x1a\x02\xa3\x13x-opt-partition-key\xa1\x02pk"
    data = b"\x00\xa3\x10amqp:data:binary\xa0\x04body"
    event = events.parse_event(annotations + data)
    assert event.partition_key == b"pk"
    assert event.tail == data


def _request(message_id: object) -> bytes:
    message = Message(properties=Properties(message_id=message_id),
                      application_properties={"operation": "put-token"}, value="token")
    return bytes(_encode.encode_payload(bytearray(), message))


MESSAGE_IDS = {
    "ulong": (7, b"\x53\x07"),
    "uuid": (uuid.UUID(int=1), b"\x98" + uuid.UUID(int=1).bytes),
    "binary": (b"\x01\x02", b"\xa0\x02\x01\x02"),
    "string": ("req-1", b"\xa1\x05req-1"),
    "long string": ("r" * 300, b"\xb1" + struct.pack(">I", 300) + b"r" * 300),
}


@pytest.mark.parametrize("kind", sorted(MESSAGE_IDS))
def test_reply_correlation_id_is_the_request_message_id_as_sent(kind):
    value, encoded = MESSAGE_IDS[kind]
    request = messages.parse_request(_request(value))
    assert request.message_id == encoded
    assert request.application_properties == {b"operation": b"put-token"}
    reply = messages.reply_message(request.message_id, 202, "Accepted")
    sections = codec.split_sections(reply)
    descriptor, _start, value_start, end = sections[0]
    assert descriptor == codec.SEC_PROPERTIES
    fields_start, count = codec.list_items(reply, value_start)
    assert count == codec.PROPERTIES_ARITY
    correlation_start = fields_start + 5  # five nulls: message-id, user-id, to, subject, reply-to
    assert reply[correlation_start : codec.skip_value(reply, correlation_start)] == encoded
    decoded = _decode.decode_payload(memoryview(reply))
    assert decoded.application_properties[b"status-code"] == 202
    assert decoded.properties.correlation_id == (value.encode() if isinstance(value, str) else value)


def test_request_without_message_id_gets_a_null_correlation_id():
    request = messages.parse_request(_request(None))
    assert request.message_id == b"\x40"
    assert _decode.decode_payload(memoryview(messages.reply_message(request.message_id, 200, "OK"))).properties \
        .correlation_id is None


def test_message_id_of_a_type_amqp_does_not_allow_is_a_decode_error():
    properties = b"\x00\x53\x73" + _list(b"\x81" + b"\x00" * 8)  # a long, not a ulong
    with pytest.raises(codec.CodecError, match="none of ulong, uuid, binary, string"):
        messages.parse_request(properties + b"\x00\x53\x77\x40")


class _Session:
    """Just enough of a session for an incoming link: it records the flows the link sends."""

    def __init__(self) -> None:
        self.flows: list[tuple[int, int]] = []
        self.conn = None

    def send_flow(self, _link: object, delivery_count: int, credit: int) -> None:
        self.flows.append((delivery_count, credit))


def _transfer(delivery_id: int | None, payload: bytes, *, more: bool = False, aborted: bool = False) -> list:
    items = [UINT0, NULL if delivery_id is None else b"\x52" + bytes((delivery_id,)), b"\xa0\x01\x00", UINT0, FALSE,
             TRUE if more else FALSE]
    if aborted:
        items += [NULL, NULL, NULL, TRUE]
    return frames.decode_performative(memoryview(bytes(_performative(codec.TRANSFER, *items)) + payload))[1]


def test_aborted_delivery_is_discarded_and_the_next_one_is_read_whole():
    from eventhubs_local.links import IncomingLink

    received: list[tuple[int, bytes]] = []

    class Recording(IncomingLink):
        def on_message(self, delivery_id, message_format, payload, settled):  # type: ignore[no-untyped-def]
            received.append((delivery_id, bytes(payload)))

    link = Recording(_Session(), "link", 0, "hub")  # type: ignore[arg-type]
    link.on_transfer(_transfer(1, b"first-half", more=True))
    link.on_transfer(_transfer(None, b"", aborted=True))
    link.on_transfer(_transfer(2, b"whole-1", more=True))
    link.on_transfer(_transfer(None, b"-2"))
    assert received == [(2, b"whole-1-2")]
