"""The state store times each ledger operation a caller makes and tells its ``on_operation``, without Airflow:
each outermost operation once (the claim's own write, a write's read-back are part of it), with its key,
whether it succeeds or fails, and a timer that fails never fails the operation."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.errors import ProducerDisconnectedError
from airflow_provider_eh.publishing import IdempotentPublisher, SendReport, StateKey
from airflow_provider_eh.publishing.in_doubt import InDoubt
from airflow_provider_eh.publishing.records import CommittedBatch
from airflow_provider_eh.publishing.state import OPERATIONS
from airflow_provider_eh.publishing.variable_store import VariableProducerStateStore
from tests.support.variables import DictVariables

KEY = StateKey("ns.example", "hub", "g", "0")


class Timings:
    """An ``on_operation`` that keeps ``(operation, key, seconds)``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, StateKey, float]] = []

    def __call__(self, operation: str, key: StateKey, seconds: float) -> None:
        self.seen.append((operation, key, seconds))

    @property
    def operations(self) -> list[str]:
        return [operation for operation, _, _ in self.seen]


def test_a_publish_of_a_new_batch_reports_each_ledger_operation_once_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    timings = Timings()
    store = VariableProducerStateStore(DictVariables(), on_operation=timings)
    monkeypatch.setattr(IdempotentPublisher, "_partition_end", lambda self, pid, producer=None: 40)
    monkeypatch.setattr(InDoubt, "fence", lambda self, key, level: None)  # no hub here
    publisher = IdempotentPublisher(EventHubsEndpoint("ns.example", "hub", connection_string="Endpoint=sb://x/"),
                                    store, producer_group="g")
    session = publisher.begin("0", "b" * 64, 3, "fp")
    publisher.commit(session, SendReport("0", "b" * 64, 3, "fp", 3, 43, 0.1))
    # the claim (its own token write and read-back inside it), is b committed, the intent, its records, the commit
    assert timings.operations == ["claim", "lookup", "write", "record", "write", "release"]
    assert {key for _, key, _ in timings.seen} == {KEY}
    assert all(seconds >= 0 for _, _, seconds in timings.seen)
    assert set(timings.operations) <= set(OPERATIONS)


def test_reads_pages_and_prunes_are_timed_and_a_failed_operation_still_reports_its_time() -> None:
    timings = Timings()
    variables = DictVariables()
    store = VariableProducerStateStore(variables, on_operation=timings)
    claim = store.claim(KEY)
    for ordinal in range(3):
        record = CommittedBatch(1, ordinal, ordinal, ordinal, batch_id=f"b{ordinal}", ordinal=ordinal)
        store.record_committed(claim, record)
        claim.state.count_committed(record)
    store.prune(claim, claim.state, keep_last=1)
    store.release(claim)
    store.read(KEY)
    store.history(KEY, limit=5)
    assert timings.operations == ["claim", "record", "record", "record", "prune", "release", "read", "history"]

    timings.seen.clear()
    claim.mark_lost("taken over in this test")
    with pytest.raises(ProducerDisconnectedError):
        store.write(claim, claim.state)
    assert timings.operations == ["write"]


def test_a_timer_that_fails_never_fails_the_operation_and_no_timer_times_nothing() -> None:
    def broken(operation: str, key: StateKey, seconds: float) -> Any:
        raise OSError("the metrics socket is gone")

    store = VariableProducerStateStore(DictVariables(), on_operation=broken)
    store.release(store.claim(KEY))
    assert store.read(KEY) is not None
    assert VariableProducerStateStore(DictVariables()).on_operation is None
