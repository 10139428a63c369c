"""Ingest from Event Hubs into a SQL or Delta table, one transaction per batch; replay dead letters.

Thin shells over :mod:`airflow_provider_eh.ingest`: the operators turn connections into an
endpoint, a DB-API connection (or a Delta table and its storage options) and a blob container, and hand
them to the engine. An SDK or network
error of the run is raised as the error map's (:mod:`airflow_provider_eh.client.failures`): it names
the connection, the address, the consumer group or the checkpoint container, the field to check and
how many events the run committed before it, and says whether a retry can help.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from airflow.exceptions import AirflowProviderDeprecationWarning
from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.sdk import BaseHook

from airflow_provider_eh import metrics
from airflow_provider_eh.client.failures import FailureSite, is_storage_error
from airflow_provider_eh.deprecation import REMOVED_IN
from airflow_provider_eh.hooks.blob import BlobStorageHook
from airflow_provider_eh.hooks.event_hubs import EventHubHook
from airflow_provider_eh.ingest import (
    BatchProcessor,
    IngestRun,
    RunLimits,
    SessionConfig,
    SqlIngestStore,
    replay_dead_letters,
)
from airflow_provider_eh.ingest.limits import DELTA_BATCH_SECONDS, SQL_BATCH_SECONDS
from airflow_provider_eh.ingest.sinks.delta import (
    DELTA_BATCH_BYTES,
    DeltaIngestStore,
    check_delta_options,
)
from airflow_provider_eh.lineage import table_dataset
from airflow_provider_eh.operators.deprecated_arguments import DeprecatedIngestArguments, record_of
from airflow_provider_eh.operators.hub_lineage import HubLineage
from airflow_provider_eh.operators.ingest_base import (
    DELTA,
    SQL_BATCH_BYTES,
    SqlSinkOperator,
    delta_store,
    sdk_failures,
)
from airflow_provider_eh.operators.settings import (
    Batching,
    BlobCheckpoints,
    DeltaSink,
    IngestLimits,
    Ownership,
    Sessions,
    SqlSink,
)
from airflow_provider_eh.operators.task_errors import airflow_errors

__all__ = [
    "Batching",
    "BlobCheckpoints",
    "DeltaSink",
    "EventHubDeadLetterReplayOperator",
    "EventHubIngestOperator",
    "IngestLimits",
    "Ownership",
    "Sessions",
    "SqlSink",
]

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_eh.ingest.runner import IngestedBatch

#: deprecated flat argument -> its field of the record that replaced it
CHECKPOINT_ARGUMENTS = {"checkpoint_container": "container", "wasb_conn_id": "wasb_conn_id",
                        "checkpoint_interval": "interval"}
OWNERSHIP_ARGUMENTS = {"instances": "instances", "strategy": "strategy", "ownership_expiry": "expiry"}
BATCHING_ARGUMENTS = {"batch_size": "size", "batch_bytes": "byte_size", "batch_seconds": "seconds",
                      "delta_batch_seconds": "seconds", "max_wait_time": "max_wait_time"}
LIMIT_ARGUMENTS = {"max_events": "max_events", "max_duration": "max_duration", "partition_ids": "partition_ids",
                   "stall_timeout": "stall_timeout", "lag_interval": "lag_interval"}
SESSION_ARGUMENTS = {"session_key": "key", "session_sequence": "sequence", "session_first_sequence": "first_sequence",
                     "session_end": "end", "session_defer_limit": "defer_limit"}


class EventHubIngestOperator(HubLineage, SqlSinkOperator, DeprecatedIngestArguments):
    """
    Ingest a bounded range of an Event Hub into a SQL table, exactly once.

    The run reads each partition from its SQL checkpoint up to the partition's last event when the
    run started (or until ``max_events`` / ``max_duration``). Every batch is one SQL transaction: the
    rows, the checkpoint, the dedupe high-water marks per (producer group, partition) (events whose
    ``eh.seq`` stamp is at or below the mark are skipped) and dead letters for events the row function
    rejects. The standard blob checkpoint is updated after the commit, so checkpoint sensors and other
    tools see progress; the SQL checkpoint is where a rerun resumes.

    Several instances share a hub through the standard ownership blobs: map the task over
    ``instance`` (``.partial(...).expand(instance=[0, 1])``) and pass ``instances``. Each instance claims
    partitions with ETag compare-and-set; a dead instance's partitions are taken over when its claims
    expire (``ownership_expiry``).

    With ``session_key``, events are applied in order per session: one that arrives ahead of its
    predecessors waits in the ``deferred`` table until they have been applied.

    Returns (XCom) ``{owner_id, events, partitions: {id: {target, start, checkpoint, batches, events,
    rows, duplicates, dead_letters, deferred, ...}}}``.

    :param sink: where rows land: :class:`SqlSink` (a table of a ``sqlite``, ``postgres`` or ``mysql`` connection;
        another type is refused before anything is read) or :class:`DeltaSink` (a Delta table's path or URI, created
        by the first batch when missing; ``sessions`` is refused there).
    :param row_function: event -> row (dict), rows, or ``None``; a callable or ``"package.module:function"``.
        Default: the body is a JSON object inserted as one row. An exception dead-letters the event.
    :param columns: with the default row function, the JSON keys to insert (default: all). (templated)
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection. (templated)
    :param schema_registry_conn_id: the ``azure_event_hubs`` connection whose namespace's Schema Registry decodes
        typed events (default: ``event_hubs_conn_id``'s). A typed event (content type ``avro/binary+<id>`` or
        Microsoft's JSON Schema encoder's) is decoded by Microsoft's decoder, each schema fetched once, and its
        record is what ``event.json()`` gives the row function (its fields map to ``columns``); one that does not
        decode is dead-lettered ``undecodable`` with the reason. Read only when a typed event arrives. (templated)
    :param eventhub_name: the hub; default: the connection's. (templated)
    :param consumer_group: the consumer group to read as and to checkpoint for. (templated)
    :param checkpoints: :class:`BlobCheckpoints`: the standard checkpoint and ownership blobs. ``None``: the sink's
        checkpoints only, one instance.
    :param instance: this instance's number (map over it). (templated)
    :param ownership: :class:`Ownership`: how many instances share the hub and how they claim partitions.
    :param batching: :class:`Batching`: events, bytes and seconds per transaction.
    :param limits: :class:`IngestLimits`: when the run stops (default: at each partition's last event when it
        started), which partitions, and when a silent partition fails it.
    :param sessions: :class:`Sessions`: in-order processing per session (a SQL sink).
    :param dedupe: skip stamped events at or below their producer group's high-water mark.

    The flat arguments these records replaced (``table``, ``sql_conn_id``, ``checkpoint_container``, ``max_events``,
    ``batch_seconds``, ``session_key``, ...) still work, with a deprecation warning naming the record to pass
    (removed in 2.0.0).
    """

    template_fields: Sequence[str] = (
        *SqlSinkOperator.sink_fields,
        "wasb_conn_id",
        "checkpoint_container",
        "instance",
        "instances",
        "max_events",
        "max_duration",
        "partition_ids",
        "partition_by",
    )
    ui_color = "#e3f1e0"
    hub_role = "input"

    def __init__(
        self,
        *,
        checkpoints: BlobCheckpoints | None = None,
        instance: int = 0,
        ownership: Ownership | None = None,
        batching: Batching | None = None,
        limits: IngestLimits | None = None,
        sessions: Sessions | None = None,
        dedupe: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.instance = instance
        self.dedupe = dedupe
        self._keep_checkpoints(record_of(self, "checkpoints", BlobCheckpoints, checkpoints, CHECKPOINT_ARGUMENTS,
                                         requires=("checkpoint_container",)))
        owned = record_of(self, "ownership", Ownership, ownership, OWNERSHIP_ARGUMENTS) or Ownership()
        self.instances, self.strategy, self.ownership_expiry = owned.instances, owned.strategy, owned.expiry
        self._keep_batching(record_of(self, "batching", Batching, batching, self._batching_arguments()) or Batching())
        bounds = record_of(self, "limits", IngestLimits, limits, LIMIT_ARGUMENTS) or IngestLimits()
        self.max_events, self.max_duration, self.partition_ids = bounds.max_events, bounds.max_duration, bounds.partition_ids
        self.stall_timeout, self.lag_interval = bounds.stall_timeout, bounds.lag_interval
        self.sessions = record_of(self, "sessions", Sessions, sessions, SESSION_ARGUMENTS, requires=("session_key",))
        self.session_key = self.sessions.key if self.sessions else None
        self._run: IngestRun | None = None
        self._lineage_hub: tuple[str, str] | None = None

    def _keep_checkpoints(self, checkpoints: BlobCheckpoints | None) -> None:
        """The checkpoints' record as the flat attributes the task templates and the tab reads (none: ``None``s)."""
        kept = checkpoints or BlobCheckpoints("")
        self.checkpoint_container = kept.container or None
        self.wasb_conn_id = kept.wasb_conn_id if checkpoints else None
        self.checkpoint_interval = kept.interval

    def _batching_arguments(self) -> dict[str, str]:
        """The deprecated batching arguments: ``delta_batch_seconds`` was a Delta sink's ``batch_seconds`` (a SQL
        sink never read it)."""
        old = self.given_deprecated_arguments
        if "delta_batch_seconds" in old and self.sink != DELTA:
            warnings.warn(f"Task {self.task_id!r}: delta_batch_seconds= is deprecated and will be removed in {REMOVED_IN}, "
                          "and a SQL sink never read it: drop it, or pass batching=Batching(seconds=...)",
                          AirflowProviderDeprecationWarning, stacklevel=4)
            old.pop("delta_batch_seconds")
        if "delta_batch_seconds" in old and old.get("batch_seconds", old["delta_batch_seconds"]) != old["delta_batch_seconds"]:
            raise ValueError(f"Task {self.task_id!r}: batch_seconds={old['batch_seconds']!r} and its deprecated spelling "
                             f"delta_batch_seconds={old['delta_batch_seconds']!r} disagree; pass batching=Batching(seconds=...)")
        return BATCHING_ARGUMENTS

    def _keep_batching(self, batching: Batching) -> None:
        self.batch_size, self.batch_bytes = batching.size, batching.byte_size
        self.batch_seconds, self.max_wait_time = batching.seconds, batching.max_wait_time

    def on_kill(self) -> None:
        """Stop after the batch being committed; the next run resumes from the SQL checkpoint."""
        if self._run is not None:
            self._run.stop()

    def _owner_id(self, context: Context) -> str:
        """Stable across retries of this task instance, distinct between runs and instances."""
        return f"{self.dag_id}.{self.task_id}.{context['run_id']}.{self.instance}"

    def _upto(self, context: Context) -> dict[str, int] | None:
        """Per-partition last sequence number to load (``RunLimits.upto``); ``None``: the hub's end."""
        return None

    def execute(self, context: Context) -> dict[str, Any]:
        with airflow_errors(self.task_id, self):
            endpoint = EventHubHook(self.event_hubs_conn_id, self.eventhub_name).get_endpoint()
            self.remember_hub(endpoint)
            delta = self.sink == DELTA
            sessions = None
            if self.sessions:
                sessions = SessionConfig.of(
                    self.sessions.key, self.sessions.sequence, first_sequence=self.sessions.first_sequence,
                    end=self.sessions.end, defer_limit_seconds=self.sessions.defer_limit,
                )
            if delta:
                check_delta_options(sessions=sessions, mode=self.delta_mode, merge_keys=self.merge_keys)
            batch_bytes = self.batch_bytes if self.batch_bytes not in (None, "", "None") else (
                DELTA_BATCH_BYTES if delta else SQL_BATCH_BYTES)
            limits = RunLimits(
                batch_size=None if self.batch_size in (None, "", "None") else int(self.batch_size),
                batch_bytes=int(batch_bytes),
                batch_seconds=float(self.batch_seconds) if self.batch_seconds is not None else (
                    DELTA_BATCH_SECONDS if delta else SQL_BATCH_SECONDS),
                max_wait_time=float(self.max_wait_time),
                max_events=None if self.max_events in (None, "", "None") else int(self.max_events),
                max_duration=None if self.max_duration in (None, "", "None") else float(self.max_duration),
                ownership_expiry=float(self.ownership_expiry),
                strategy=self.strategy,
                instances=None if self.instances in (None, "", "None") else int(self.instances),
                partition_ids=[str(p) for p in self.partition_ids] if self.partition_ids else None,
                stall_timeout=float(self.stall_timeout),
                upto=self._upto(context),
                checkpoint_interval=float(self.checkpoint_interval),
                lag_interval=float(self.lag_interval),
            )
            decoder = self._decoder()
            processor = BatchProcessor("delta_table" if delta else self.table, self._row_function(), sessions=sessions,
                                       dedupe=self.dedupe, decoder=decoder)
            if delta:
                processor.table = self.table  # a path or URI: named in the processor's messages
            container = (
                BlobStorageHook(str(self.wasb_conn_id)).ensure_container(self.checkpoint_container)
                if self.checkpoint_container
                else None
            )
            owner_id = self._owner_id(context)
            self.log.info(
                "Ingesting hub %s (consumer group %s) into %s via %s as instance %s",
                endpoint.eventhub_name, self.consumer_group, self.table,
                "the Delta Lake sink" if delta else self.sql_conn_id, owner_id,
            )
            store: SqlIngestStore | DeltaIngestStore = self._delta_store(endpoint) if delta else self._store(endpoint)
            try:
                self._run = IngestRun(
                    endpoint, self.consumer_group, store, processor,
                    owner_id=owner_id, container_client=container, limits=limits,
                    on_batch=lambda batch: self.count(endpoint.eventhub_name, batch),
                )
                with sdk_failures(self._failure_sites(endpoint, container)):
                    return self._run.run()
            finally:
                store.close()
                decoder.close()

    def _delta_store(self, endpoint: Any) -> DeltaIngestStore:
        return delta_store(endpoint, self.consumer_group, self.table, self.sink_wasb_conn_id, mode=self.delta_mode,
                           merge_keys=self.merge_keys, partition_by=self.partition_by,
                           dead_letter_table=self.dead_letter_table, evolve_columns=self.evolve_columns)

    def count(self, hub: str, batch: IngestedBatch) -> None:
        """The metrics of one committed batch: its rows, dead letters and duplicates, its time, and the
        consumer group's lag after it (:mod:`airflow_provider_eh.metrics`)."""
        tags = {"hub": hub, "consumer_group": self.consumer_group, "partition": batch.partition_id}
        metrics.incr("eventhubs.ingest.batches", **tags)
        metrics.incr("eventhubs.ingest.rows", batch.counts.rows, **tags)
        metrics.incr("eventhubs.ingest.dead_letters", batch.counts.dead_letters, **tags)
        metrics.incr("eventhubs.ingest.duplicates", batch.counts.duplicates, **tags)
        metrics.timing("eventhubs.ingest.batch.duration", batch.seconds, **tags)
        metrics.checkpoint_lag(hub, self.consumer_group, batch.partition_id, batch.lag, batch.enqueued_time)

    def _failure_sites(self, endpoint: Any, container: Any) -> Callable[[BaseException], FailureSite]:
        """Where a failure of the run happens, for the error map: the hub as the consumer group, or the
        checkpoint container for a storage error; with what the run committed before it."""
        def site(exc: BaseException) -> FailureSite:
            run = self._run
            done = (f"{run.committed_events} events were committed with their SQL checkpoints before the failure: "
                    "the next try resumes after them." if run is not None and run.committed_events else
                    "Nothing was loaded: the SQL checkpoints are unchanged.")
            if container is not None and is_storage_error(exc):
                return FailureSite.of_blob(str(self.wasb_conn_id), container.url, container=self.checkpoint_container,
                                           container_field="checkpoint_container", role="checkpoints", done=done)
            return FailureSite.of_endpoint(self.event_hubs_conn_id, endpoint, consumer_group=self.consumer_group,
                                           done=done)

        return site

    def lineage_outputs(self) -> list[tuple[str, str]]:
        """The table written (OpenLineage; the hub read is the input)."""
        if self.sink == DELTA:
            uri = str(self.table)
            scheme, sep, rest = uri.partition("://")
            return [(f"{scheme}://{rest.split('/', 1)[0]}", rest.split("/", 1)[-1]) if sep else ("file", uri)]
        conn = BaseHook.get_connection(str(self.sql_conn_id))
        return [table_dataset(conn.conn_type or "", conn.host, self.table, port=conn.port, schema=conn.schema)]


