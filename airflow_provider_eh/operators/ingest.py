"""Ingest from Event Hubs into a SQL or Delta table, one transaction per batch; replay dead letters.

Thin shells over :mod:`airflow_provider_eh.ingest`: the operators turn connections into an
endpoint, a DB-API connection (or a Delta table and its storage options) and a blob container, and hand
them to the engine. An SDK or network
error of the run is raised as the error map's (:mod:`airflow_provider_eh.client.failures`): it names
the connection, the address, the consumer group or the checkpoint container, the field to check and
how many events the run committed before it, and says whether a retry can help.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.sdk import BaseHook

from airflow_provider_eh import metrics
from airflow_provider_eh.client.failures import FailureSite, is_storage_error
from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.hooks.blob import BlobStorageHook
from airflow_provider_eh.hooks.event_hubs import EventHubsHook
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
    APPEND,
    DELTA_BATCH_BYTES,
    DeltaIngestStore,
    check_delta_options,
)
from airflow_provider_eh.lineage import table_dataset
from airflow_provider_eh.operators.hub_lineage import HubLineage
from airflow_provider_eh.operators.ingest_base import (
    DELTA,
    SQL,
    SQL_BATCH_BYTES,
    SqlSinkOperator,
    batch_seconds_of,
    delta_store,
    sdk_failures,
)
from airflow_provider_eh.operators.task_errors import airflow_errors
from airflow_provider_eh.stamps import SEQ as STAMP_SEQ

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_eh.ingest.runner import IngestedBatch


class EventHubIngestOperator(HubLineage, SqlSinkOperator):
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

    :param table: the target table; it must exist. (templated)
    :param sql_conn_id: an Airflow SQL connection of type ``sqlite``, ``postgres`` or ``mysql`` (MySQL or
        MariaDB); another type is refused before anything is read. (templated)
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
    :param wasb_conn_id: the ``wasb`` connection of ``checkpoint_container``. (templated)
    :param checkpoint_container: the container of the standard checkpoint and ownership blobs; created
        when missing. ``None``: SQL checkpoints only, one instance. (templated)
    :param instance: this instance's number (map over it). (templated)
    :param instances: how many instances share the hub. (templated)
    :param strategy: ``balanced`` or ``greedy`` claiming.
    :param ownership_expiry: seconds after which a claim that was not renewed is taken over.
    :param batch_size: events per transaction at most; default: as many as have arrived, within
        ``batch_bytes`` (a busy partition gets large transactions, a quiet one prompt small ones).
    :param max_wait_time: seconds to wait for a batch to fill.
    :param batch_bytes: event bodies per transaction at most; default 4 MiB on a SQL sink, 64 MiB on a Delta sink.
    :param max_events: stop after this many events. (templated)
    :param max_duration: stop after this many seconds. (templated)
    :param partition_ids: only these partitions. (templated)
    :param stall_timeout: seconds a pending partition may deliver nothing before the task fails (and retries).
    :param checkpoint_interval: seconds between two writes of a partition's blob checkpoint while the
        task runs (the SQL checkpoint moves with every batch; the last one is always written at the end).
    :param lag_interval: seconds between two reads of the partitions' last enqueued sequence numbers, which
        each batch's lag (the result's and the ``eventhubs.checkpoint.lag`` metric's) is counted from.
    :param dedupe: skip stamped events at or below their producer group's high-water mark.
    :param session_key: ``property:NAME`` or ``body:FIELD``: enables in-order processing per session.
    :param session_sequence: where the per-session sequence is (default ``property:eh.seq``).
    :param session_first_sequence: the sequence a session starts at.
    :param session_end: where a truthy "last event of the session" flag is, if any.
    :param session_defer_limit: seconds (of enqueued time) a deferred event may wait before it is dead-lettered.
    :param state_table_prefix: prefix of the state tables (checkpoint, dedupe, dead_letter, session, deferred).
    :param sink: ``sql`` (``table`` in ``sql_conn_id``) or ``delta``: ``table`` is then a Delta table's local path
        or ``abfss://`` / ``az://`` URI (the credentials of ``wasb_conn_id``), created by the first batch when
        missing. Each batch is one Delta commit holding its rows and the partition's checkpoint (an application
        transaction); ``session_key`` is refused; dedupe marks are application transactions too.
    :param delta_mode: ``append`` or ``merge`` (upsert on ``merge_keys``).
    :param merge_keys: the key columns of ``delta_mode="merge"``. (templated)
    :param partition_by: partition columns of the Delta table the first batch creates. (templated)
    :param dead_letter_table: the Delta table of dead letters; default ``<table>_dead_letters``. (templated)
    :param batch_seconds: how long a partition's events wait for more before their commit (unless ``batch_size`` /
        ``batch_bytes`` is reached first, or the run's target); default 0.25 on a SQL sink (fewer, larger
        transactions), 10 on a Delta sink (fewer, larger commits and files). 0: commit what has arrived at once.
    :param delta_batch_seconds: deprecated spelling of ``batch_seconds`` for a Delta sink (removed in 2.0.0).
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
        "merge_keys",
        "partition_by",
        "dead_letter_table",
    )
    ui_color = "#e3f1e0"
    hub_role = "input"

    def __init__(
        self,
        *,
        table: str,
        wasb_conn_id: str = BlobStorageHook.default_conn_name,
        checkpoint_container: str | None = None,
        instance: int = 0,
        instances: int | None = None,
        strategy: str = "balanced",
        ownership_expiry: float = 60.0,
        batch_size: int | None = None,
        max_wait_time: float = 1.0,
        batch_bytes: int | None = None,
        max_events: int | None = None,
        max_duration: float | None = None,
        partition_ids: Sequence[str] | None = None,
        stall_timeout: float = 120.0,
        checkpoint_interval: float = 1.0,
        lag_interval: float = 5.0,
        dedupe: bool = True,
        session_key: str | None = None,
        session_sequence: str = f"property:{STAMP_SEQ}",
        session_first_sequence: int = 0,
        session_end: str | None = None,
        session_defer_limit: float = 3600.0,
        sink: str = SQL,
        delta_mode: str = APPEND,
        merge_keys: Sequence[str] | None = None,
        partition_by: Sequence[str] | None = None,
        dead_letter_table: str | None = None,
        delta_batch_seconds: float | None = None,
        batch_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, **kwargs)
        self.sink = sink
        self.delta_mode = delta_mode
        self.merge_keys = merge_keys
        self.partition_by = partition_by
        self.dead_letter_table = dead_letter_table
        self.batch_seconds = batch_seconds_of(self.task_id, sink, batch_seconds, delta_batch_seconds)
        self.wasb_conn_id = wasb_conn_id
        self.checkpoint_container = checkpoint_container
        self.instance = instance
        self.instances = instances
        self.strategy = strategy
        self.ownership_expiry = ownership_expiry
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self.max_wait_time = max_wait_time
        self.max_events = max_events
        self.max_duration = max_duration
        self.partition_ids = partition_ids
        self.stall_timeout = stall_timeout
        self.checkpoint_interval = checkpoint_interval
        self.lag_interval = lag_interval
        self.dedupe = dedupe
        self.session_key = session_key
        self.session_sequence = session_sequence
        self.session_first_sequence = session_first_sequence
        self.session_end = session_end
        self.session_defer_limit = session_defer_limit
        self._run: IngestRun | None = None
        self._lineage_hub: tuple[str, str] | None = None

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
            endpoint = EventHubsHook(self.event_hubs_conn_id, self.eventhub_name).get_endpoint()
            self.remember_hub(endpoint)
            if self.sink not in (SQL, DELTA):
                raise SinkConfigError(f"sink {self.sink!r} must be {SQL!r} or {DELTA!r}")
            delta = self.sink == DELTA
            sessions = None
            if self.session_key:
                sessions = SessionConfig.of(
                    self.session_key, self.session_sequence, first_sequence=self.session_first_sequence,
                    end=self.session_end, defer_limit_seconds=self.session_defer_limit,
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
                BlobStorageHook(self.wasb_conn_id).ensure_container(self.checkpoint_container)
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
        return delta_store(endpoint, self.consumer_group, self.table, self.wasb_conn_id, mode=self.delta_mode,
                           merge_keys=self.merge_keys, partition_by=self.partition_by,
                           dead_letter_table=self.dead_letter_table)

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
                return FailureSite.of_blob(self.wasb_conn_id, container.url, container=self.checkpoint_container,
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
        conn = BaseHook.get_connection(self.sql_conn_id)
        return [table_dataset(conn.conn_type or "", conn.host, self.table, port=conn.port, schema=conn.schema)]


class EventHubDeadLetterReplayOperator(SqlSinkOperator):
    """
    Apply dead letters again once their cause is fixed (a fixed row function, a fixed table), on a SQL or Delta sink.

    On SQL each dead letter is replayed in its own transaction; one that succeeds is marked ``replayed`` and
    never applied again, one that fails again stays ``dead`` with the new error and ``attempts + 1``.
    Returns (XCom) ``{replayed: [[partition, seq], ...], failed: [[partition, seq, error], ...]}``;
    with ``fail_on_error`` the task fails when any replay failed.

    :param table: the target table. (templated)
    :param sql_conn_id: the Airflow SQL connection the ingest task wrote to. (templated)
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
    :param state_table_prefix: prefix of the state tables.
    :param sink: ``sql``, or ``delta``: ``table`` is then the Delta table the ingest task wrote (its path or URI,
        reached with ``wasb_conn_id``), and its dead letters are in ``dead_letter_table`` (default
        ``<table>_dead_letters``). Each replay is three commits (the letters marked ``replaying``, their rows with
        the replay's application transaction, the letters marked ``replayed``), so a replay killed anywhere and
        run again writes each letter's rows once.
    :param wasb_conn_id: the ``wasb`` connection of a Delta table on Azure storage. (templated)
    :param dead_letter_table: the Delta dead-letter table. (templated)
    :param delta_mode: ``append`` or ``merge``, as the ingest task writes.
    :param merge_keys: the key columns of ``delta_mode="merge"``. (templated)
    """

    template_fields: Sequence[str] = (
        *SqlSinkOperator.sink_fields,
        "partition_id",
        "sequence_numbers",
        "reasons",
        "wasb_conn_id",
        "dead_letter_table",
        "merge_keys",
    )

    def __init__(
        self,
        *,
        table: str,
        partition_id: str | None = None,
        sequence_numbers: Sequence[int] | None = None,
        reasons: Sequence[str] | None = None,
        fail_on_error: bool = True,
        sink: str = SQL,
        wasb_conn_id: str = BlobStorageHook.default_conn_name,
        dead_letter_table: str | None = None,
        delta_mode: str = APPEND,
        merge_keys: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, **kwargs)
        self.partition_id = partition_id
        self.sequence_numbers = sequence_numbers
        self.reasons = reasons
        self.fail_on_error = fail_on_error
        self.sink = sink
        self.wasb_conn_id = wasb_conn_id
        self.dead_letter_table = dead_letter_table
        self.delta_mode = delta_mode
        self.merge_keys = merge_keys

    def execute(self, context: Context) -> dict[str, Any]:
        with airflow_errors(self.task_id):
            endpoint = EventHubsHook(self.event_hubs_conn_id, self.eventhub_name).get_endpoint()
            if self.sink not in (SQL, DELTA):
                raise SinkConfigError(f"sink {self.sink!r} must be {SQL!r} or {DELTA!r}")
            decoder = self._decoder()
            store: SqlIngestStore | DeltaIngestStore
            if self.sink == DELTA:
                check_delta_options(sessions=None, mode=self.delta_mode, merge_keys=self.merge_keys)
                processor = BatchProcessor("delta_table", self._row_function(), decoder=decoder)
                processor.table = self.table  # a path or URI: named in the processor's messages
                store = delta_store(endpoint, self.consumer_group, self.table, self.wasb_conn_id, mode=self.delta_mode,
                                    merge_keys=self.merge_keys, dead_letter_table=self.dead_letter_table)
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
