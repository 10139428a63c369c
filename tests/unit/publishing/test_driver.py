"""The one driver loop and retry policy both publishing paths run (with a fake publisher)."""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from azure.eventhub.exceptions import AuthenticationError, ConnectionLostError

from airflow_provider_eh.errors import InvalidEventError, ProducerDisconnectedError
from airflow_provider_eh.publishing import driver
from airflow_provider_eh.publishing.driver import SendOutcome, backoff_seconds, drive, is_retryable, is_transient


def test_one_rule_for_what_a_new_attempt_and_what_an_airflow_retry_can_cure() -> None:
    lost = ProducerDisconnectedError("another publisher claimed the partition")
    assert not is_transient(lost) and is_retryable(lost)  # fenced: leave it to Airflow's back-off
    assert is_transient(ConnectionLostError("gone")) and is_retryable(ConnectionLostError("gone"))
    assert not is_transient(AuthenticationError("no")) and not is_retryable(AuthenticationError("no"))
    assert not is_transient(InvalidEventError("bad")) and not is_transient(RuntimeError("bug"))
    assert [backoff_seconds(a) for a in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 10.0]


def test_an_outcome_travels_between_processes_as_data() -> None:
    outcome = SendOutcome.failed("3", ConnectionLostError("link\ndetail"), keep=True)
    back = pickle.loads(pickle.dumps(outcome))
    assert back.error is None and outcome.error is not None
    assert (back.error_type, back.message, back.transient, back.retryable, back.ok) == ("ConnectionLostError", "link", True, True, False)


@dataclass
class Plan:
    send_count: int = 1


@dataclass
class Session:
    pid: str
    plan: Plan = field(default_factory=Plan)


@dataclass
class FakePublisher:
    producer_group: str = "g"
    log: list[tuple[str, str]] = field(default_factory=list)

    def begin(self, pid: str, batch_id: str, count: int, fp: str, *, producer: Any = None) -> Session:
        self.log.append(("begin", pid))
        return Session(pid)

    def commit(self, session: Session, report: Any, *, producer: Any = None) -> str:
        self.log.append(("commit", session.pid))
        return f"result {session.pid}"

    def abort(self, session: Session) -> None:
        self.log.append(("abort", session.pid))


def test_transient_failures_are_begun_again_and_others_end_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    class DriverTime:
        """The driver's own ``time``: its back-off sleeps are recorded, and nobody else's. Replacing
        ``time.sleep`` itself would stop every thread of the process from sleeping (a background thread
        of an earlier test file spinning through its waits appended 100,000 of them)."""

        sleep = staticmethod(slept.append)

        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

    monkeypatch.setattr(driver, "time", DriverTime())
    pub = FakePublisher()
    failures = {"0": [ConnectionLostError("lost")], "1": []}

    def send(sessions: Any, producer: Any) -> dict[str, SendOutcome]:
        return {pid: SendOutcome.failed(pid, failures[pid].pop(), keep=True) if failures[pid] else SendOutcome.sent(pid, "r")
                for pid in sessions}

    results = drive(pub, "b" * 64, {"0": (1, "a"), "1": (1, "b")}, send, attempts=3)  # type: ignore[arg-type]
    assert results == {"0": "result 0", "1": "result 1"} and slept == [2.0]
    assert pub.log == [("begin", "0"), ("begin", "1"), ("abort", "0"), ("commit", "1"), ("begin", "0"), ("commit", "0")]

    bad = InvalidEventError("row 7 is bad")
    with pytest.raises(InvalidEventError, match="row 7") as raised:
        drive(FakePublisher(), "b" * 64, {"0": (1, "a")}, lambda s, p: {"0": SendOutcome.failed("0", bad, keep=True)},
              attempts=3)  # type: ignore[arg-type]
    assert raised.value is bad and slept == [2.0]  # no second attempt

    with pytest.raises(RuntimeError, match="partition 0: ConnectionLostError"):
        drive(FakePublisher(), "b" * 64, {"0": (1, "a")},  # type: ignore[arg-type]
              lambda s, p: {"0": SendOutcome.failed("0", ConnectionLostError("x"))}, attempts=2,
              failure=lambda pid, o, n: RuntimeError(f"partition {pid}: {o.error_type}"))
    assert slept == [2.0, 2.0]


