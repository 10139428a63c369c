"""The bounded ingestion run: from each partition's SQL checkpoint up to its last event at start.

One :class:`IngestRun` is one instance (one mapped task instance). Its loop:

1. read the SQL checkpoints; the partitions still short of their target (the last enqueued sequence
   number read when the run started) are *pending*; stop when none is, or when the event or time
   budget is spent;
2. with a blob container: list ownership, renew this instance's claims and claim what
   :func:`~airflow_provider_eh.ingest.ownership.plan_claims` says; without one, every partition is ours;
3. drain the owned pending partitions on parallel links, in batches. Each batch: receive -> one SQL transaction (rows,
   dead letters, sessions, dedupe marks, checkpoint compare-and-set) -> commit -> the standard blob
   checkpoint (``BlobCheckpointStore.update_checkpoint``, written behind the commits by
   :mod:`~airflow_provider_eh.ingest.mirror`) so sensors and other tools see progress.
   Claims are renewed between batches; a lost claim ends the partition's drain;
4. back to 1, waiting ``poll_interval`` when pending partitions are owned by live instances (a dead
   instance's claims expire, and this loop then takes its partitions over).

The SQL checkpoint is the source of truth: a crash between any two steps resumes from it, and the
compare-and-set on it stops two instances from both committing the same range.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_provider_eh import steps
from airflow_provider_eh.checkpoints.blob_layout import CheckpointReader
from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.partition_readers import PartitionsReader
from airflow_provider_eh.client.partitions import check_partition_ids
from airflow_provider_eh.errors import PartitionTakenOverError, SinkConfigError
from airflow_provider_eh.ingest.drain import Arrivals, Drain, Gathering
from airflow_provider_eh.ingest.events import IngestEvent
from airflow_provider_eh.ingest.garbage_collection import run_heap
from airflow_provider_eh.ingest.hub_ends import HubEnds, last_enqueued
from airflow_provider_eh.ingest.limits import RunLimits
from airflow_provider_eh.ingest.mirror import BLOB_CHECKPOINTED, MirrorWriter, mirrored_positions, write_checkpoint
from airflow_provider_eh.ingest.ownership import PartitionOwnership, is_live, plan_claims
from airflow_provider_eh.ingest.processor import BatchProcessor, BatchResult
from airflow_provider_eh.ingest.sinks.contract import Sink

log = logging.getLogger(__name__)

# Points of the batch loop, in order; each is announced as the step ``ingest_<stage>`` (count: the
# batch's number in this process; detail: its partition and first and last sequence numbers) to the
# observers of :mod:`airflow_provider_eh.steps`, where crash tests kill the process
# (:func:`airflow_provider_eh.testing.crash.crash_at`, e.g. ``"ingest_committed:3"``).
RECEIVED = "received"
ROWS_WRITTEN = "rows_written"
COMMITTED = "committed"
STAGES = (RECEIVED, ROWS_WRITTEN, COMMITTED, BLOB_CHECKPOINTED)  # the last announced by the mirror writer

# Events per receive call; a transaction takes as many received chunks of a partition as are
# already waiting, up to ``batch_size`` events and ``batch_bytes`` of bodies.
RECEIVE_CHUNK = 500


@dataclass
class PartitionReport:
    """What one run did on one partition."""

    target: int
    start: int
    checkpoint: int
    batches: int = 0
    counts: BatchResult = field(default_factory=BatchResult)
    # the partition's last enqueued sequence number as last read from the hub (HubEnds), and the events
    # enqueued after the checkpoint then (None: no batch yet)
    last_enqueued: int | None = None
    lag: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "start": self.start, "checkpoint": self.checkpoint, "batches": self.batches,
                **self.counts.to_dict(), "last_enqueued": self.last_enqueued, "lag": self.lag}


@dataclass(frozen=True)
class IngestedBatch:
    """
    One batch a run committed, as the run's ``on_batch`` receives it.

    :param partition_id: its partition.
    :param counts: what its transaction did (rows, duplicates, dead letters, ...).
    :param seconds: from the start of its processing to its transaction committed (receiving it is not counted).
    :param lag: events enqueued after its last one, as the hub's end was last read (``None``: not known).
    :param enqueued_time: when its last event was enqueued (``None``: unknown).
    """

    partition_id: str
    counts: BatchResult
    seconds: float
    lag: int | None
    enqueued_time: datetime | None


class IngestRun:
    """
    One bounded ingestion run of one instance.

    :param endpoint: the hub.
    :param consumer_group: the consumer group read as (and named in checkpoints and ownership).
    :param store: the sink (:mod:`~airflow_provider_eh.ingest.sinks`): a SQL store, or a Delta table.
    :param processor: what each batch does in its transaction.
    :param owner_id: this instance's stable id; a retry of the same task instance passes the same one.
    :param container_client: the blob container of the standard checkpoint and ownership blobs
        (from ``BlobStorageHook``); ``None``: a single instance, SQL checkpoints only.
    :param limits: bounds and sharing.
    :param on_batch: called with each :class:`IngestedBatch` once it is committed, in the run's thread (the
        operator emits its metrics from it); what it raises ends the run.
    """

    def __init__(
        self,
        endpoint: EventHubsEndpoint,
        consumer_group: str,
        store: Sink,
        processor: BatchProcessor,
        *,
        owner_id: str,
        container_client: Any = None,
        limits: RunLimits | None = None,
        on_batch: Callable[[IngestedBatch], None] | None = None,
    ):
        self.endpoint = endpoint
        self.on_batch = on_batch
        self.consumer_group = consumer_group
        self.store = store
        self.processor = processor
        self.owner_id = owner_id
        self.limits = limits or RunLimits()
        self.checkpoint_store: Any = None
        self.ownership: PartitionOwnership | None = None
        if container_client is not None:
            from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore

            self.checkpoint_store = BlobCheckpointStore(
                container_client.url, container_client.container_name, container_client=container_client
            )
            self.ownership = PartitionOwnership(
                self.checkpoint_store,
                CheckpointReader(container_client, endpoint.fully_qualified_namespace, endpoint.eventhub_name),
                fully_qualified_namespace=endpoint.fully_qualified_namespace,
                eventhub_name=endpoint.eventhub_name,
                consumer_group=consumer_group,
                owner_id=owner_id,
                expiry=self.limits.ownership_expiry,
            )
        elif (self.limits.instances or 1) > 1:
            raise SinkConfigError(
                f"{self.limits.instances} instances need a blob container for ownership claims; pass one, or run one instance"
            )
        self.reports: dict[str, PartitionReport] = {}
        self._hub_ends: HubEnds | None = None  # per partition, the hub's last enqueued sequence number, kept fresh
        self._events = 0
        self._batches = 0
        self._mirror_writer: MirrorWriter | None = None
        self._deadline: float | None = None
        self._stopped = threading.Event()

    @property
    def committed_events(self) -> int:
        """Events this run committed so far (each batch with its SQL checkpoint)."""
        return self._events

    def stop(self) -> None:
        """Ask the run to end after the batch being committed (safe from another thread)."""
        self._stopped.set()

    # -- bounds ----------------------------------------------------------------------------

    def _targets(self, client: Any) -> tuple[dict[str, int], dict[str, int]]:
        """Each partition's last enqueued sequence number now (``-1`` when empty), and the run's bounds
        (``upto`` applied)."""
        ends = self._read_targets(client)
        if self.limits.upto is None:
            return ends, dict(ends)
        return ends, {p: min(ends[p], int(last)) for p, last in self.limits.upto.items() if p in ends}

    def _read_targets(self, client: Any) -> dict[str, int]:
        ids = [str(p) for p in client.get_partition_ids()]
        if self.limits.partition_ids is not None:
            wanted = {str(p) for p in self.limits.partition_ids}
            check_partition_ids(self.endpoint.eventhub_name, wanted, ids)
            ids = [p for p in ids if p in wanted]
        return {p: last_enqueued(client, p) for p in ids}

    def _budget_left(self) -> bool:
        if self._stopped.is_set():
            return False
        if self.limits.max_events is not None and self._events >= self.limits.max_events:
            return False
        return self._deadline is None or time.monotonic() < self._deadline

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Run to the bounds; return ``{owner_id, events, partitions: {id: report}}``."""
        self.processor.check_sink(self.store)  # before a link opens: sessions on a sink that keeps none, say
        if self.limits.max_duration is not None:
            self._deadline = time.monotonic() + self.limits.max_duration
        # management requests only (a Listen right is enough): the package's client asks all of them over one
        # kept management link, where the SDK's clients set up a connection for each (~0.4 s)
        # one retry of the SDK's own, as the hooks' reads: a setting at fault fails in seconds, a passing fault
        # is the task's retry to wait out. The collector's full passes leave the process's older objects out
        # for the run's length (garbage_collection.py)
        with run_heap(), self.endpoint.producer(retry_total=1) as client:
            ends, targets = self._targets(client)
            log.info(
                "Instance %s ingesting %s/%s up to %s",
                self.owner_id, self.endpoint.eventhub_name, self.consumer_group,
                ", ".join(f"partition {p}: seq {t}" for p, t in targets.items()),
            )
            # each batch's lag: the partitions' ends read again every lag_interval, over the same management link
            self._hub_ends = HubEnds(lambda p: last_enqueued(client, p), {p: ends[p] for p in targets},
                                     self.limits.lag_interval, self.endpoint.eventhub_name)
            try:
                return self._run_to(targets)
            finally:
                self._hub_ends.close()

    def _run_to(self, targets: Mapping[str, int]) -> dict[str, Any]:
        idle_since = time.monotonic()
        try:
            while self._budget_left():
                checkpoints = self.store.checkpoints(targets)
                for p, cp in checkpoints.items():
                    report = self.reports.get(p)
                    if report is not None:
                        report.checkpoint = cp.sequence_number
                pending = [p for p in targets if checkpoints[p].sequence_number < targets[p]]
                if not pending:
                    break
                workable = self._balance(targets, pending, time.monotonic() - idle_since)
                if not workable:
                    time.sleep(self.limits.poll_interval)
                    continue
                self._drain({p: (checkpoints[p].sequence_number, targets[p]) for p in workable})
                idle_since = time.monotonic()
            self._repair_mirror(targets)
        finally:
            if self.ownership is not None:
                self.ownership.release()
        summary = {
            "owner_id": self.owner_id,
            "events": self._events,
            "partitions": {p: r.to_dict() for p, r in sorted(self.reports.items())},
        }
        log.info("Instance %s done: %d events over partitions %s", self.owner_id, self._events,
                 ", ".join(sorted(self.reports)) or "none")
        return summary

    def _repair_mirror(self, targets: Mapping[str, int]) -> None:
        """
        Bring blob checkpoints that lag the SQL ones up to them (a crash between the SQL commit and
        the blob update leaves one behind), for partitions no other instance holds.
        """
        if self.ownership is None:
            return
        mirrored = mirrored_positions(self.checkpoint_store, self.endpoint.fully_qualified_namespace,
                                      self.endpoint.eventhub_name, self.consumer_group)
        claims = self.ownership.list()
        for p, cp in self.store.checkpoints(targets).items():
            blob = mirrored.get(p)
            if cp.sequence_number < 0 or cp.offset is None or (blob is not None and blob >= cp.sequence_number):
                continue
            if p not in self.ownership.owned:
                held = claims.get(p)
                if is_live(held, self.limits.ownership_expiry) and held.owner_id != self.owner_id:  # type: ignore[union-attr]
                    continue
                if not self.ownership.claim([p], claims):
                    continue
            self._mirror(p, cp.sequence_number, cp.offset)
            log.info("Instance %s: blob checkpoint of partition %s brought up to seq %d", self.owner_id, p, cp.sequence_number)

    def _mirror(self, partition_id: str, sequence_number: int, offset: str | None) -> None:
        """Write the partition's standard checkpoint blob (:func:`~airflow_provider_eh.ingest.mirror.write_checkpoint`)."""
        write_checkpoint(self.checkpoint_store, self.endpoint.fully_qualified_namespace, self.endpoint.eventhub_name,
                         self.consumer_group, partition_id, sequence_number, offset)

    def _balance(self, targets: Mapping[str, int], pending: list[str], idle_for: float) -> list[str]:
        """Renew, then claim until the plan wants nothing more (``balanced`` re-lists between claims)."""
        if self.ownership is None:
            return pending
        self.ownership.renew(force=True)
        for _ in range(len(targets)):
            claims = self.ownership.list()
            self.ownership.adopt(claims)
            wanted = plan_claims(
                owner_id=self.owner_id,
                partition_ids=list(targets),
                claims=claims,
                pending=pending,
                expiry=self.limits.ownership_expiry,
                strategy=self.limits.strategy,
                instances=self.limits.instances,
                idle_for=idle_for,
            )
            if not wanted or not self.ownership.claim(wanted, claims):
                break
        return [p for p in pending if p in self.ownership.owned]

    def _drain(self, ranges: Mapping[str, tuple[int, int]]) -> None:
        """
        Receive the owned partitions' ``(after, target]`` ranges on parallel links, committing each
        batch as it arrives; a partition stops at its target, on a lost claim or when the budget is spent.

        The links receive ahead while a batch commits (the bounded prefetch: a queue of at most
        ``4 x partitions`` chunks of :data:`RECEIVE_CHUNK` events); a transaction takes the chunks of
        its partition that are already waiting, within ``batch_size`` and ``batch_bytes``
        (:mod:`~airflow_provider_eh.ingest.drain`). The blob checkpoint is written by a background
        thread after the commit (the latest per partition).
        """
        limits = self.limits
        for p, (start, target) in ranges.items():
            self.reports.setdefault(p, PartitionReport(target=target, start=start, checkpoint=start))
            log.info("Instance %s: partition %s from seq %d to %d", self.owner_id, p, start, target)
        sink: queue.Queue[Any] = queue.Queue(maxsize=4 * len(ranges))
        reader = self._open_reader(ranges, sink)
        if self._hub_ends is not None:
            self._hub_ends.start()
        drain = Drain(
            ranges, Arrivals(sink, batch_size=limits.batch_size, batch_bytes=limits.batch_bytes),
            close_partition=reader.close_partition, stall_timeout=limits.stall_timeout,
            hub=self.endpoint.eventhub_name, owner_id=self.owner_id,
        )
        gathering = Gathering(limits.batch_seconds, limits.batch_size, limits.batch_bytes)
        try:
            while drain.receiving and self._budget_left():
                taken = drain.take()
                if taken is not None and taken[1]:
                    gathering.add(*taken)
                for p, events in gathering.due(drain.targets, drain.receiving):
                    if limits.max_events is not None:
                        events = events[: max(0, limits.max_events - self._events)]
                    if events and not self._commit_or_give_up(drain, p, events):
                        continue
                    if self.ownership is not None:
                        for lost in self.ownership.renew():
                            drain.stop(lost)
            if self._budget_left():  # what the links delivered last, still gathering when they ended
                for p, events in gathering.rest():
                    if limits.max_events is not None:
                        events = events[: max(0, limits.max_events - self._events)]
                    if events and p in drain.after:
                        self._commit_or_give_up(drain, p, events)
        finally:
            reader.close()
            writer, self._mirror_writer = self._mirror_writer, None  # its thread ends with the flush
            if writer is not None:
                writer.flush()

    def _open_reader(self, ranges: Mapping[str, tuple[int, int]], sink: queue.Queue[Any]) -> PartitionsReader:
        """The links of ``ranges``, receiving into ``sink`` in chunks of at most :data:`RECEIVE_CHUNK` events."""
        chunk = min(RECEIVE_CHUNK, self.limits.batch_size or RECEIVE_CHUNK)
        return PartitionsReader(
            self.endpoint, self.consumer_group, {p: after for p, (after, _) in ranges.items()}, sink=sink,
            # a last batch that fills exactly does not wait max_wait_time for events that will not come
            max_batch_size={p: max(1, min(chunk, target - start)) for p, (start, target) in ranges.items()},
            max_wait_time=self.limits.max_wait_time,
            convert=IngestEvent.received,  # events are built on the receiving thread, from the AMQP messages
        ).start()

    def _commit_or_give_up(self, drain: Drain, partition_id: str, events: list[IngestEvent]) -> bool:
        """Commit a batch of the drain; whether it committed. A partition another instance has taken over
        is given up at once."""
        try:
            drain.committed(partition_id, self._commit(partition_id, drain.after[partition_id], events,
                                                       self.reports[partition_id]))
        except PartitionTakenOverError as exc:
            log.warning("Instance %s: %s", self.owner_id, exc)
            if self.ownership is not None:
                # given up at once: a claim merely forgotten would hold the partition from every other run until
                # it expires
                self.ownership.release([partition_id])
            drain.stop(partition_id)
            return False
        return True

    def _stage(self, stage: str, partition_id: str, first: int, last: int, batch: int) -> None:
        steps.reached(f"ingest_{stage}", batch, {"partition": partition_id, "first": first, "last": last})

    def _commit(self, partition_id: str, after: int, events: list[IngestEvent], report: PartitionReport) -> int:
        started = time.monotonic()
        self._batches += 1
        batch = self._batches
        last = events[-1]
        first = events[0].sequence_number
        self._stage(RECEIVED, partition_id, first, last.sequence_number, batch)
        with self.store.transaction() as tx:
            counts = self.processor.process(tx, partition_id, events)
            tx.advance_checkpoint(partition_id, after, last.sequence_number, last.offset, self.owner_id)
            self._stage(ROWS_WRITTEN, partition_id, first, last.sequence_number, batch)
        self._stage(COMMITTED, partition_id, first, last.sequence_number, batch)
        self._events += len(events)
        report.batches += 1
        report.checkpoint = last.sequence_number
        report.counts.add(counts)
        ends = self._hub_ends
        end = None if ends is None else ends.get(partition_id)
        if ends is not None and end is not None:
            report.last_enqueued = end
            report.lag = ends.lag(partition_id, last.sequence_number)
        if self.checkpoint_store is not None:
            if self._mirror_writer is None:
                self._mirror_writer = MirrorWriter(self, self.limits.checkpoint_interval)
            self._mirror_writer.submit(partition_id, first, last.sequence_number, last.offset, batch)
        log.info(
            "Instance %s: partition %s seq %d-%d committed: %d rows, %d duplicates, %d dead letters, %d deferred%s",
            self.owner_id, partition_id, events[0].sequence_number, last.sequence_number,
            counts.rows, counts.duplicates, counts.dead_letters, counts.deferred,
            "" if report.lag is None else f"; lag {report.lag} (last enqueued {report.last_enqueued})",
        )
        if self.on_batch is not None:
            self.on_batch(IngestedBatch(partition_id, counts, time.monotonic() - started,
                                        None if end is None else report.lag, last.enqueued_time))
        return last.sequence_number