class EventHubDeadLetterReplayOperator(SqlSinkOperator):
    """
    Apply dead letters again once their cause is fixed (a fixed row function, a fixed table), on a SQL or Delta sink.

    On SQL each dead letter is replayed in its own transaction; one that succeeds is marked ``replayed`` and
    never applied again, one that fails again stays ``dead`` with the new error and ``attempts + 1``.
    Returns (XCom) ``{replayed: [[partition, seq], ...], failed: [[partition, seq, error], ...]}``;
    with ``fail_on_error`` the task fails when any replay failed.

    :param sink: the ingest task's sink: :class:`SqlSink`, where each dead letter is replayed in its own
        transaction, or :class:`DeltaSink`, whose dead letters are in its ``dead_letter_table``; there each replay
        is three commits (the letters marked ``replaying``, their rows with the replay's application transaction,
        the letters marked ``replayed``), so a replay killed anywhere and run again writes each letter's rows once.
    :param row_function: as for :class:`EventHubIngestOperator`.
    :param columns: as for :class:`EventHubIngestOperator`. (templated)
    :param event_hubs_conn_id: the hub's connection (names the stream the dead letters belong to). (templated)
    :param schema_registry_conn_id: as for :class:`EventHubIngestOperator`: typed dead letters are decoded again. (templated)
    :param eventhub_name: the hub. (templated)
    :param consumer_group: the consumer group of the ingest task. (templated)
    :param partition_id: only this partition. (templated)
    :param sequence_numbers: only these sequence numbers of ``partition_id``. (templated)
    :param reasons: only dead letters with these reasons. (templated)
    :param fail_on_error: fail the task when a dead letter fails again.

    The flat sink arguments (``table``, ``sql_conn_id``, ``delta_mode``, ...) still work, with a deprecation
    warning (removed in 2.0.0).
    """

    template_fields: Sequence[str] = (
        *SqlSinkOperator.sink_fields,
        "partition_id",
        "sequence_numbers",
        "reasons",
    )

    def __init__(
        self,
        *,
        partition_id: str | None = None,
        sequence_numbers: Sequence[int] | None = None,
        reasons: Sequence[str] | None = None,
        fail_on_error: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.partition_id = partition_id
        self.sequence_numbers = sequence_numbers
        self.reasons = reasons
        self.fail_on_error = fail_on_error

    def execute(self, context: Context) -> dict[str, Any]:
        with airflow_errors(self.task_id):
            endpoint = EventHubHook(self.event_hubs_conn_id, self.eventhub_name).get_endpoint()
            decoder = self._decoder()
            store: SqlIngestStore | DeltaIngestStore
            if self.sink == DELTA:
                check_delta_options(sessions=None, mode=self.delta_mode, merge_keys=self.merge_keys)
                processor = BatchProcessor("delta_table", self._row_function(), decoder=decoder)
                processor.table = self.table  # a path or URI: named in the processor's messages
                store = delta_store(endpoint, self.consumer_group, self.table, self.sink_wasb_conn_id, mode=self.delta_mode,
                                    merge_keys=self.merge_keys, dead_letter_table=self.dead_letter_table,
                                    evolve_columns=self.evolve_columns)
            else:
                processor = BatchProcessor(self.table, self._row_function(), decoder=decoder)
                store = self._store(endpoint)
            try:
                result = replay_dead_letters(
                    store, processor,
                    partition_id=None if self.partition_id in (None, "") else str(self.partition_id),
                    sequence_numbers=[int(s) for s in self.sequence_numbers] if self.sequence_numbers else None,
                    reasons=self.reasons,
                )
            finally:
                store.close()
                decoder.close()
        self.log.info("Replayed %d dead letters; %d failed again", len(result["replayed"]), len(result["failed"]))
        if result["failed"] and self.fail_on_error:
            first = result["failed"][0]
            raise AirflowFailException(
                f"Task {self.task_id!r}: {len(result['failed'])} dead letters failed again, first partition "
                f"{first[0]} seq {first[1]}: {first[2]}. Fix the cause and replay again."
            )
        return result
