"""Staged rows: what each Spark task of a write leaves in blob storage for the driver to publish.

No Spark and no Airflow import. A task maps its rows to events (partition, body, properties: every row
check runs here, before anything is published), groups them by Event Hubs partition and uploads them as
one Arrow IPC file, named by the batch, the Spark partition and the task attempt
(:func:`stage_rows`). Its :class:`StagedRun` (the blob's name and where each Event Hubs partition's rows
are in it) goes to the driver as the task's commit message. A batch write's job stages into a folder of its
own and holds a *writing marker* while it runs (:class:`WriteMarker`): a task attempt that finishes its upload
after the job ended (committed, aborted, or its speculative twin kept) finds the marker gone and deletes what it
uploaded, so a failed or raced job leaves no staged rows behind. The driver reads the runs of the attempts
Spark committed (:class:`StagedBatch`), puts each Event Hubs partition's events in one order that does
not depend on how Spark split the rows (the declared order columns, then each event's content hash),
and deletes the batch's staging folder once the batch is committed (:func:`remove_staged`).
"""

from __future__ import annotations

import itertools
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from airflow_provider_eh.publishing.document import StateKey
from airflow_provider_eh.publishing.rulebook import OutgoingEvent
from airflow_provider_eh.spark.executor import map_batch
from airflow_provider_eh.spark.mapping import BODY_COL, HASH_COL, PARTITION_COL, RowMapping

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_provider_eh.client.endpoint import EventHubsEndpoint
    from airflow_provider_eh.spark.datasource.options import BlobLocation

log = logging.getLogger(__name__)

#: uploads and downloads of staged runs at once
_TRANSFERS = 8


def staging_prefix(endpoint: EventHubsEndpoint, group: str, batch_id: str) -> str:
    """The blob folder of one batch's staged runs: under ``_staging/``, apart from the state documents (as the
    ledger's records are under ``_ledger/``)."""
    key = StateKey.of(endpoint, group, "0")
    return f"_staging/{key.namespace}/{key.hub}/{key.group}/{batch_id}/".lower()


@dataclass(frozen=True)
class WriteMarker:
    """
    One batch job's staging folder and the empty blob that says the job still runs.

    The driver creates the marker before any task runs (:meth:`open`) and deletes it when the job ends
    (:meth:`close`, then the job's folder); a task checks it *after* its upload (:func:`stage_rows`). Either
    the check finds the marker, so the upload finished before the driver listed the folder to delete it, or it
    finds none and the task deletes its own upload: no run is left behind, whichever finishes first.
    """

    prefix: str
    token: str

    @property
    def folder(self) -> str:
        """Where the job's tasks stage their runs (apart from another job's of the same batch)."""
        return f"{self.prefix}{self.token}/"

    @property
    def name(self) -> str:
        """The marker's blob: beside the batch's folder, so that a commit's clean-up of the folder keeps it."""
        return f"{self.prefix.rstrip('/')}.writing-{self.token}"

    def open(self, blob: BlobLocation) -> None:
        with blob.container_client() as container:
            container.upload_blob(self.name, b"", overwrite=True)

    def close(self, blob: BlobLocation) -> None:
        remove_staged(blob, self.name, [self.name])


@dataclass(frozen=True)
class StagedRun:
    """
    One task attempt's staged events.

    :param blob: the Arrow IPC file's blob name.
    :param spark_partition: the task's Spark partition.
    :param slices: ``{event hubs partition: (first row, rows)}`` in the file, rows grouped by partition.
    """

    blob: str
    spark_partition: int
    slices: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(n for _, n in self.slices.values())


