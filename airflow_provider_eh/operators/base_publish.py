"""What the publishing operators share: their state arguments, the batch id, the publisher.

:class:`BasePublishOperator` is the base of :class:`~airflow_provider_eh.operators.publish.EventHubPublishOperator`
and :class:`~airflow_provider_eh.operators.spark_publish.SparkToEventHubOperator`; each subclass only
says where its events come from. The error mapping and the OpenLineage method are the ones every
operator shares (:mod:`airflow_provider_eh.operators.task_errors`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from airflow_provider_eh import metrics
from airflow_provider_eh.client.fencing import fencing_mode
from airflow_provider_eh.extras import require_extra
from airflow_provider_eh.hooks.event_hubs import EventHubHook
from airflow_provider_eh.hooks.producer_state import ProducerStateHook
from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook
from airflow_provider_eh.operators.deprecated_arguments import (
    DeprecatedPublishArguments,
    deprecated_values,
    record_of,
)
from airflow_provider_eh.operators.hub_lineage import HubLineage
from airflow_provider_eh.operators.settings import WASB_DEFAULT, Delivery, EventSchema, ProducerState
from airflow_provider_eh.operators.task_errors import airflow_errors
from airflow_provider_eh.publishing import IdempotentPublisher, PartitionOptions, PartitionResult, derive_batch_id
from airflow_provider_eh.publishing.driver import progress_of
from airflow_provider_eh.publishing.in_flight import check_lease_only_batch_bytes
from airflow_provider_eh.publishing.plan import producer_group_of
from airflow_provider_eh.publishing.typed import (
    RowEncoder,
    compatibility_mode,
    load_definition,
    resolve_schema,
    schema_format,
)

if TYPE_CHECKING:
    from airflow.sdk import Context


#: a partition's outcome -> the counter of its batches
_BATCHES = {
    "published": "eventhubs.publish.batches.published",
    "recovered": "eventhubs.publish.batches.recovered",
    "already_committed": "eventhubs.publish.batches.already_committed",
}


#: deprecated flat argument -> its field of the record that replaced it
STATE_ARGUMENTS = {"state_backend": "backend", "state_container": "container", "wasb_conn_id": "wasb_conn_id",
                   "lease_seconds": "lease_seconds", "claim_timeout": "claim_timeout",
                   "keep_committed": "keep_committed", "keep_committed_days": "keep_committed_days"}
DELIVERY_ARGUMENTS = {"send_attempts": "send_attempts", "hub_fencing": "hub_fencing",
                      "lease_only_batch_bytes": "lease_only_batch_bytes"}
SCHEMA_ARGUMENTS = {"schema_group": "group", "schema": "definition", "schema_file": "file", "schema_name": "name",
                    "schema_format": "format",
                    "auto_register_schema": "auto_register", "schema_compatibility": "compatibility"}


class BasePublishOperator(HubLineage, DeprecatedPublishArguments):
    """
    Base of the operators that publish a batch exactly once.

    :param eventhub_name: the hub (templated); default: the connection's.
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection (templated).
    :param state: :class:`ProducerState`: where producer states are kept, ``"blob"`` (a container, fenced by blob
        leases: runs may overlap) or ``"variable"`` (Airflow Variables: one writer per producer group); without
        it, Variables, which the task's log then names with their guarantee.
    :param producer_group: the producer group (templated); default ``"{dag_id}.{task_id}"``.
    :param generation: bump to republish the same interval on purpose (templated).
    :param partition_options: per partition ``{"producer_group", "owner_level", "starting_sequence_number"}``.
    :param delivery: :class:`Delivery`: how each partition's send is fenced (the hub's idempotent producers or the
        claim's lease) and retried. Each partition's result says which fence held its send (``"hub"`` or
        ``"lease"``) and the lease-only batch bound in force (``null`` under the hub's fencing).
    :param schema: :class:`EventSchema`: publish typed events, each body (a row) encoded against a schema of the
        namespace's Schema Registry by Microsoft's encoder, the schema id in each event's content type
        (``avro/binary+<id>``). Every row is encoded before anything is sent: a row that does not fit fails the
        task naming it, and nothing of the batch is sent.

    The flat arguments these records replaced (``state_backend``, ``state_container``, ``wasb_conn_id``,
    ``keep_committed``, ``hub_fencing``, ``schema_group``, a definition as ``schema``, ...) still work, with a
    deprecation warning naming the record to pass (removed in 2.0.0).

    With a schema, each partition's result also gives ``schema``: ``{group, name, id, version, format}``,
    recorded in the ledger too; the fingerprint covers the encoded bytes and the schema id, so a re-run of
    the interval under another schema version is refused (``BatchContentChangedError``) unless
    ``generation`` is raised.
    """

    template_fields: Sequence[str] = (
        "schema_group",
        "schema_file",
        "schema_name",
        "eventhub_name",
        "event_hubs_conn_id",
        "state_backend",
        "wasb_conn_id",
        "state_container",
        "producer_group",
        "generation",
    )
    ui_color = "#0078d4"
    hub_role = "output"

    def __init__(
        self,
        *,
        eventhub_name: str | None = None,
        event_hubs_conn_id: str = "azure_event_hubs_default",
        state: ProducerState | None = None,
        producer_group: str | None = None,
        generation: int | str = 0,
        partition_options: Mapping[str, Mapping[str, Any]] | None = None,
        delivery: Delivery | None = None,
        schema: EventSchema | Mapping[str, Any] | str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.eventhub_name = eventhub_name
        self.event_hubs_conn_id = event_hubs_conn_id
        self.producer_group = producer_group
        self.generation = generation
        self.partition_options = partition_options
        self._keep_state(state)
        sending = record_of(self, "delivery", Delivery, delivery, DELIVERY_ARGUMENTS) or Delivery()
        self.send_attempts, self.hub_fencing = sending.send_attempts, sending.hub_fencing
        self.lease_only_batch_bytes = sending.lease_only_batch_bytes
        self._keep_schema(schema)
        self.check_schema_settings()  # refused when the DAG is parsed
        self._lineage_hub: tuple[str, str] | None = None

    def _keep_state(self, state: ProducerState | None) -> None:
        """``state`` (or its deprecated flat arguments) as the flat attributes the task templates and the tab reads."""
        if state is not None and not isinstance(state, ProducerState):
            raise ValueError(f"Task {self.task_id!r}: state={state!r}: pass ProducerState('blob', container=...) or "
                             "ProducerState('variable')")
        old = deprecated_values(self, "state", "ProducerState", state, STATE_ARGUMENTS,
                                requires=tuple(n for n in STATE_ARGUMENTS if n != "wasb_conn_id"))
        kept = state or ProducerState("variable")
        self.state_backend = old.get("state_backend") if old else (state.backend if state else None)
        self.state_container = old.get("state_container", kept.container)
        self.wasb_conn_id = old.get("wasb_conn_id", kept.wasb_conn_id if state else
                                    self.given_deprecated_arguments.get("wasb_conn_id", WASB_DEFAULT))
        self.lease_seconds = old.get("lease_seconds", kept.lease_seconds)
        self.claim_timeout = old.get("claim_timeout", kept.claim_timeout)
        self.keep_committed = old.get("keep_committed", kept.keep_committed)
        self.keep_committed_days = old.get("keep_committed_days", kept.keep_committed_days)

    def _keep_schema(self, schema: EventSchema | Mapping[str, Any] | str | None) -> None:
        """``schema`` (or its deprecated flat arguments, a bare definition among them) as flat attributes."""
        record = schema if isinstance(schema, EventSchema) else None
        if schema is not None and record is None:  # a bare definition: the deprecated spelling
            self.given_deprecated_arguments["schema"] = schema
        old = deprecated_values(self, "schema", "EventSchema", record, SCHEMA_ARGUMENTS)
        given = record or EventSchema("")
        self.schema_group = old.get("schema_group", given.group or None)
        self.schema = old.get("schema", given.definition)
        self.schema_file = old.get("schema_file", given.file)
        self.schema_name = old.get("schema_name", given.name)
        self.schema_format = old.get("schema_format", given.format)
        self.auto_register_schema = old.get("auto_register_schema", given.auto_register)
        self.schema_compatibility = old.get("schema_compatibility", given.compatibility)

    def check_schema_settings(self) -> None:
        """Refuse an incomplete or contradictory schema setting, naming the parameter."""
        schema_format(self.schema_format)
        compatibility_mode(self.schema_compatibility)
        given = [n for n in ("schema", "schema_file", "schema_name") if getattr(self, n) not in (None, "")]
        if given and not self.schema_group:
            raise ValueError(f"{given[0]} is set but schema_group is not: name the Schema Registry group of the schema")
        if self.schema_group and not given:
            raise ValueError(f"schema_group={self.schema_group!r}: give the schema too, as `schema` (the definition), "
                             "`schema_file` or `schema_name` (one already registered)")
        if self.schema is not None and self.schema_file:
            raise ValueError("give `schema` or `schema_file`, not both")
        if not isinstance(self.auto_register_schema, bool):
            raise ValueError(f"auto_register_schema={self.auto_register_schema!r}: must be True or False")
        if self.auto_register_schema and given == ["schema_name"]:
            raise ValueError("auto_register_schema=True needs the definition to register (`schema` or `schema_file`)")
        if self.schema is not None:
            load_definition(self.schema)

    def row_encoder(self) -> RowEncoder | None:
        """With a schema, the encoder of this task's rows: the schema resolved in the registry once (found,
        or registered when asked), checked against the latest registered version first when
        ``schema_compatibility`` says so; ``None`` without a schema. Arguments are checked before the
        registry is asked."""
        if not self.schema_group:
            return None
        require_extra("schemaregistry", f"Publishing typed events (schema_group={self.schema_group!r})")
        self.check_arguments()
        self.check_schema_settings()
        fmt = schema_format(self.schema_format)
        definition = load_definition(self.schema, self.schema_file)
        registry = SchemaRegistryHook(self.event_hubs_conn_id).get_endpoint()
        with registry.client() as client:
            definition, used = resolve_schema(client, self.schema_group, fmt, definition=definition,
                                              schema_name=self.schema_name or None,
                                              auto_register=self.auto_register_schema, versions=registry.schema_versions,
                                              compatibility=compatibility_mode(self.schema_compatibility))
        self.log.info("events are encoded against %s (%s)", used.describe(), fmt)
        return RowEncoder(definition, used)

    @property
    def resolved_producer_group(self) -> str:
        """The producer group of this task: ``producer_group``, else ``"{dag_id}.{task_id}"``."""
        return self.producer_group or f"{self.dag_id}.{self.task_id}"

    @property
    def backend(self) -> str:
        return self.state_backend or ("blob" if self.state_container else "variable")

    def backend_in_force(self) -> str:
        """:attr:`backend`, with a warning in the task's log where it was not chosen but defaulted to Variables."""
        if not self.state_backend and not self.state_container:
            self.log.warning(
                "No state_backend and no state_container: producer states are kept in Airflow Variables, which "
                "take one writer per producer group (runs of %r must not overlap: max_active_runs=1 or a pool "
                "of one slot). Set state_container (and wasb_conn_id) for the blob backend, whose leases fence "
                "concurrent writers, or state_backend='variable' to choose this one and silence this warning.",
                self.resolved_producer_group)
        return self.backend

    def batch_id(self, context: Context, group: str) -> str:
        """The derived batch id of this task instance."""
        ti = context["ti"]
        return derive_batch_id(
            group, self.dag_id, self.task_id,
            interval_start=context.get("data_interval_start"), interval_end=context.get("data_interval_end"),
            logical_date=context.get("logical_date"), run_id=context.get("run_id"),
            map_index=-1 if ti.map_index is None else ti.map_index,
            generation=int(self.generation or 0),
        )

    def check_arguments(self) -> None:
        """Refuse out-of-range arguments (after templating) with the argument, its value and the allowed range."""

        def whole(name: str, value: Any, low: int, high: int | None = None, why: str = "") -> int:
            try:
                number = int(value)
                ok = not isinstance(value, bool) and number == float(value) and number >= low and (high is None or number <= high)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                bounds = f"between {low} and {high}" if high is not None else f">= {low}"
                raise ValueError(f"{name}={value!r}: must be a whole number {bounds}{why}")
            return number

        whole("generation", self.generation, 0, why="; bump it by one to republish an interval on purpose")
        whole("send_attempts", self.send_attempts, 1)
        fencing_mode(self.hub_fencing)
        check_lease_only_batch_bytes(self.lease_only_batch_bytes)
        if self.backend == "blob":
            whole("lease_seconds", self.lease_seconds, 15, 60, why=" (Azure Blob lease limits)")
        if self.keep_committed is not None:
            whole("keep_committed", self.keep_committed, 1,
                  why=" or None; a pruned batch is published again when its interval re-runs")
        if self.keep_committed_days is not None and (
            not isinstance(self.keep_committed_days, (int, float)) or isinstance(self.keep_committed_days, bool)
            or not self.keep_committed_days > 0
        ):
            raise ValueError(f"keep_committed_days={self.keep_committed_days!r}: must be a number of days above 0, or None; "
                             "a pruned batch is published again when its interval re-runs")
        if self.claim_timeout is not None and (
            not isinstance(self.claim_timeout, (int, float)) or isinstance(self.claim_timeout, bool) or self.claim_timeout < 0
        ):
            raise ValueError(f"claim_timeout={self.claim_timeout!r}: must be a number of seconds >= 0")
        allowed = set(PartitionOptions.__dataclass_fields__)
        for pid, options in (self.partition_options or {}).items():
            unknown = set(dict(options)) - allowed
            if unknown:
                raise ValueError(
                    f"partition_options[{pid!r}]: unknown option(s) {', '.join(sorted(unknown))}; "
                    f"allowed: {', '.join(sorted(allowed))}"
                )
            for name in ("owner_level", "starting_sequence_number"):
                if dict(options).get(name) is not None:
                    whole(f"partition_options[{pid!r}][{name!r}]", dict(options)[name], 0)

    def origin(self, context: Context) -> dict[str, Any]:
        """This task instance, recorded with each batch it publishes (the Event Hubs view links to it)."""
        ti = context["ti"]
        map_index = getattr(ti, "map_index", None)
        return {
            "dag_id": self.dag_id, "task_id": self.task_id, "run_id": context.get("run_id"),
            "map_index": -1 if map_index is None else int(map_index), "try_number": getattr(ti, "try_number", None),
        }

    def get_publisher(self, **kwargs: Any) -> IdempotentPublisher:
        """The engine's publisher on this task's hub, state store and producer group (arguments checked first)."""
        self.check_arguments()
        endpoint = EventHubHook(self.event_hubs_conn_id, self.eventhub_name).get_endpoint()
        self.remember_hub(endpoint)
        state = ProducerStateHook(
            self.backend_in_force(), wasb_conn_id=self.wasb_conn_id, container=self.state_container,
            lease_seconds=self.lease_seconds, claim_timeout=self.claim_timeout,
        )
        store = state.get_store()
        self.remember_site(state.failure_site)
        return IdempotentPublisher(
            endpoint, store, producer_group=self.resolved_producer_group, partition_options=self._partition_options(),
            keep_committed=self.keep_committed, keep_committed_days=self.keep_committed_days,
            send_attempts=self.send_attempts, hub_fencing=self.hub_fencing,
            lease_only_batch_bytes=self.lease_only_batch_bytes, **kwargs,
        )

    @contextmanager
    def measured(self) -> Iterator[None]:
        """
        Time this try's publish (``eventhubs.publish.duration``, whether it succeeds or fails). A publish
        that fails counts what it had committed (:meth:`count`) and the partition batches it left
        uncommitted (``eventhubs.publish.batches.partial``), as far as its error says.
        """
        started = time.monotonic()
        try:
            yield
        except BaseException as exc:
            progress = progress_of(exc)
            if progress is not None:
                self.count(progress.results)
                for pid in progress.pending:
                    metrics.incr("eventhubs.publish.batches.partial", **self._partition_tags(pid))
            raise
        finally:
            metrics.timing("eventhubs.publish.duration", time.monotonic() - started, hub=self._metrics_hub(),
                           producer_group=self.resolved_producer_group)

    def count(self, results: Iterable[PartitionResult]) -> None:
        """The metrics of each partition's outcome: batches by status, events sent, resent and suppressed, the
        fence of a send, the read-back's time (:mod:`airflow_provider_eh.metrics`)."""
        for result in results:
            tags = self._partition_tags(result.partition_id)
            metrics.incr(_BATCHES[result.status], **tags)
            committed_before = result.status == "already_committed"
            metrics.incr("eventhubs.publish.events.sent", 0 if committed_before else result.events - result.landed_count,
                         **tags)
            metrics.incr("eventhubs.publish.events.resent", result.resent, **tags)
            metrics.incr("eventhubs.publish.events.suppressed", result.events if committed_before else result.landed_count,
                         **tags)
            if result.fencing and not committed_before:
                metrics.incr("eventhubs.publish.fenced", **tags, fence=result.fencing)
            if result.readback_seconds is not None:
                metrics.timing("eventhubs.readback.duration", result.readback_seconds, **tags)

    def _metrics_hub(self) -> str | None:
        return self._lineage_hub[1] if self._lineage_hub else self.eventhub_name

    def _partition_options(self) -> dict[str, PartitionOptions]:
        return {str(p): PartitionOptions(**dict(o)) for p, o in (self.partition_options or {}).items()}

    def _partition_tags(self, partition_id: str) -> dict[str, Any]:
        group = producer_group_of(self._partition_options(), partition_id, self.resolved_producer_group)
        return {"hub": self._metrics_hub(), "producer_group": group, "partition": partition_id}

    def provider_errors(self) -> AbstractContextManager[None]:
        """Non-retryable provider errors and configuration errors fail the task without burning retries
        (:func:`~airflow_provider_eh.operators.task_errors.airflow_error`)."""
        return airflow_errors(self.task_id, self)

    def report(self, batch_id: str, results: Mapping[str, PartitionResult]) -> dict[str, dict[str, Any]]:
        """
        Log each partition's outcome; the XCom value: per partition ``{events, first_seq, last_seq,
        service_last_sequence_number, fencing, lease_only_batch_bytes, status, landed, resent,
        readback_seconds}`` (``fencing``: ``"hub"`` or ``"lease"`` when the batch's send was fenced so, ``""``
        when nothing was sent; ``lease_only_batch_bytes``: under ``"lease"``, the most bytes of one SDK batch,
        what a stall could land twice; else ``None``; ``status``: ``"published"``, ``"recovered"`` (a batch
        in doubt settled: ``landed`` of its events found in the hub, ``resent`` sent again) or
        ``"already_committed"``; ``readback_seconds``: how long the read-back of a batch in doubt took,
        ``None`` when nothing was in doubt). A re-run of a committed batch returns what the ledger recorded.
        A typed batch's partitions also give ``schema``: ``{group, name, id, version, format}`` of the schema
        its events were encoded against. Each partition's outcome is counted in the metrics (:meth:`count`).
        """
        self.count(result for _, result in sorted(results.items()))
        for pid, result in sorted(results.items()):
            self.log.info(
                "group %s batch %s partition %s: %s, %d events, seq %d..%d, service seq up to %d%s%s%s",
                self.resolved_producer_group, batch_id[:16], pid, result.status, result.events, result.first_seq, result.last_seq,
                result.service_last_sequence_number,
                f" (recovery: {result.landed_count} landed, {result.resent} resent)" if result.status == "recovered" else "",
                f"; fenced by the {result.fencing}" if result.fencing else "",
                "" if result.lease_only_batch_bytes is None
                else f" (SDK batches of at most {result.lease_only_batch_bytes} bytes)",
            )
        return {pid: {**result.sequence_range(), "fencing": result.fencing,
                      "lease_only_batch_bytes": result.lease_only_batch_bytes, "status": result.status,
                      "landed": result.landed_count, "resent": result.resent,
                      "readback_seconds": result.readback_seconds,
                      **({"schema": result.schema} if result.schema else {})}
                for pid, result in sorted(results.items())}