def test_one_rule_ranks_which_partition_error_is_raised_on_every_path() -> None:
    """An SDK AuthenticationError (no retry cures it) is raised before a fenced producer (a retry may),
    whether the partitions failed to begin, to send, or in the local path's per-partition threads."""
    fenced, refused = ProducerDisconnectedError("another publisher claimed partition 0"), AuthenticationError("bad key")
    assert driver.rank_errors([("0", fenced), ("1", refused)]) == [("1", refused), ("0", fenced)]

    class FailingBegin(FakePublisher):
        def begin(self, pid: str, batch_id: str, count: int, fp: str, *, producer: Any = None) -> Session:
            raise {"0": fenced, "1": refused}[pid]

    with pytest.raises(AuthenticationError) as raised:
        drive(FailingBegin(), "b" * 64, {"0": (1, "a"), "1": (1, "b")}, lambda s, p: {}, attempts=1)  # type: ignore[arg-type]
    assert raised.value is refused

    with pytest.raises(AuthenticationError) as raised:
        drive(FakePublisher(), "b" * 64, {"0": (1, "a"), "1": (1, "b")},  # type: ignore[arg-type]
              lambda s, p: {"0": SendOutcome.failed("0", fenced, keep=True), "1": SendOutcome.failed("1", refused, keep=True)},
              attempts=1)
    assert raised.value is refused

    from airflow_provider_eh.publishing.publisher import IdempotentPublisher

    local = IdempotentPublisher(None, None, producer_group="g")  # type: ignore[arg-type]
    local.prepare = lambda events, default_partition=None: {"0": [], "1": []}  # type: ignore[method-assign]

    def publish_partition(pid: str, batch_id: str, events: Any) -> Any:
        raise {"0": fenced, "1": refused}[pid]

    local.publish_partition = publish_partition  # type: ignore[method-assign]
    with pytest.raises(AuthenticationError) as raised:
        local.publish([], batch_id="b" * 64)
    assert raised.value is refused


def test_the_raised_error_carries_the_partitions_committed_and_pending() -> None:
    """The task's message says which partitions a retry resumes: the error of a run that committed 1 and 3
    and failed 0 and 2 carries both sets (sorted by number), whether ``failure`` built it or it was raised."""
    bad = InvalidEventError("row 7 is bad")
    counts = {pid: (1, pid) for pid in ("0", "1", "2", "3", "10")}

    def send(sessions: Any, producer: Any) -> dict[str, SendOutcome]:
        return {pid: SendOutcome.failed(pid, bad, keep=True) if pid in ("0", "2") else SendOutcome.sent(pid, "r")
                for pid in sessions}

    seen: list[driver.Progress] = []
    with pytest.raises(InvalidEventError) as raised:
        drive(FakePublisher(), "b" * 64, counts, send, attempts=1,  # type: ignore[arg-type]
              failure=lambda pid, o, progress: seen.append(progress) or bad)
    assert driver.progress_of(raised.value) == driver.Progress(("1", "3", "10"), ("0", "2")) == seen[0]
    # with the committed partitions' results, for the task's metrics
    assert driver.progress_of(raised.value).results == ("result 1", "result 3", "result 10")  # type: ignore[union-attr]

    class FailingCommit(FakePublisher):
        def commit(self, session: Session, report: Any, *, producer: Any = None) -> str:
            if session.pid == "2":
                raise OSError("state store unreachable")
            return super().commit(session, report, producer=producer)

    with pytest.raises(OSError) as raised_at_commit:
        drive(FailingCommit(), "b" * 64, counts, lambda s, p: {pid: SendOutcome.sent(pid, "r") for pid in s}, attempts=1)  # type: ignore[arg-type]
    # committed in the order of the partition ids as text: 0, 1, 10, then 2 failed and 3 was not reached
    assert driver.progress_of(raised_at_commit.value) == driver.Progress(("0", "1", "10"), ("2", "3"))
