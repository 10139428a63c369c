"""The units ``send_partition`` is made of: the walk over the events, the batch sender, the batch filler."""

from __future__ import annotations

import logging
import time

import pytest
from azure.eventhub import EventDataBatch

from airflow_provider_eh.errors import EventTooLargeError, ProducerDisconnectedError
from airflow_provider_eh.publishing.fingerprint import Fingerprint
from airflow_provider_eh.publishing.plan import PartitionPlan
from airflow_provider_eh.publishing.sender import BatchFiller, BatchSender, EventWalk, Progress


class _Client:
    """Builds real SDK batches of ``max_size`` bytes and records what it was asked to send."""

    def __init__(self, max_size: int = 600, fail: BaseException | None = None):
        self.max_size = max_size
        self.fail = fail
        self.sent: list[int] = []

    def create_batch(self, partition_id: str) -> EventDataBatch:
        return EventDataBatch(max_size_in_bytes=self.max_size, partition_id=partition_id)

    def send_batch(self, batch: EventDataBatch, timeout: float) -> None:
        if self.fail is not None:
            raise self.fail
        self.sent.append(len(batch))


def _plan(count: int) -> PartitionPlan:
    return PartitionPlan(group="g", partition_id="0", batch_id="b" * 64, owner_level=1, event_count=count,
                         fingerprint="f", action="send")


def test_the_walk_counts_and_fingerprints_every_event_and_yields_the_planned_ones() -> None:
    events = [(f"e{i}".encode(), {"i": i}) for i in range(6)]
    walk = EventWalk({1, 4}, fingerprint=True)
    assert [(i, body) for i, body, _ in walk.planned(events)] == [(1, b"e1"), (4, b"e4")]
    expected = Fingerprint()
    for body, props in events:
        expected.update(body, props)
    assert walk.count == 6 and walk.fingerprint is not None and walk.fingerprint.hexdigest() == expected.hexdigest()


def test_the_walk_without_a_plan_of_indexes_yields_every_event_and_may_skip_the_fingerprint() -> None:
    walk = EventWalk(None, fingerprint=False)
    assert [i for i, _, _ in walk.planned([(b"a", None), (b"b", None)])] == [0, 1]
    assert walk.count == 2 and walk.fingerprint is None


def test_the_batch_sender_checks_the_lease_before_each_batch_and_counts() -> None:
    calls: list[str] = []
    client = _Client()
    sender = BatchSender(client, send_timeout=1.0, stop_check=lambda: calls.append("check"), fenced=False)
    sender.send(client.create_batch("0"), 3)
    sender.send(client.create_batch("0"), 2)
    assert calls == ["check", "check"] and (sender.batches, sender.sent) == (2, 5)


def test_the_batch_sender_stops_when_the_lease_check_raises() -> None:
    client = _Client()

    def lost() -> None:
        raise ProducerDisconnectedError("deadline passed")

    sender = BatchSender(client, send_timeout=1.0, stop_check=lost, fenced=False)
    with pytest.raises(ProducerDisconnectedError):
        sender.send(client.create_batch("0"), 1)
    assert client.sent == [] and sender.sent == 0


def test_a_refusal_of_the_hub_is_a_disconnect_only_on_a_fenced_link() -> None:
    refusal = RuntimeError("amqp:link:detach-forced producer-epoch-stolen")
    fenced = BatchSender(_Client(fail=refusal), send_timeout=1.0, stop_check=None, fenced=True)
    with pytest.raises(ProducerDisconnectedError, match="another publisher claimed the partition"):
        fenced.send(EventDataBatch(), 1)
    plain = BatchSender(_Client(fail=refusal), send_timeout=1.0, stop_check=None, fenced=False)
    with pytest.raises(RuntimeError):
        plain.send(EventDataBatch(), 1)


def test_the_filler_sends_each_full_batch_and_the_last_one() -> None:
    client = _Client(max_size=600)
    sender = BatchSender(client, send_timeout=1.0, stop_check=None, fenced=False)
    filler = BatchFiller(client, _plan(12), sender, Progress("w", time.monotonic()), None)
    for seq in range(12):
        filler.put(seq, b"x" * 100, None, seq)
    filler.finish()
    assert sum(client.sent) == 12 and len(client.sent) > 1 and sender.sent == 12
    filler.finish()  # nothing left: nothing more sent
    assert sum(client.sent) == 12


def test_an_event_larger_than_a_message_names_its_partition_and_index() -> None:
    client = _Client(max_size=300)
    filler = BatchFiller(client, _plan(1), BatchSender(client, send_timeout=1.0, stop_check=None, fenced=False),
                         Progress("w", time.monotonic()), None)
    with pytest.raises(EventTooLargeError, match="partition 0 batch .*: event 7 does not fit"):
        filler.put(7, b"x" * 1000, None, 0)
    assert client.sent == []


def test_progress_is_logged_at_most_every_interval(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="airflow_provider_eh.publishing.sender"):
        progress = Progress("group g partition 0", time.monotonic() - 100)
        progress.note(50)
        progress.note(60)  # within the interval of the first line
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("group g partition 0: 50 events sent"), lines


