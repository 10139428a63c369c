"""The ``eventhubs`` data source: PySpark 4's Python Data Source API over the publishing engine and the receiver.

::

    from airflow_provider_eh.spark.datasource import EventHubsDataSource

    spark.dataSource.register(EventHubsDataSource)
    (df.write.format("eventhubs").mode("append")
       .option("connectionString", ...).option("stateConnectionString", ...).option("stateContainer", "state")
       .option("producerGroup", "orders.daily").option("batchId", "2026-05-01/2026-05-02")
       .option("keyColumn", "customer").option("orderBy", "id")
       .save())

Executors map and check their rows and stage them in the state container (:mod:`.staging`); the
driver's ``commit`` publishes the staged batch exactly once (:mod:`.publish`). A streaming query
(``df.writeStream.format("eventhubs")``) does the same per micro-batch, its identity the query's
checkpoint (or ``streamId``) and the micro-batch's id. ``spark.read.format("eventhubs")`` and
``spark.readStream.format("eventhubs")`` read a hub (:mod:`.read_source`). Nothing here imports Apache Airflow.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.spark.datasource.options import pyspark_missing

try:
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        DataSourceStreamArrowWriter,
        DataSourceStreamReader,
        WriterCommitMessage,
    )
except ImportError as exc:  # one of the two modules of the package that are PySpark classes (read_source the other)
    raise pyspark_missing(exc) from exc

from airflow_provider_eh.errors import ProducerStateStoreError
from airflow_provider_eh.spark.datasource.options import FORMAT, DataSourceOptionError, WriteOptions, identity_batch_id
from airflow_provider_eh.spark.datasource.publish import publish_staged, publisher_of
from airflow_provider_eh.spark.datasource.staging import (
    StagedRun,
    WriteMarker,
    remove_staged,
    stage_rows,
    staging_prefix,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from airflow_provider_eh.spark.datasource.read_options import ReadOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StagedMessage(WriterCommitMessage):
    """A task's commit message: its staged run."""

    run: StagedRun


def _task() -> tuple[int, str]:
    """``(Spark partition, attempt's name)`` of the running task: unique per attempt, retries and speculation included."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:  # outside a task (tests calling write directly)
        return 0, "local"
    return ctx.partitionId(), f"{ctx.stageId()}-{ctx.taskAttemptId()}"


def _check_target(options: WriteOptions, schema: StructType) -> list[str]:
    """On the driver, before any task: the columns, the container and the hub; the hub's partition ids."""
    options.mapping.check_schema(schema.fieldNames(), source="the DataFrame")
    with options.blob.container_client() as container:
        try:
            container.get_container_properties()
        except Exception as exc:
            if type(exc).__name__ != "ResourceNotFoundError":
                raise ProducerStateStoreError(
                    f"option 'stateContainer': container {options.blob.container!r} cannot be used "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); check its name, "
                    "'stateConnectionString' or 'stateAccountUrl' and the credential, and that the cluster may reach "
                    "the storage account"
                ) from None
            _create(container, options.blob.container)
        return publisher_of(options, container).checked_partition_ids()


def _create(container: Any, name: str) -> None:
    """Create the missing state container, as the publish operators do; a refusal names the option and the fix."""
    try:
        container.create_container()
    except Exception as exc:
        if type(exc).__name__ == "ResourceExistsError":  # another writer created it meanwhile
            return
        raise DataSourceOptionError(
            f"option 'stateContainer': container {name!r} does not exist and could not be created "
            f"({type(exc).__name__}); create it, or give a credential that may (the producer state and the staged rows "
            "live there)"
        ) from None
    log.info("state container %s: created", name)


