"""SAS rules with rights (``--sas-rule NAME=KEY:Send,Listen``), as Event Hubs' shared access policies.

A valid token of a rule is accepted on ``$cbs`` whatever its rights; a sender then needs ``Send`` and
a receiver ``Listen``, else its attach is answered (null source and target) and detached with
``amqp:unauthorized-access`` and the service's text. The clients run with ``retry_total=0``: the SDK
retries even this error in its own loop (12 s of backoff with the default ``retry_total=3``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient
from azure.eventhub.aio import EventHubProducerClient as AsyncProducer
from azure.eventhub.exceptions import ConnectionLostError

from eventhubs_local import EmulatorProcess
from eventhubs_local.__main__ import parse_args
from eventhubs_local.auth import AuthError, SasValidator, parse_rights, sign
from tests.support.aio_receive import first_receive_error

RULES = {"listen-only": ("listen-key", ["Listen"]), "send-only": ("send-key", ["Send"]),
         "manager": ("manage-key", ["Manage"])}
FAST = 5.0  # seconds: a failure that waits out no retry of the SDK's


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    """An endpoint that validates tokens: the main key, and the rules above."""
    with EmulatorProcess(tmp_path_factory.mktemp("sas-rules"), hubs={"orders": 2}, sas_rules=RULES,
                         require_auth=True, extra_args=["--fsync", "never"]) as proc:
        yield proc


def _claim_required(endpoint: EmulatorProcess, claim: str, path: str) -> str:
    return (f"Unauthorized access. '{claim}' claim(s) are required to perform this operation. "
            f"Resource: 'sb://{endpoint.host}:{endpoint.port}/{path}'.")


def test_rights_parse_as_the_service_names_them() -> None:
    """A comma list in any case; Manage brings Send and Listen; an unknown right is named."""
    assert parse_rights("listen") == {"Listen"}
    assert parse_rights("Send, Listen") == {"Send", "Listen"}
    assert parse_rights(["Manage"]) == {"Manage", "Send", "Listen"}
    with pytest.raises(ValueError, match="'Read'"):
        parse_rights("Listen,Read")
    with pytest.raises(ValueError, match="at least one right"):
        parse_rights([])


def test_sas_rule_on_the_command_line() -> None:
    """``NAME=KEY:RIGHTS``, repeatable; a key may hold ``=`` and ``:``; a bad one exits with status 2."""
    args = parse_args(["--data-dir", "d", "--sas-rule", "reader=abc==:Listen", "--sas-rule", "w=k:ey:Send,Listen"])
    assert args.sas_rule == [("reader", "abc==", {"Listen"}), ("w", "k:ey", {"Send", "Listen"})]
    for bad in ("no-rights=key", "=key:Send", "name=key:Write"):
        with pytest.raises(SystemExit) as info:
            parse_args(["--data-dir", "d", "--sas-rule", bad])
        assert info.value.code == 2


def test_validator_grants_the_rights_of_the_signing_rule() -> None:
    """The main key has every right, a rule its own; an unknown key name is refused, naming the known ones."""
    validator = SasValidator("root", "root-key", {"reader": ("reader-key", ["Listen"])})
    expiry = int(time.time()) + 60
    assert validator.grant(sign("sb://h/orders", "root", "root-key", expiry), "sb://h/orders").rights == {
        "Send", "Listen", "Manage"}
    grant = validator.grant(sign("sb://h/orders", "reader", "reader-key", expiry), "sb://h/orders/consumergroups/x")
    assert (grant.hub, grant.rights) == ("orders", {"Listen"})
    with pytest.raises(AuthError, match="signature"):
        validator.grant(sign("sb://h/orders", "reader", "root-key", expiry), "sb://h/orders")
    with pytest.raises(AuthError, match="'root' or 'reader'"):
        validator.grant(sign("sb://h/orders", "writer", "root-key", expiry), "sb://h/orders")
    with pytest.raises(ValueError, match="main key"):
        SasValidator("root", "k", {"root": ("other", ["Listen"])})


def test_listen_only_rule_reads_properties_but_its_sync_send_is_refused(secured: EmulatorProcess) -> None:
    """put-token and $management succeed; the sender's attach is refused with the service's text."""
    before = secured.admin.hub("orders")["events"]
    conn_str = secured.connection_string("orders", rule="listen-only")
    with EventHubProducerClient.from_connection_string(conn_str, retry_total=0) as producer:
        assert producer.get_partition_ids() == ["0", "1"]
        started = time.monotonic()
        with pytest.raises(ConnectionLostError) as info:
            producer.send_batch([EventData("not allowed")])
        elapsed = time.monotonic() - started
    assert type(info.value) is ConnectionLostError
    assert _claim_required(secured, "Send", "orders") in str(info.value)
    assert "amqp:unauthorized-access" in str(info.value)
    assert elapsed < FAST
    assert secured.admin.hub("orders")["events"] == before


def test_listen_only_rule_async_send_is_refused(secured: EmulatorProcess) -> None:
    """The same with the aio producer."""

    async def run() -> tuple[BaseException, float]:
        conn_str = secured.connection_string("orders", rule="listen-only")
        async with AsyncProducer.from_connection_string(conn_str, retry_total=0) as producer:
            started = time.monotonic()
            with pytest.raises(ConnectionLostError) as info:
                await producer.send_batch([EventData("not allowed")])
            return info.value, time.monotonic() - started

    error, elapsed = asyncio.run(run())
    assert type(error) is ConnectionLostError and _claim_required(secured, "Send", "orders") in str(error)
    assert elapsed < FAST


def test_send_only_rule_sends_and_listen_only_rule_receives(secured: EmulatorProcess) -> None:
    """Each rule does what its right allows (Send-only also reads the hub's properties, as the SDK's
    producer does before it attaches)."""
    with EventHubProducerClient.from_connection_string(secured.connection_string("orders", rule="send-only")) as producer:
        producer.send_batch([EventData("from the sender")], partition_id="0")
        last = producer.get_partition_properties("0")["last_enqueued_sequence_number"]
    received = _receive_sync(secured.connection_string("orders", rule="listen-only"), from_seq=last)
    assert [e.body_as_str() for e in received.events] == ["from the sender"] and not received.errors


def test_manage_rule_sends_and_receives(secured: EmulatorProcess) -> None:
    """Manage brings Send and Listen."""
    conn_str = secured.connection_string("orders", rule="manager")
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        producer.send_batch([EventData("managed")], partition_id="1")
        last = producer.get_partition_properties("1")["last_enqueued_sequence_number"]
    received = _receive_sync(conn_str, from_seq=last, partition_id="1")
    assert [e.body_as_str() for e in received.events] == ["managed"]


class _Received:
    def __init__(self) -> None:
        self.events: list[EventData] = []
        self.errors: list[tuple[float, Exception]] = []
        self.done = threading.Event()


def _receive_sync(conn_str: str, *, from_seq: int = -1, partition_id: str = "0", timeout: float = 10) -> _Received:
    """Receive from ``from_seq`` (inclusive; -1: the start) until one event or one error arrives."""
    client = EventHubConsumerClient.from_connection_string(conn_str, consumer_group="$Default", retry_total=0)
    received = _Received()

    def on_event(_ctx: Any, event: EventData | None) -> None:
        if event is not None:
            received.events.append(event)
            received.done.set()

    def on_error(_ctx: Any, error: Exception) -> None:
        received.errors.append((time.monotonic(), error))
        received.done.set()

    position: Any = from_seq if from_seq >= 0 else "-1"
    worker = threading.Thread(target=client.receive, args=(on_event,), daemon=True,
                              kwargs={"partition_id": partition_id, "starting_position": position,
                                      "starting_position_inclusive": True, "on_error": on_error})
    worker.start()
    received.done.wait(timeout)
    client.close()
    worker.join(15)
    return received


def test_send_only_rule_sync_receive_is_refused(secured: EmulatorProcess) -> None:
    """A receiver needs Listen: refused naming the consumer group's partition."""
    started = time.monotonic()
    received = _receive_sync(secured.connection_string("orders", rule="send-only"))
    assert received.errors, "on_error was not called"
    when, error = received.errors[0]
    assert type(error) is ConnectionLostError
    assert _claim_required(secured, "Listen", "orders/consumergroups/$default/partitions/0") in str(error)
    assert "amqp:unauthorized-access" in str(error)
    assert when - started < FAST and not received.events


def test_send_only_rule_async_receive_is_refused(secured: EmulatorProcess) -> None:
    """The same with the aio consumer."""
    error, elapsed = first_receive_error(secured.connection_string("orders", rule="send-only"), "$Default", "1",
                                         within=FAST)
    assert type(error) is ConnectionLostError
    assert _claim_required(secured, "Listen", "orders/consumergroups/$default/partitions/1") in str(error)
    assert elapsed < FAST
