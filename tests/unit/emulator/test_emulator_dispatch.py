"""The frame dispatcher: every performative a running connection may receive has a handler in the
table, and what has none closes the connection with a clear AMQP error (a real ``Connection`` and
``Broker``; only the socket is a recording stand-in)."""

from __future__ import annotations

import struct

import pytest
from azure.eventhub._pyamqp import _decode, performatives
from eventhubs_local import codec, dispatch, frames
from eventhubs_local.broker import Broker
from eventhubs_local.connection import Connection
from eventhubs_local.store import Store


class _Socket:
    def __init__(self) -> None:
        self.sent = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sent += data

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> None:
        return None


@pytest.fixture()
def opened(tmp_path):
    """A connection past its protocol header and open, with what it has sent so far cleared."""
    store = Store(tmp_path / "data")
    conn = Connection(Broker(store, fsync="never"))
    sock = _Socket()
    conn.connection_made(sock)  # type: ignore[arg-type]
    conn.data_received(frames.AMQP_HEADER + frames.open_frame("client", 65536, None))
    assert conn.stage == "running"
    sock.sent = b""
    yield conn, sock
    store.close()


def _received(data: bytes) -> list[tuple[int, list]]:
    out, pos = [], 0
    while pos + 8 <= len(data):
        size, doff = struct.unpack_from(">IB", data, pos)
        code, fields = _decode.decode_frame(memoryview(data[pos + doff * 4 : pos + size]))
        out.append((code, fields))
        pos += size
    return out


def _close_error(sock: _Socket) -> tuple[bytes, bytes]:
    code, fields = _received(sock.sent)[-1]
    assert code == codec.CLOSE and sock.closed
    condition, description = fields[0][0], fields[0][1]
    return condition, description


def test_every_connection_performative_has_a_handler():
    assert set(dispatch.HANDLERS) == {codec.OPEN, codec.BEGIN, codec.ATTACH, codec.FLOW, codec.TRANSFER,
                                      codec.DISPOSITION, codec.DETACH, codec.END, codec.CLOSE}


def test_unknown_performative_closes_the_connection_with_not_implemented(opened):
    conn, sock = opened
    conn.data_received(frames.frame_bytes(b"\x00\x53\x30\x45"))  # descriptor 0x30: no AMQP performative
    assert _close_error(sock) == (b"amqp:not-implemented", b"unknown performative 0x30")
    assert conn.closed


def test_second_open_closes_the_connection_with_not_allowed(opened):
    conn, sock = opened
    conn.data_received(frames.open_frame("again", 65536, None))
    assert _close_error(sock) == (b"amqp:not-allowed", b"second open on one connection")


def test_transfer_on_a_channel_without_a_session_is_a_framing_error(opened):
    conn, sock = opened
    conn.data_received(frames.frame_bytes(b"\x00\x53\x14\xc0\x03\x01\x43\x40", channel=3))
    assert _close_error(sock) == (b"amqp:connection:framing-error", b"transfer on unused channel 3")


def test_begin_and_end_are_answered_on_the_same_channel(opened):
    conn, sock = opened
    conn.data_received(frames.encode_performative(performatives.BeginFrame(
        remote_channel=None, next_outgoing_id=0, incoming_window=10, outgoing_window=10, handle_max=None,
        offered_capabilities=None, desired_capabilities=None, properties=None), 2))
    assert 2 in conn.sessions
    conn.data_received(frames.encode_performative(performatives.EndFrame(error=None), 2))
    assert 2 not in conn.sessions
    assert [code for code, _ in _received(sock.sent)] == [codec.BEGIN, codec.END]
    assert _received(sock.sent)[0][1][0] == 2  # remote-channel of our begin mirrors the client's
    assert not sock.closed
