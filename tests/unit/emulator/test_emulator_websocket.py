"""The endpoint's WebSocket layer without a socket: the upgrade's answers and the framing."""

from __future__ import annotations

import os

import pytest
from eventhubs_local import websocket


def _request(path: str = "/$servicebus/websocket", **headers: str) -> bytes:
    base = {"Host": "127.0.0.1", "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "AMQPWSB10"}
    base.update({k.replace("_", "-"): v for k, v in headers.items()})
    lines = [f"GET {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in base.items() if v]
    return "\r\n".join(lines).encode()


def test_the_upgrade_answers_with_the_rfcs_accept_key_and_the_amqp_subprotocol() -> None:
    answer = websocket.answer_handshake(_request())
    assert answer.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    assert b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" in answer  # RFC 6455, 1.3
    assert b"Sec-WebSocket-Protocol: AMQPWSB10\r\n" in answer


@pytest.mark.parametrize(
    ("request_bytes", "status", "reason"),
    [
        (_request("/other"), "404", "AMQP over WebSockets is at /$servicebus/websocket"),
        (_request(Sec_WebSocket_Protocol="mqtt"), "400", "AMQPWSB10 (AMQP over WebSockets) was not offered"),
        (_request(Upgrade=""), "400", "Upgrade: websocket"),
        (_request(Sec_WebSocket_Version="8"), "426", "must be 13"),
        (_request(Sec_WebSocket_Key=""), "400", "Sec-WebSocket-Key"),
        (_request().replace(b"GET", b"POST", 1), "405", "only GET"),
    ],
)
def test_a_request_that_is_no_amqp_upgrade_is_answered_with_its_fault(request_bytes: bytes, status: str, reason: str) -> None:
    with pytest.raises(websocket.HandshakeError) as caught:
        websocket.answer_handshake(request_bytes)
    assert caught.value.status.startswith(status) and reason in str(caught.value)


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 300_000])
def test_frames_carry_their_length_and_masked_payloads_unmask(size: int) -> None:
    payload = os.urandom(size)
    encoded = websocket.frame(websocket.OP_BINARY, payload)
    assert encoded[0] == 0x82 and encoded.endswith(payload)
    assert len(encoded) - size == (2 if size < 126 else 4 if size < 65536 else 10)
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    assert websocket.unmask(masked, mask) == payload
