"""Executors check the driver's claim through its hold relay: real sockets on loopback, real claims."""

from __future__ import annotations

import pickle
import socket
import time

import pytest

from airflow_provider_eh.errors import ProducerDisconnectedError
from airflow_provider_eh.publishing.claim import StateClaim
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from airflow_provider_eh.publishing.hold_relay import HoldRelay, HoldTicket, HoldWatch, address_towards, parse_address
from airflow_provider_eh.publishing.variable_store import VariableProducerStateStore

KEY = StateKey("ns", "hub", "g", "0")


def held_claim(seconds: float) -> StateClaim:
    claim = StateClaim(KEY, ProducerState.new(KEY), None, "blob c/x")
    claim.hold(started=time.monotonic(), seconds=seconds, margin=0)
    return claim


@pytest.fixture
def relay() -> HoldRelay:
    with HoldRelay("127.0.0.1") as relay:
        yield relay


def test_an_executor_takes_the_drivers_deadline_from_when_it_asked(relay: HoldRelay) -> None:
    ticket = pickle.loads(pickle.dumps(relay.ticket("0", held_claim(12))))  # as it travels to an executor
    watch = ticket.watch()
    asked = time.monotonic()
    watch()
    assert watch.held_until is not None and asked + 11 < watch.held_until <= asked + 12
    watch()  # within the first half of the hold: no question asked
    assert "token=***" in repr(ticket) and ticket.token not in repr(ticket)


def test_a_lost_claim_stops_the_executor_with_the_drivers_reason(relay: HoldRelay) -> None:
    claim = held_claim(12)
    watch = relay.ticket("0", claim).watch()
    watch()
    claim.mark_lost("lease renewal failed: ServiceRequestError")
    watch._ask_after = 0.0  # the next question is due
    with pytest.raises(ProducerDisconnectedError, match=r"partition 0: the driver no longer holds the partition \(lease "
                                                        "renewal failed: ServiceRequestError\\)"):
        watch()


def test_a_claim_past_its_deadline_on_the_driver_is_lost_for_the_executor_too(relay: HoldRelay) -> None:
    watch = relay.ticket("0", held_claim(0.3)).watch()
    time.sleep(0.4)  # the driver was paused: its deadline passed before anyone asked
    with pytest.raises(ProducerDisconnectedError, match="the deadline passed"):
        watch()


def test_the_relay_refuses_a_ticket_of_another_run(relay: HoldRelay) -> None:
    relay.ticket("0", held_claim(12))
    forged = HoldTicket("127.0.0.1", relay.port, "0", "0" * 32)
    with pytest.raises(ProducerDisconnectedError, match="refused this executor's ticket"):
        forged.watch()()


def test_an_executor_that_cannot_reach_the_relay_sends_nothing() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    watch = HoldTicket("127.0.0.1", port, "3", "t" * 32).watch()
    with pytest.raises(ProducerDisconnectedError, match=r"partition 3: this executor could not reach the driver's hold "
                                                        r"relay at 127\.0\.0\.1:\d+ .*hold_relay=False"):
        watch()


def test_a_driver_that_stops_answering_stops_its_executors_at_their_deadline() -> None:
    """A paused driver: its kernel accepts the connection, nobody answers."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        watch = HoldWatch(HoldTicket("127.0.0.1", silent.getsockname()[1], "0", "t" * 32))
        watch.held_until = time.monotonic() + 1.0  # confirmed a moment ago, half of it gone
        watch()  # no answer within what is left, but the last one still holds
        assert time.monotonic() < watch.held_until + 0.3
        time.sleep(max(0.0, watch.held_until - time.monotonic()) + 0.05)
        with pytest.raises(ProducerDisconnectedError, match=r"could not be confirmed for \d+\.\ds past its deadline"):
            watch()


class Variables(dict):
    def set(self, key: str, value: str) -> None:
        self[key] = value


def test_with_the_variables_backend_the_relay_reads_the_claim_token_back(relay: HoldRelay) -> None:
    store = VariableProducerStateStore(Variables(), hold_seconds=15)
    claim = store.claim(KEY)
    watch = relay.ticket("0", claim).watch()
    watch()
    store.claim(KEY)  # another run took the partition over
    watch._ask_after = 0.0
    with pytest.raises(ProducerDisconnectedError, match="another publisher wrote a new claim token"):
        watch()


def test_the_address_towards_a_host_is_one_of_this_machines() -> None:
    assert address_towards("127.0.0.1", 15002) == "127.0.0.1"


@pytest.mark.parametrize(("text", "address"), [
    ("driver.example", ("driver.example", 0)), ("10.1.2.3:7078", ("10.1.2.3", 7078)), ("[::1]:7078", ("::1", 7078)),
    ("::1", ("::1", 0)),
])
def test_a_relay_address_is_a_host_with_an_optional_port(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["", "host:port", "host:70000", ":7078"])
def test_a_bad_relay_address_names_the_setting(text: str) -> None:
    with pytest.raises(ValueError, match="hold_relay="):
        parse_address(text)


def test_a_relay_on_a_fixed_port_listens_there() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with HoldRelay("127.0.0.1", port) as relay:
        assert relay.port == port
        relay.ticket("0", held_claim(12)).watch()()
