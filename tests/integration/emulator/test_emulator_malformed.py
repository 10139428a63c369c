"""Malformed frames from a raw socket are answered with an AMQP error; the server keeps serving others."""

from __future__ import annotations

import random
import socket
import struct

from azure.eventhub import EventData, EventHubProducerClient
from azure.eventhub._pyamqp import _decode, performatives

from eventhubs_local import codec, frames

HEADER = struct.Struct(">IBBH")


def _frame(body: bytes, channel: int = 0, doff: int = 2, size: int | None = None) -> bytes:
    return HEADER.pack(size if size is not None else len(body) + 8, doff, 0, channel) + body


def _malformed(rng: random.Random, kind: int) -> bytes:
    """One malformed frame of category ``kind`` with random content."""
    junk = bytes(rng.randrange(256) for _ in range(rng.randrange(4, 40)))
    if kind == 0:  # body that is not a described type
        return _frame(bytes([rng.randrange(1, 256)]) + junk)
    if kind == 1:  # performative list whose size runs past the frame
        return _frame(b"\x00\x53" + bytes([rng.randrange(0x10, 0x19)]) + b"\xc0\xff\x05" + junk[:8])
    if kind == 2:  # unknown performative code
        return _frame(b"\x00\x53" + bytes([rng.choice([0x01, 0x20, 0x30, 0x7f, 0x99])]) + b"\x45")
    if kind == 3:  # frame header with a size below the minimum
        return HEADER.pack(rng.randrange(0, 8), 2, 0, 0) + junk
    if kind == 4:  # data offset below 2
        return _frame(b"\x00\x53\x13\x45", doff=rng.randrange(0, 2))
    if kind == 5:  # transfer on a handle nobody attached (session begun first)
        begin = frames.encode_performative(performatives.BeginFrame(
            remote_channel=None, next_outgoing_id=0, incoming_window=100, outgoing_window=100, handle_max=10,
            offered_capabilities=None, desired_capabilities=None, properties=None))
        transfer = b"\x00\x53\x14\xc0\x08\x03\x52" + bytes([rng.randrange(1, 200)]) + b"\x43\xa0\x01\x01" + junk
        return begin + _frame(transfer)
    if kind == 6:  # attach whose handle is a string
        begin = frames.encode_performative(performatives.BeginFrame(
            remote_channel=None, next_outgoing_id=0, incoming_window=100, outgoing_window=100, handle_max=10,
            offered_capabilities=None, desired_capabilities=None, properties=None))
        attach = b"\x00\x53\x12\xc0\x0a\x03\xa1\x01x\xa1\x03abc\x41"
        return begin + _frame(attach)
    if kind == 7:  # unknown AMQP constructor inside a performative
        return _frame(b"\x00\x53\x11\xc0\x04\x02" + bytes([rng.randrange(0x01, 0x40), rng.randrange(0x01, 0x40)]) + b"\x40")
    if kind == 8:  # a second open
        return frames.open_frame("again", 65536, None)
    # kind 9: a frame far larger than max-frame-size
    return HEADER.pack(64 * 1024 * 1024, 2, 0, 0) + junk


def _exchange(port: int, payload: bytes) -> list[tuple[int, list]]:
    """Open an AMQP connection (no SASL), send ``payload``, return the frames read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(frames.AMQP_HEADER + frames.open_frame("raw-test", 65536, None) + payload)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    assert data[:8] == frames.AMQP_HEADER
    received, pos = [], 8
    while pos + 8 <= len(data):
        size, doff = struct.unpack_from(">IB", data, pos)
        body = memoryview(data[pos + doff * 4 : pos + size])
        received.append(_decode.decode_frame(body))
        pos += size
    return received


def test_twenty_random_malformed_frames_each_get_an_error_while_others_keep_working(hub, emulator):
    rng = random.Random(20261122)
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        for i in range(20):
            kind = i % 10
            frames = _exchange(emulator.port, _malformed(rng, kind))
            closes = [fields for code, fields in frames if code == codec.CLOSE]
            assert closes, f"malformed frame {i} (kind {kind}) got no close frame: {frames}"
            error = closes[-1][0]
            assert error is not None and error[0].startswith(b"amqp:"), (i, kind, error)
            assert error[0] != b"amqp:internal-error", (i, kind, error)  # recognised, not a crash
            assert error[1], f"error for malformed frame {i} has no description"
            producer.send_event(EventData(f"still-working-{i}"), partition_id="0")
        assert producer.get_partition_properties("0")["last_enqueued_sequence_number"] == 19


def test_garbage_instead_of_a_protocol_header_is_answered_with_the_supported_header(emulator):
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        reply = sock.recv(64)
    assert reply[:8] == frames.AMQP_HEADER
