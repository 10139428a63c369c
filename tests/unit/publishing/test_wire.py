"""Stamped events encoded straight to AMQP bytes are the bytes the SDK's ``EventDataBatch.add`` appends
(whole batches compared in ``test_batching``)."""

from __future__ import annotations

import random

import pytest
from azure.core.settings import settings
from azure.eventhub import EventData

from airflow_provider_eh.publishing import sender, wire
from airflow_provider_eh.publishing.batching import tracing_enabled
from airflow_provider_eh.publishing.wire import StampedMessageEncoder, StampEncoder


def random_properties(rng: random.Random) -> dict | None:
    if rng.random() < 0.4:
        return None
    values = [lambda: rng.randint(-2**63, 2**63 - 1), lambda: rng.randint(-200, 200), lambda: rng.random() * 1e6,
              lambda: rng.choice([True, False]), lambda: None, lambda: "é" * rng.randint(0, 300),
              lambda: bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))]
    return {f"k{j}-{'n' * rng.randint(0, 30)}": rng.choice(values)() for j in range(rng.randint(1, 30))}


def test_encoder_matches_the_sdk_byte_for_byte_on_random_events() -> None:
    rng = random.Random(7)
    encoder = StampedMessageEncoder.create("orders", "0123456789abcdef", 12)
    assert encoder is not None
    stamps = StampEncoder("orders", "0123456789abcdef", 12)
    for _ in range(400):
        body = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 200, 255, 256, 3000])))
        props = random_properties(rng)
        seq = rng.choice([0, 1, 127, 128, -1, rng.randint(0, 2**62)])
        assert encoder.encode(body, props, seq) == wire._sdk_bytes(body, stamps.properties(props, seq))


def test_kept_property_pairs_are_the_sdks_bytes_for_look_alike_values() -> None:
    """Pairs are encoded once per value and kept: values equal as keys (1, True, 1.0; 0.0, -0.0) but not on the
    wire must each get their own bytes, however often they come back, and past the kept pairs' bound."""
    encoder = StampedMessageEncoder.create("orders", "0123456789abcdef", 12)
    assert encoder is not None
    stamps = StampEncoder("orders", "0123456789abcdef", 12)
    look_alikes = [1, True, 1.0, "1", 0, False, 0.0, -0.0, None, 2**40, -(2**40), "é", b"1"]
    rng = random.Random(3)
    for n in range(6000):
        value = rng.choice(look_alikes) if n % 2 else n  # every other event a new value: the bound is reached
        props = {"region": value, "kind": rng.choice(look_alikes)}
        assert encoder.encode(b"x", props, n) == wire._sdk_bytes(b"x", stamps.properties(props, n)), props


def test_a_typed_batch_content_type_goes_on_every_message_byte_for_byte_as_the_sdk_writes_it() -> None:
    """Typed events keep the straight-bytes path: the content type's properties section is the SDK's own."""
    content_type = "avro/binary+" + "ab" * 16
    encoder = StampedMessageEncoder.create("orders", "0123456789abcdef", 12, annotated=True, content_type=content_type)
    assert encoder is not None
    stamps = StampEncoder("orders", "0123456789abcdef", 12)
    for body, props, seq in ((b"\x02\x04", None, 0), (b"z" * 300, {"region": 3}, 2**33)):
        event = EventData(body)
        event.content_type = content_type
        wire.set_stamps(event, stamps.properties(props, seq), None)
        assert encoder.encode(body, props, seq) == bytes(wire.sdk_internals.sdk_encode(event))
    untyped = StampedMessageEncoder.create("orders", "0123456789abcdef", 12)
    assert untyped is not None and content_type.encode() not in untyped.encode(b"x", None, 1)


def test_encoder_is_refused_when_the_sdk_encodes_differently(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "_sdk_bytes", lambda body, props: b"\x00" + body)
    assert StampedMessageEncoder.create("g", "0123456789abcdef", 0) is None


class _Span:  # the smallest azure-core span a tracer setting accepts
    def __init__(self, *args, **kwargs): ...
    def __enter__(self): return self
    def __exit__(self, *exc): return False


def test_a_configured_tracer_sends_through_the_sdk_encoder() -> None:
    settings.tracing_implementation.set_value(_Span)
    try:
        assert tracing_enabled()
        make, _ = sender._message_path("g", "0123456789abcdef", 0, fast=True)
        assert isinstance(make(b"x", None, 1), EventData)
    finally:
        settings.tracing_implementation.unset_value()
    assert not tracing_enabled()
    make, _ = sender._message_path("g", "0123456789abcdef", 0, fast=True)
    assert isinstance(make(b"x", None, 1), bytes)


def test_integer_properties_beyond_32_bits_are_sent_as_amqp_long_and_read_back_equal() -> None:
    from azure.eventhub._pyamqp._decode import decode_payload

    encoder = StampedMessageEncoder.create("g", "0123456789abcdef", 0)
    props = {"small": 5, "big": 2**40, "negative": -(2**63), "flag": True}
    decoded = decode_payload(memoryview(encoder.encode(b"body", props, 9)))
    app = {k.decode(): v for k, v in decoded[4].items()}
    assert {k: app[k] for k in props} == props
    assert app["eh.seq"] == 9 and decoded[5] == [b"body"]
