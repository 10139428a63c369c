"""The standard blob checkpoints an ingestion run keeps beside its SQL checkpoints, and the thread that writes them.

The SQL checkpoint is the source of truth. After each commit the run mirrors it as the standard
checkpoint blob (``BlobCheckpointStore.update_checkpoint``: metadata ``sequencenumber`` and
``offset``), so sensors and other SDKs' processors see progress and can take the consumer group over.
:func:`write_checkpoint` writes one under every spelling of the namespace an SDK reads,
:func:`mirrored_positions` reads back what the blobs hold, and :class:`MirrorWriter` does the writing
on a thread of its own, at most once per interval and partition. A blob left behind by a crash is
brought up to the SQL checkpoint by the next run (``IngestRun._repair_mirror``).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from airflow_provider_eh.checkpoints.blob_layout import namespace_spellings

# The step :class:`MirrorWriter` announces after a blob write (``ingest_blob_checkpointed``), the last
# of :data:`airflow_provider_eh.ingest.runner.STAGES`.
BLOB_CHECKPOINTED = "blob_checkpointed"


def write_checkpoint(
    checkpoint_store: Any, fully_qualified_namespace: str, eventhub_name: str, consumer_group: str,
    partition_id: str, sequence_number: int, offset: str | None,
) -> None:
    """
    Write the standard checkpoint blob under every spelling of the namespace an SDK's processor
    reads: a namespace with a port (the local endpoint, a custom endpoint) is ``host:port`` in
    Python's ``BlobCheckpointStore`` and ``host`` in JavaScript's; both read the same metadata
    (``sequencenumber``, ``offset``) and resume after the offset.

    :param checkpoint_store: the SDK's ``BlobCheckpointStore`` over the checkpoint container.
    """
    for namespace in namespace_spellings(fully_qualified_namespace):
        checkpoint_store.update_checkpoint(
            {
                "fully_qualified_namespace": namespace,
                "eventhub_name": eventhub_name,
                "consumer_group": consumer_group,
                "partition_id": partition_id,
                "sequence_number": sequence_number,
                "offset": offset,
            }
        )


def mirrored_positions(
    checkpoint_store: Any, fully_qualified_namespace: str, eventhub_name: str, consumer_group: str,
) -> dict[str, int]:
    """
    Per partition, the lowest sequence number the mirror holds under any spelling of the namespace,
    as each SDK's store lists it; a partition missing under one spelling is not mirrored (a crash
    between the two writes of :func:`write_checkpoint` leaves one behind).
    """
    listed = [
        {c["partition_id"]: c["sequence_number"] for c in checkpoint_store.list_checkpoints(
            namespace, eventhub_name, consumer_group)}
        for namespace in namespace_spellings(fully_qualified_namespace)
    ]
    return {p: min(spelling[p] for spelling in listed) for p in listed[0] if all(p in spelling for spelling in listed)}


class MirroredRun(Protocol):
    """What :class:`MirrorWriter` calls on its run: the blob write, and the step announced after it."""

    def _mirror(self, partition_id: str, sequence_number: int, offset: str | None) -> None: ...

    def _stage(self, stage: str, partition_id: str, first: int, last: int, batch: int) -> None: ...


class MirrorWriter:
    """
    Writes the blob checkpoint of committed batches on a thread of its own, so the next batch's
    transaction does not wait for Azure Storage. Only the newest commit of a partition is written
    (a checkpoint supersedes the ones before it), and a partition's blob at most once per
    ``interval`` seconds while the run goes on: a blob write costs the worker as much CPU as
    committing a few hundred events, and what reads the blobs (sensors, other SDKs' processors taking
    over) needs progress, not every batch. :meth:`flush` writes what is left at once, waits until it is
    written and re-raises a failure. A crash before a write leaves the blob behind the SQL checkpoint,
    which is the source of truth, and the next run's ``_repair_mirror`` brings it up.
    """

    def __init__(self, run: MirroredRun, interval: float):
        self._run = run
        self._interval = interval
        self._pending: dict[str, tuple[int, int, str | None, int]] = {}  # partition -> (first, last, offset, batch)
        self._written: dict[str, float] = {}  # partition -> when its blob was last written (monotonic)
        self._cond = threading.Condition()
        self._busy = False
        self._error: BaseException | None = None
        self._flushing = False
        self._thread = threading.Thread(target=self._loop, name="eh-ingest-blob-checkpoint", daemon=True)
        self._thread.start()

    def submit(self, partition_id: str, first: int, last: int, offset: str | None, batch: int) -> None:
        with self._cond:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            earlier = self._pending.get(partition_id)
            self._pending[partition_id] = (first if earlier is None else earlier[0], last, offset, batch)
            self._cond.notify_all()

    def _next_due(self) -> tuple[str | None, float]:
        """The pending partition to write now, else ``None`` and how long until one is due."""
        now = time.monotonic()
        wait = self._interval
        for partition_id in self._pending:
            due = self._written.get(partition_id, -self._interval) + self._interval
            if self._flushing or due <= now:
                return partition_id, 0.0
            wait = min(wait, due - now)
        return None, wait

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._pending and self._flushing:
                        return
                    partition_id, wait = self._next_due() if self._pending else (None, 0.0)
                    if partition_id is not None:
                        break
                    self._cond.wait(wait if self._pending else None)
                first, last, offset, batch = self._pending.pop(partition_id)
                self._busy = True
            try:
                self._run._mirror(partition_id, last, offset)
                self._written[partition_id] = time.monotonic()
                self._run._stage(BLOB_CHECKPOINTED, partition_id, first, last, batch)
            except BaseException as exc:  # handed to the committing thread
                with self._cond:
                    self._error = exc
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def flush(self) -> None:
        """Write every pending checkpoint now, wait until written; stop the thread; re-raise a failure."""
        with self._cond:
            self._flushing = True
            self._cond.notify_all()
            while self._pending or self._busy:
                self._cond.wait()
            error, self._error = self._error, None
        self._thread.join(timeout=30)
        if error is not None:
            raise error
