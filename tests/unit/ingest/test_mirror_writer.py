"""The blob-checkpoint writer behind the commits: the newest commit per partition, at most once per interval."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest.limits import RunLimits
from airflow_provider_eh.ingest.mirror import BLOB_CHECKPOINTED, MirrorWriter


class FakeRun:
    """Records the blob writes and the steps announced after them."""

    def __init__(self, fail: bool = False):
        self.writes: list[tuple[str, int, str | None, float]] = []
        self.stages: list[tuple[str, str, int, int, int]] = []
        self.wrote = threading.Event()
        self.fail = fail
        self._mirror_writer = None

    def _mirror(self, partition_id: str, sequence_number: int, offset: str | None) -> None:
        if self.fail:
            raise OSError("the storage account refused the write")
        self.writes.append((partition_id, sequence_number, offset, time.monotonic()))
        self.wrote.set()

    def _stage(self, stage: str, partition_id: str, first: int, last: int, batch: int) -> None:
        self.stages.append((stage, partition_id, first, last, batch))


def test_commits_within_the_interval_are_written_once_as_the_newest_and_flush_writes_the_last():
    run = FakeRun()
    writer = MirrorWriter(run, interval=30.0)
    writer.submit("0", 0, 9, "90", batch=1)
    assert run.wrote.wait(10)
    for batch, last in enumerate(range(19, 60, 10), start=2):  # five more commits while the interval runs
        writer.submit("0", last - 9, last, str(last * 10), batch=batch)
    time.sleep(0.3)
    assert [w[:3] for w in run.writes] == [("0", 9, "90")]  # the interval holds the others back
    writer.flush()
    assert [w[:3] for w in run.writes] == [("0", 9, "90"), ("0", 59, "590")]
    # the second write covers batches 2..6: announced with the first sequence number of batch 2
    assert run.stages == [(BLOB_CHECKPOINTED, "0", 0, 9, 1), (BLOB_CHECKPOINTED, "0", 10, 59, 6)]


def test_each_partition_keeps_its_own_interval():
    run = FakeRun()
    writer = MirrorWriter(run, interval=0.2)
    writer.submit("0", 0, 4, None, batch=1)
    writer.submit("1", 0, 7, None, batch=2)
    deadline = time.monotonic() + 10
    while len(run.writes) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    writer.submit("0", 5, 8, None, batch=3)
    writer.submit("0", 9, 12, None, batch=4)
    while len(run.writes) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    writer.flush()
    by_partition = {p: [(seq, t) for q, seq, _, t in run.writes if q == p] for p in ("0", "1")}
    assert [seq for seq, _ in by_partition["0"]] == [4, 12]
    assert [seq for seq, _ in by_partition["1"]] == [7]
    assert by_partition["0"][1][1] - by_partition["0"][0][1] >= 0.19  # not before the partition's interval passed


def test_interval_zero_writes_every_commit_the_writer_has_not_yet_superseded():
    run = FakeRun()
    writer = MirrorWriter(run, interval=0.0)
    for batch in range(1, 4):
        writer.submit("0", batch * 10, batch * 10 + 9, None, batch=batch)
        assert run.wrote.wait(10)
        run.wrote.clear()
    writer.flush()
    assert [w[1] for w in run.writes] == [19, 29, 39]


def test_a_failed_write_is_raised_to_the_committing_thread():
    run = FakeRun(fail=True)
    writer = MirrorWriter(run, interval=0.0)
    writer.submit("0", 0, 1, None, batch=1)
    with pytest.raises(OSError, match="refused the write"):
        writer.flush()


def test_a_negative_interval_is_refused_by_name():
    with pytest.raises(SinkConfigError, match="checkpoint_interval"):
        RunLimits(checkpoint_interval=-1)
