"""A drain's pieces without a hub: chunks taken into batches in each partition's order, ranges, ends, stalls."""

from __future__ import annotations

import logging
import queue
from typing import Any

import pytest

from airflow_provider_eh.client.partition_readers import STOP
from airflow_provider_eh.errors import IngestStalledError
from airflow_provider_eh.ingest.drain import Arrivals, Drain, Gathering
from airflow_provider_eh.ingest.events import IngestEvent


def events(partition_id: str, first: int, last: int, body: bytes = b"x") -> list[IngestEvent]:
    return [IngestEvent(partition_id, seq, str(seq * 10), None, body) for seq in range(first, last + 1)]


def sink_of(*items: tuple[str, Any], maxsize: int = 16) -> queue.Queue[Any]:
    sink: queue.Queue[Any] = queue.Queue(maxsize=maxsize)
    for item in items:
        sink.put(item)
    return sink


def seqs(batch: list[IngestEvent]) -> list[int]:
    return [e.sequence_number for e in batch]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def drain_of(ranges: dict[str, tuple[int, int]], *items: tuple[str, Any], batch_size: int | None = None,
             batch_bytes: int = 1 << 20, stall_timeout: float = 30.0, clock: Clock | None = None) -> tuple[Drain, list[str]]:
    closed: list[str] = []  # what the reader's close_partition was called with, in order
    arrivals = Arrivals(sink_of(*items), batch_size=batch_size, batch_bytes=batch_bytes)
    drain = Drain(ranges, arrivals, close_partition=closed.append, stall_timeout=stall_timeout, hub="orders",
                  owner_id="worker-1", clock=clock or Clock())
    return drain, closed


def test_a_batch_takes_the_waiting_chunks_of_its_partition_and_holds_the_others_in_arrival_order() -> None:
    arrivals = Arrivals(sink_of(("1", events("1", 0, 1)), ("0", events("0", 2, 3)), ("1", events("1", 2, 2))),
                        batch_size=None, batch_bytes=1 << 20)
    batch = events("0", 0, 1)
    assert arrivals.fill("0", batch) is True
    assert seqs(batch) == [0, 1, 2, 3]
    assert [(p, seqs(item)) for p, item in arrivals.held] == [("1", [0, 1]), ("1", [2])]
    assert arrivals.next()[0] == "1" and seqs(arrivals.next()[1]) == [2]


def test_a_chunk_over_batch_size_or_batch_bytes_ends_the_batch_and_nothing_after_it_joins() -> None:
    by_count = Arrivals(sink_of(("0", events("0", 2, 4)), ("0", events("0", 5, 5))), batch_size=4, batch_bytes=1 << 20)
    batch = events("0", 0, 1)
    assert by_count.fill("0", batch) is False and seqs(batch) == [0, 1]  # 2 + 3 > 4, and [5] must not jump ahead of it
    assert [seqs(item) for _, item in by_count.held] == [[2, 3, 4], [5]]

    by_bytes = Arrivals(sink_of(("0", events("0", 1, 1, b"12345")), ("0", events("0", 2, 2, b"1"))),
                        batch_size=None, batch_bytes=8)
    batch = events("0", 0, 0, b"1234")
    assert by_bytes.fill("0", batch) is False and seqs(batch) == [0]
    assert [seqs(item) for _, item in by_bytes.held] == [[1], [2]]


def test_the_end_or_an_error_of_the_partition_ends_its_batch_but_not_anothers_chunks() -> None:
    boom = OSError("link lost")
    arrivals = Arrivals(sink_of(("0", STOP), ("0", events("0", 2, 2)), ("1", boom)), batch_size=None, batch_bytes=1 << 20)
    batch = events("0", 0, 1)
    assert arrivals.fill("0", batch) is False and seqs(batch) == [0, 1]
    assert [item for _, item in arrivals.held][0] is STOP and [item for _, item in arrivals.held][2] is boom


def test_filling_takes_no_more_than_the_queue_holds_at_once() -> None:
    arrivals = Arrivals(sink_of(*[("0", events("0", i, i)) for i in range(1, 4)], maxsize=3),
                        batch_size=None, batch_bytes=1 << 20)
    arrivals.sink.maxsize = 2  # the reader could refill while the batch is filled: it takes one queue's worth
    batch = events("0", 0, 0)
    arrivals.fill("0", batch)
    assert seqs(batch) == [0, 1, 2] and arrivals.sink.qsize() == 1


def test_take_gives_the_events_within_the_range_and_a_commit_to_the_target_stops_the_partition() -> None:
    drain, closed = drain_of({"0": (4, 7)}, ("0", events("0", 3, 6)), ("0", events("0", 7, 9)))
    p, batch = drain.take()
    assert p == "0" and seqs(batch) == [5, 6, 7]  # 3 and 4 were committed already, 8 and 9 are past the target
    drain.committed("0", 7)
    assert drain.after == {"0": 7} and drain.receiving == set() and closed == ["0"]


