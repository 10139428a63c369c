"""With --require-auth, tokens are checked: wrong key or a token for another hub is refused."""

from __future__ import annotations

import time

import pytest
from azure.eventhub import EventData, EventHubProducerClient
from azure.eventhub.exceptions import AuthenticationError, ConnectError, EventHubError

from eventhubs_local.auth import sign

KEY_NAME, KEY = "sender", "correct-horse-battery-staple"


@pytest.fixture
def secured(private_emulator):
    return private_emulator("--require-auth", "--sas-key-name", KEY_NAME, "--sas-key", KEY,
                            hubs={"alpha": 1, "beta": 1}, key_name=KEY_NAME, key=KEY)


def test_right_key_is_accepted(secured):
    with EventHubProducerClient.from_connection_string(secured.connection_string("alpha")) as producer:
        producer.send_event(EventData("authorised"), partition_id="0")
        assert producer.get_partition_properties("0")["last_enqueued_sequence_number"] == 0


def test_wrong_key_is_refused_with_401(secured):
    conn = secured.connection_string("alpha").replace(f"SharedAccessKey={KEY}", "SharedAccessKey=wrong")
    with EventHubProducerClient.from_connection_string(conn, retry_total=0) as producer:
        with pytest.raises((AuthenticationError, ConnectError, EventHubError)) as info:
            producer.send_event(EventData("nope"), partition_id="0")
    assert "401" in str(info.value) and "signature" in str(info.value)


def test_token_for_another_hub_is_refused(secured):
    audience = f"sb://127.0.0.1:{secured.port}/beta"
    token = sign(audience, KEY_NAME, KEY, int(time.time()) + 3600)
    conn = (f"Endpoint=sb://127.0.0.1:{secured.port};SharedAccessSignature={token};EntityPath=alpha;"
            "UseDevelopmentEmulator=true")
    with EventHubProducerClient.from_connection_string(conn, retry_total=0) as producer:
        with pytest.raises((AuthenticationError, ConnectError, EventHubError)) as info:
            producer.send_event(EventData("nope"), partition_id="0")
    assert "401" in str(info.value) and "beta" in str(info.value)
    with EventHubProducerClient.from_connection_string(secured.connection_string("alpha")) as producer:
        assert producer.get_partition_properties("0")["is_empty"] is True


def test_token_for_the_hub_itself_is_accepted(secured):
    audience = f"sb://127.0.0.1:{secured.port}/beta"
    token = sign(audience, KEY_NAME, KEY, int(time.time()) + 3600)
    conn = (f"Endpoint=sb://127.0.0.1:{secured.port};SharedAccessSignature={token};EntityPath=beta;"
            "UseDevelopmentEmulator=true")
    with EventHubProducerClient.from_connection_string(conn) as producer:
        producer.send_event(EventData("signed"), partition_id="0")
        assert producer.get_partition_properties("0")["last_enqueued_sequence_number"] == 0