def mapped_table(batches: Iterable[pa.RecordBatch], mapping: RowMapping, partition_ids: Sequence[str]) -> pa.Table:
    """The rows as ``(partition, hash, body, *kept columns)``, grouped by partition; raises on the first bad row."""
    import pyarrow as pa

    kept = mapping.kept_columns()
    names = [PARTITION_COL, HASH_COL, BODY_COL, *kept]
    out: list[pa.RecordBatch] = []
    schema: pa.Schema | None = None
    for batch in batches:
        partitions, hashes, bodies = map_batch(batch, mapping, partition_ids)
        mapped = pa.RecordBatch.from_arrays(
            [pa.array(partitions, pa.string()), pa.array(hashes, pa.binary()), pa.array(bodies, pa.binary()),
             *(batch.column(name) for name in kept)], names=names)
        schema = mapped.schema
        out.append(mapped)
    if schema is None:
        return pa.table({n: pa.array([], t) for n, t in ((PARTITION_COL, pa.string()), (HASH_COL, pa.binary()),
                                                          (BODY_COL, pa.binary()))})
    return pa.Table.from_batches(out, schema).sort_by(PARTITION_COL)


def stage_rows(batches: Iterable[pa.RecordBatch], *, mapping: RowMapping, partition_ids: Sequence[str],
               blob: BlobLocation, prefix: str, spark_partition: int, attempt: str,
               marker: WriteMarker | None = None) -> StagedRun:
    """Map, check and upload one task's rows; its :class:`StagedRun` (no blob when it had no rows, or when the
    job's ``marker`` was gone once the upload finished: the job ended without this attempt, whose upload is
    deleted)."""
    import pyarrow as pa

    table = mapped_table(batches, mapping, partition_ids)
    name = f"{prefix}{spark_partition:05d}-{attempt}.arrow"
    if table.num_rows == 0:
        return StagedRun(blob="", spark_partition=spark_partition)
    slices = _slices(table)
    with tempfile.TemporaryDirectory(prefix="eh-stage-") as tmp:
        path = Path(tmp) / "run.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema,
                                                                  options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
            writer.write_table(table)
        with blob.container_client() as container, open(path, "rb") as data:
            container.upload_blob(name, data, overwrite=True, length=os.path.getsize(path), max_concurrency=2)
            if marker is not None and not container.get_blob_client(marker.name).exists():
                log.info("staged run %s: the job ended before this attempt finished; its upload is deleted", name)
                remove_staged(blob, name, [name])
                return StagedRun(blob="", spark_partition=spark_partition)
    return StagedRun(blob=name, spark_partition=spark_partition, slices=slices)


def _slices(table: pa.Table) -> dict[str, tuple[int, int]]:
    """``{partition: (first row, rows)}`` of a table sorted by partition."""
    out: dict[str, tuple[int, int]] = {}
    start = 0
    for partition, run in itertools.groupby(table.column(PARTITION_COL).to_pylist()):
        n = sum(1 for _ in run)
        out[partition] = (start, n)
        start += n
    return out


class ArrowEvents(Sequence[OutgoingEvent]):
    """One partition's events, in batch order, read from an Arrow table as the sender asks for them.

    The property columns are the staged ones, which the tasks checked by the event rulebook when they mapped
    each row (:func:`mapped_table`): they become each event's properties as they are, unchecked again.
    """

    def __init__(self, table: pa.Table, mapping: RowMapping):
        self._table = table
        self._mapping = mapping

    def __len__(self) -> int:
        return int(self._table.num_rows)

    @overload
    def __getitem__(self, index: int) -> OutgoingEvent: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[OutgoingEvent]: ...

    def __getitem__(self, index: int | slice) -> OutgoingEvent | Sequence[OutgoingEvent]:
        if isinstance(index, slice):
            return list(self)[index]
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            raise IndexError(index)
        return OutgoingEvent(position, *self._event(position))

    def _event(self, row: int) -> tuple[bytes, dict[str, Any] | None]:
        body = self._table.column(BODY_COL)[row].as_py()
        cols = self._mapping.property_columns
        if not cols:
            return body, None
        return body, {c: self._table.column(c)[row].as_py() for c in cols}

    def __iter__(self) -> Iterator[OutgoingEvent]:
        cols = self._mapping.property_columns
        index = 0
        for batch in self._table.to_batches(max_chunksize=4096):
            bodies = batch.column(BODY_COL).to_pylist()
            if not cols:
                for body in bodies:
                    yield OutgoingEvent(index, body, None)
                    index += 1
                continue
            values = [batch.column(c).to_pylist() for c in cols]
            for body, *row in zip(bodies, *values, strict=True):
                yield OutgoingEvent(index, body, dict(zip(cols, row, strict=True)))
                index += 1


