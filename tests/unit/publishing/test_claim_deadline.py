"""A claim knows until when it is surely held, and stops the sender once that has passed."""

from __future__ import annotations

import pytest

from airflow_provider_eh.errors import ProducerDisconnectedError
from airflow_provider_eh.publishing import blob_store
from airflow_provider_eh.publishing import claim as claim_module
from airflow_provider_eh.publishing.claim import StateClaim
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from airflow_provider_eh.publishing.variable_store import VariableProducerStateStore

KEY = StateKey("ns", "hub", "g", "0")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(claim_module.time, "monotonic", clock)
    return clock


def test_a_claim_past_its_deadline_stops_the_sender_and_says_why(clock: Clock) -> None:
    claim = StateClaim(KEY, ProducerState.new(KEY), None, "blob c/x")
    claim.hold(started=clock.now, seconds=15, margin=3)
    clock.now += 11.9
    claim.check()  # 0.1 s of the hold left
    clock.now += 0.2  # a pause: SIGSTOP, a frozen VM, a renewal that hung
    with pytest.raises(ProducerDisconnectedError, match=r"lost ownership of blob c/x \(its hold was last confirmed too long"
                                                       r" ago: the deadline passed 0\.1s ago"):
        claim.check()
    clock.now -= 5  # the claim stays lost: a later renewal cannot revive it
    claim.hold(started=clock.now, seconds=15, margin=3)
    with pytest.raises(ProducerDisconnectedError):
        claim.check()


def test_a_renewal_moves_the_deadline_from_when_it_was_sent(clock: Clock) -> None:
    claim = StateClaim(KEY, ProducerState.new(KEY), None, "blob c/x")
    claim.hold(started=clock.now, seconds=15, margin=3)
    sent = clock.now + 5
    clock.now += 9  # the renewal sent at +5 answered at +9: held from +5, not +9
    claim.hold(started=sent, seconds=15, margin=3)
    assert claim.held_until == pytest.approx(sent + 12)
    claim.hold(started=sent - 4, seconds=15, margin=3)  # an older confirmation never shortens it
    assert claim.held_until == pytest.approx(sent + 12)


def test_blob_calls_under_a_lease_are_bounded_well_below_it() -> None:
    assert blob_store.call_timeouts(15) == {"timeout": 5, "connection_timeout": 5.0, "read_timeout": 5.0}
    assert blob_store.safety_margin(15) == 3.0 and blob_store.safety_margin(60) == 12.0


class Variables(dict):
    def set(self, key: str, value: str) -> None:
        self[key] = value


def test_the_variables_claim_reads_its_token_back_before_each_sdk_batch(clock: Clock) -> None:
    variables = Variables()
    store = VariableProducerStateStore(variables, hold_seconds=15)
    paused = store.claim(KEY)
    paused.check()
    taker = store.claim(KEY)  # a second run claimed while the first was paused
    with pytest.raises(ProducerDisconnectedError, match="another publisher wrote a new claim token"):
        paused.check()
    taker.check()
    clock.now += 16  # the token is still ours: a fresh read confirms it again
    taker.check()


def test_a_variables_claim_whose_token_cannot_be_read_stops(clock: Clock) -> None:
    class Broken(Variables):
        fail = False

        def get(self, key: str, default: object = None) -> object:
            if self.fail:
                raise ConnectionError("the task API does not answer")
            return super().get(key, default)

    variables = Broken()
    claim = VariableProducerStateStore(variables).claim(KEY)
    variables.fail = True
    with pytest.raises(ProducerDisconnectedError, match="the claim token could not be read back: ConnectionError"):
        claim.check()


def test_a_renewal_woken_after_the_deadline_records_the_deadline_not_its_own_failure(clock: Clock) -> None:
    """After a pause the renewal thread and the sender wake together: either way the reason is the deadline."""
    claim = StateClaim(KEY, ProducerState.new(KEY), None, "blob c/x")
    claim.hold(started=clock.now, seconds=15, margin=3)
    assert claim.lapse_if_due() is False
    clock.now += 20
    assert claim.lapse_if_due() is True
    claim.mark_lost("lease renewal failed: ResourceExistsError")  # too late: the first reason stays
    with pytest.raises(ProducerDisconnectedError, match="the deadline passed 8.0s ago"):
        claim.check()


def test_a_variables_claim_may_write_long_after_its_last_confirmation_when_the_token_is_still_its_own(clock: Clock) -> None:
    """A Spark stage or a long read-back between two writes is no pause: the write's own read-back is the proof."""
    store = VariableProducerStateStore(Variables(), hold_seconds=15)
    claim = store.claim(KEY)
    clock.now += 600
    store.write(claim, claim.state)
    claim.check()
    store.claim(KEY)  # a takeover
    clock.now += 600
    with pytest.raises(ProducerDisconnectedError, match="another publisher wrote a new claim token"):
        store.write(claim, claim.state)