class _Staging:
    """What the batch and the streaming writer share: the options, the hub's partitions, the staging of a task."""

    def __init__(self, options: WriteOptions, partition_ids: Sequence[str]):
        self.options = options
        self.partition_ids = list(partition_ids)

    def stage(self, batches: Iterator[pa.RecordBatch], prefix: str, marker: WriteMarker | None = None) -> StagedMessage:
        spark_partition, attempt = _task()
        run = stage_rows(batches, mapping=self.options.mapping, partition_ids=self.partition_ids,
                         blob=self.options.blob, prefix=prefix, spark_partition=spark_partition, attempt=attempt,
                         marker=marker)
        return StagedMessage(run)

    def runs(self, messages: Sequence[WriterCommitMessage | None]) -> list[StagedRun]:
        runs = [m.run for m in messages if isinstance(m, StagedMessage)]
        if len(runs) != len(messages):
            raise RuntimeError(f"{len(messages) - len(runs)} of {len(messages)} Spark tasks sent back no staged run")
        return runs

    def discard(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        names = [m.run.blob for m in messages if isinstance(m, StagedMessage) and m.run.blob]
        remove_staged(self.options.blob, "", names)


class EventHubsWriter(_Staging, DataSourceArrowWriter):
    """``df.write.format("eventhubs")``: one batch, identified by ``producerGroup``, ``batchId`` and ``generation``.

    The job's tasks stage into a folder of its own, under a writing marker that the driver opens before the
    job and closes at its end (:class:`~.staging.WriteMarker`): attempts that outlive the job delete their runs.
    """

    def __init__(self, options: WriteOptions, partition_ids: Sequence[str]):
        super().__init__(options, partition_ids)
        self.batch_id = options.batch_id()
        self.prefix = staging_prefix(options.endpoint, options.producer_group, self.batch_id)
        self.marker = WriteMarker(self.prefix, uuid.uuid4().hex)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedMessage:
        return self.stage(iterator, self.marker.folder, self.marker)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        try:
            results = publish_staged(self.options, self.runs(messages), self.batch_id, staging=self.prefix,
                                     origin={"writer": "spark", "identity": self.options.identity})
        finally:
            self.marker.close(self.options.blob)
        _log_results(self.options, self.options.identity, results)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.marker.close(self.options.blob)  # first: a task still uploading deletes its own run
        self.discard(messages)
        remove_staged(self.options.blob, self.marker.folder)


class EventHubsStreamWriter(_Staging, DataSourceStreamArrowWriter):
    """``df.writeStream.format("eventhubs")``: each micro-batch one batch, identified by the stream and its id."""

    def __init__(self, options: WriteOptions, partition_ids: Sequence[str]):
        super().__init__(options, partition_ids)
        assert options.identity is not None
        # micro-batches run one after another: one staging folder per stream, emptied at each commit
        self.prefix = staging_prefix(options.endpoint, options.producer_group,
                                     identity_batch_id(options.producer_group, f"stream-staging:{options.identity}"))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedMessage:
        return self.stage(iterator, self.prefix)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        batch_id = self.options.batch_id(batchId)
        runs = self.runs(messages)
        results = publish_staged(self.options, runs, batch_id, staging=self.prefix,
                                 origin={"writer": "spark-stream", "identity": self.options.identity, "batch": batchId})
        _log_results(self.options, f"{self.options.identity} micro-batch {batchId}", results)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        self.discard(messages)


def _log_results(options: WriteOptions, what: Any, results: dict[str, Any]) -> None:
    log.info("group %s %s: %s", options.producer_group, what,
             "; ".join(f"partition {p}: {r.events} events ({r.status}), service sequence number "
                       f"{r.service_last_sequence_number}" for p, r in sorted(results.items())) or "nothing published")


class EventHubsDataSource(DataSource):
    """The ``eventhubs`` format: write a DataFrame (batch or streaming) to an Event Hub exactly once, and read a
    hub's events (a bounded range, or a stream) into one (:mod:`.read_source`)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        from airflow_provider_eh.spark.datasource.read_source import spark_schema

        return spark_schema(self._read_options())

    def reader(self, schema: StructType) -> DataSourceReader:
        from airflow_provider_eh.spark.datasource.read_source import EventHubsBatchReader

        return EventHubsBatchReader(self._read_options())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (Spark's name)
        from airflow_provider_eh.spark.datasource.read_source import EventHubsStreamReader

        return EventHubsStreamReader(self._read_options())

    def _read_options(self) -> ReadOptions:
        from airflow_provider_eh.spark.datasource.read_options import ReadOptions

        return ReadOptions.from_options(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> EventHubsWriter:
        options = WriteOptions.from_options(self.options)
        _refuse_overwrite(overwrite)
        partition_ids = _check_target(options, schema)
        writer = EventHubsWriter(options.typed(), partition_ids)
        writer.marker.open(options.blob)
        return writer

    def streamWriter(self, schema: StructType, overwrite: bool) -> EventHubsStreamWriter:  # noqa: N802 (Spark's name)
        options = WriteOptions.from_options(self.options, streaming=True)
        partition_ids = _check_target(options, schema)
        return EventHubsStreamWriter(options.typed(), partition_ids)


def _refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise DataSourceOptionError("mode 'overwrite': events published to a hub cannot be replaced; write with "
                                    "mode('append'): a batch already published is not published again")


def register(spark: SparkSession) -> None:
    """Register the ``eventhubs`` format with ``spark`` (what ``spark.dataSource.register(EventHubsDataSource)`` does)."""
    spark.dataSource.register(EventHubsDataSource)