def staged_counts(runs: Iterable[StagedRun]) -> dict[str, int]:
    """``{partition: events}`` over ``runs``."""
    out: dict[str, int] = {}
    for run in runs:
        for partition, (_, n) in run.slices.items():
            out[partition] = out.get(partition, 0) + n
    return out


class StagedBatch:
    """
    The staged runs of one batch, downloaded into a local folder, and each partition's events in batch order.

    :param runs: the committed task attempts' runs (Spark hands the driver one per Spark partition).
    :param blob: where they are.
    :param mapping: the write's mapping (order columns, property columns).
    :param folder: a local folder for the downloads (removed by the caller).
    """

    def __init__(self, runs: Sequence[StagedRun], blob: BlobLocation, mapping: RowMapping, folder: str):
        self.runs = [r for r in runs if r.blob]
        self.mapping = mapping
        self._tables = self._download(blob, folder)

    def _download(self, blob: BlobLocation, folder: str) -> dict[str, pa.Table]:
        import pyarrow as pa

        def fetch(run: StagedRun) -> tuple[str, pa.Table]:
            path = Path(folder) / run.blob.rsplit("/", 1)[-1]
            with open(path, "wb") as fh:
                container.download_blob(run.blob, max_concurrency=2).readinto(fh)
            return run.blob, pa.ipc.open_file(pa.memory_map(str(path))).read_all()

        if not self.runs:
            return {}
        with blob.container_client() as container, ThreadPoolExecutor(_TRANSFERS, thread_name_prefix="eh-staged") as pool:
            return dict(pool.map(fetch, self.runs))

    @property
    def counts(self) -> dict[str, int]:
        """``{partition: events}`` over every run."""
        return staged_counts(self.runs)

    def events(self, partition: str) -> ArrowEvents:
        """The partition's events in batch order: the order columns, then the content hash."""
        import pyarrow as pa

        parts = [self._tables[run.blob].slice(*run.slices[partition]) for run in self.runs if partition in run.slices]
        table = pa.concat_tables(parts) if parts else None
        assert table is not None, f"partition {partition}: no staged rows"
        return ArrowEvents(_sorted(table, (*self.mapping.order_by, HASH_COL)), self.mapping)

    def grouped(self) -> dict[str, ArrowEvents]:
        """Every partition's events, in batch order."""
        return {partition: self.events(partition) for partition in sorted(self.counts, key=lambda p: (len(p), p))}


def _sorted(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``table`` in ascending order of ``columns``, nulls first: the order Spark's ``sortWithinPartitions`` gives
    (the operator's), so both ways publish a partition's events in one order."""
    try:  # pyarrow 25 and later: the null placement per key
        return table.sort_by([(c, "ascending", "at_start") for c in columns])
    except (TypeError, ValueError):  # earlier pyarrow: one placement for every key
        return table.sort_by([(c, "ascending") for c in columns], null_placement="at_start")


def remove_staged(blob: BlobLocation, prefix: str, names: Iterable[str] | None = None) -> int:
    """Delete the staged runs under ``prefix`` (only ``names`` when given); how many. Failures are logged."""
    removed = 0
    try:
        with blob.container_client() as container:
            targets = list(names) if names is not None else [b.name for b in container.list_blobs(name_starts_with=prefix)]
            for name in targets:
                if not name:
                    continue
                try:
                    container.delete_blob(name)
                    removed += 1
                except Exception as exc:  # a leftover costs storage, not correctness: the next write overwrites it
                    if type(exc).__name__ != "ResourceNotFoundError":
                        log.warning("staged run %s: not deleted (%s: %s)", name, type(exc).__name__, exc)
    except Exception as exc:
        log.warning("staged runs under %s: not deleted (%s: %s)", prefix, type(exc).__name__, exc)
    return removed