def test_a_commit_short_of_the_target_keeps_receiving() -> None:
    drain, closed = drain_of({"0": (-1, 9)}, ("0", events("0", 0, 4)))
    _, batch = drain.take()
    drain.committed("0", batch[-1].sequence_number)
    assert drain.receiving == {"0"} and closed == [] and drain.after["0"] == 4


def test_a_stopped_partitions_queued_chunks_and_its_end_ask_nothing() -> None:
    drain, closed = drain_of({"0": (-1, 9), "1": (-1, 9)}, ("0", events("0", 0, 1)), ("1", STOP))
    drain.stop("0")
    drain.stop("0")  # once only
    assert closed == ["0"]
    assert drain.take() is None  # partition 0's chunk, queued before it was closed
    assert drain.take() is None and drain.receiving == set()  # partition 1 ended: not closed again
    assert closed == ["0"]


def test_a_receive_error_is_raised() -> None:
    drain, _ = drain_of({"0": (-1, 9)}, ("0", ConnectionError("amqp:not-found")))
    with pytest.raises(ConnectionError, match="amqp:not-found"):
        drain.take()


def test_a_partition_idle_past_the_stall_timeout_fails_naming_where_it_stopped() -> None:
    clock = Clock()
    drain, _ = drain_of({"1": (2, 5)}, ("1", []), ("1", events("1", 3, 3)), ("1", []), ("1", []),
                        stall_timeout=10.0, clock=clock)
    clock.now += 9
    assert drain.take() == ("1", [])  # idle, within the timeout
    clock.now += 9
    _, batch = drain.take()  # an event: the wait starts again
    drain.committed("1", batch[-1].sequence_number)
    clock.now += 10
    assert drain.take() == ("1", [])
    clock.now += 0.5
    with pytest.raises(IngestStalledError, match=r"Partition '1' of 'orders': no event after seq 3 for 10 s although seq 5"):
        drain.take()


def test_a_gap_after_the_checkpoint_is_logged_as_events_lost_to_retention(caplog: pytest.LogCaptureFixture) -> None:
    drain, _ = drain_of({"0": (4, 20)}, ("0", events("0", 9, 10)))
    with caplog.at_level(logging.WARNING, logger="airflow_provider_eh.ingest.drain"):
        _, batch = drain.take()
    assert seqs(batch) == [9, 10]
    assert "Instance worker-1: partition 0 resumes at seq 9 but its checkpoint is 4: events 5-8" in caplog.text


def test_gathering_holds_a_partition_until_its_time_bytes_count_or_target():
    clock = Clock()
    gathering = Gathering(10.0, 5, 1000, clock=clock)
    targets = {"0": 99, "1": 99, "2": 3}
    gathering.add("0", events("0", 0, 1))
    gathering.add("1", events("1", 0, 5))  # reaches batch_size: split into batches of 5
    gathering.add("2", events("2", 0, 3))  # reaches its target
    assert [(p, seqs(b)) for p, b in gathering.due(targets, {"0", "1", "2"})] == [
        ("1", [0, 1, 2, 3, 4]), ("1", [5]), ("2", [0, 1, 2, 3])]
    gathering.add("0", events("0", 2, 2))
    clock.now += 9.9
    assert list(gathering.due(targets, {"0"})) == []
    clock.now += 0.1
    assert [(p, seqs(b)) for p, b in gathering.due(targets, {"0"})] == [("0", [0, 1, 2])]
    gathering.add("0", events("0", 3, 3, body=b"x" * 1000))  # reaches batch_bytes
    assert [seqs(b) for _, b in gathering.due(targets, {"0"})] == [[3]]
    gathering.add("0", events("0", 4, 4))
    assert [seqs(b) for _, b in gathering.due(targets, set())] == [[4]]  # its link ended
    gathering.add("0", events("0", 5, 5))
    assert [seqs(b) for _, b in gathering.rest()] == [[5]]


def test_gathering_of_zero_seconds_makes_every_take_a_batch():
    gathering = Gathering(0.0, None, 1000)
    gathering.add("0", events("0", 0, 1))
    assert [seqs(b) for _, b in gathering.due({"0": 99}, {"0"})] == [[0, 1]]


def test_events_held_for_a_later_commit_are_no_gap(caplog):
    drain, _ = drain_of({"0": (-1, 9)}, ("0", events("0", 0, 4)), ("0", events("0", 5, 9)), batch_size=5)
    with caplog.at_level(logging.WARNING, logger="airflow_provider_eh.ingest.drain"):
        assert seqs(drain.take()[1]) == [0, 1, 2, 3, 4]
        assert seqs(drain.take()[1]) == [5, 6, 7, 8, 9]  # taken before the first five are committed (gathered)
    assert "resumes at seq" not in caplog.text
