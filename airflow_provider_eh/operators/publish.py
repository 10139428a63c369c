"""Publish events to Event Hubs exactly once: a thin shell over :mod:`airflow_provider_eh.publishing`.

The batch id is derived from the DAG, the task, the run's data interval (else its logical date,
else its run id), the map index and ``generation``: a retry, a clear-and-rerun and a backfill of the
same interval publish nothing twice. Nothing needed for recovery lives in XCom (Airflow 3 clears a
task's XComs before a retry); the producer state store holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook
from airflow_provider_eh.operators.base_publish import BasePublishOperator
from airflow_provider_eh.publishing.typed import TypedBatch, load_definition, resolve_schema, schema_format

if TYPE_CHECKING:
    from airflow.sdk import Context


class _EventsFunction:
    """A ``(context) -> events`` function in the form Airflow calls a callable templated field: ``(context=, jinja_env=)``."""

    def __init__(self, function: Callable[[Context], Iterable[Any]]):
        self.function = function

    def __call__(self, context: Context, jinja_env: Any = None) -> Iterable[Any]:
        return self.function(context)

    def __repr__(self) -> str:
        return f"<events from {getattr(self.function, '__qualname__', self.function)!s}>"


class EventHubPublishOperator(BasePublishOperator):
    """
    Publish a batch of events to one hub, each event exactly once across retries, re-runs and backfills.

    Each event is a mapping ``{"body": ..., "properties": {...}, "partition_id": "0"}`` (or
    ``"partition_key": ...`` instead of ``partition_id``), or a bare body that goes to
    ``partition_id``. Bodies may be bytes, str or JSON-serialisable values (sent as canonical JSON).
    Keys map to partitions by the provider's documented stable hash (see
    :func:`airflow_provider_eh.publishing.partition_for_key`), not the service's.

    Returns (XCom) per partition ``{events, first_seq, last_seq, service_last_sequence_number, fencing,
    lease_only_batch_bytes, status, landed, resent, readback_seconds}``: ``fencing`` is ``"hub"`` or ``"lease"``,
    the fence that held the send, ``lease_only_batch_bytes`` the most bytes of one SDK batch under ``"lease"``
    (``None`` under ``"hub"``), ``status`` ``"published"``, ``"recovered"`` or ``"already_committed"``, and
    ``landed``, ``resent`` and ``readback_seconds`` what settling a batch in doubt found, sent and took.

    :param events: a list of events, a callable ``(context) -> iterable of events``, or an upstream
        task's output (``upstream.output``), which makes that task upstream of this one. (templated)
        Strings in a literal list are Jinja templates, as in every templated field (``"{{ ds }}"``
        renders); events from an upstream output or a callable, and bytes bodies, are sent as they are.
    :param partition_id: partition of bare-body events.
    :param schema_group: publish typed events: each body (a row) is encoded against a schema of this
        group of the namespace's Schema Registry by Microsoft's encoder, the schema id in each event's
        content type (``avro/binary+<id>``). Every row is encoded before anything is sent: a row that does
        not fit fails the task naming it, and nothing of the batch is sent. (templated)
    :param schema: the schema's definition: an Avro record schema, or a JSON Schema, as a dict or JSON text.
    :param schema_file: a file holding the definition instead. (templated)
    :param schema_name: a schema registered already: its latest version is used (with ``schema`` and a JSON
        Schema: the name to register it under, else its ``title``). (templated)
    :param schema_format: ``"Avro"`` (default) or ``"Json"`` (JSON Schema).
    :param auto_register_schema: register the definition when the group does not hold it (default
        ``False``: the task fails, naming the group and schema).

    With a schema, each partition's result also gives ``schema``: ``{group, name, id, version, format}``,
    recorded in the ledger too; the fingerprint covers the schema id, so a re-run of the interval under
    another schema version is refused (``BatchContentChangedError``) unless ``generation`` is raised.

    The hub, connections, state store, producer group, generation, lease and fencing arguments
    (``hub_fencing``, ``lease_only_batch_bytes``) are
    :class:`~airflow_provider_eh.operators.base_publish.BasePublishOperator`'s.
    """

    template_fields: Sequence[str] = ("events", "schema_group", "schema_file", "schema_name",
                                      *BasePublishOperator.template_fields)

    def __init__(
        self,
        *,
        events: Iterable[Any] | Callable[[Context], Iterable[Any]] | Any,
        partition_id: str | None = None,
        schema_group: str | None = None,
        schema: Mapping[str, Any] | str | None = None,
        schema_file: str | None = None,
        schema_name: str | None = None,
        schema_format: str = "Avro",
        auto_register_schema: bool = False,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.events = _EventsFunction(events) if callable(events) else events
        self.partition_id = partition_id
        self.schema_group = schema_group
        self.schema = schema
        self.schema_file = schema_file
        self.schema_name = schema_name
        self.schema_format = schema_format
        self.auto_register_schema = auto_register_schema
        self.check_schema_settings()  # refused when the DAG is parsed

    def check_schema_settings(self) -> None:
        """Refuse an incomplete or contradictory schema setting, naming the parameter."""
        schema_format(self.schema_format)
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

    def _typed(self, events: Iterable[Any]) -> tuple[Iterable[Any], dict[str, Any]]:
        """``(events, publisher arguments)``: with a schema, every body encoded (all rows before anything is
        sent) and the content type and schema for the publisher; else the events as they are."""
        if not self.schema_group:
            return events, {}
        self.check_arguments()  # an argument out of range fails before the registry is asked
        self.check_schema_settings()
        fmt = schema_format(self.schema_format)
        definition = load_definition(self.schema, self.schema_file)
        registry = SchemaRegistryHook(self.event_hubs_conn_id).get_endpoint()
        with registry.client() as client:
            definition, used = resolve_schema(client, self.schema_group, fmt, definition=definition,
                                              schema_name=self.schema_name or None,
                                              auto_register=self.auto_register_schema, versions=registry.schema_versions)
            batch = TypedBatch(client, definition, used)
            encoded = batch.encode(events)
        self.log.info("encoded %d events against %s (%s)", len(encoded), used.describe(), fmt)
        return encoded, {"content_type": batch.content_type, "schema": used.to_dict()}

    def _events(self, context: Context) -> Iterable[Any]:
        events = self.events
        if isinstance(events, _EventsFunction):  # not rendered: ``execute`` called without Airflow's templating
            events = events(context)
        if events is None:
            raise AirflowFailException(f"Task {self.task_id!r}: `events` resolved to None; nothing to publish")
        return events

    def execute(self, context: Context) -> dict[str, dict[str, int]]:
        group = self.resolved_producer_group
        with self.provider_errors(), self.measured():
            events, typed = self._typed(self._events(context))
            publisher = self.get_publisher(origin=self.origin(context), **typed)
            batch_id = self.batch_id(context, group)
            self.log.info(
                "group %s batch %s: publishing to hub %s with the %s state backend (attempt %s)",
                group, batch_id[:16], publisher.endpoint.eventhub_name, self.backend, context["ti"].try_number,
            )
            results = publisher.publish(events, batch_id=batch_id, default_partition=self.partition_id)
        return self.report(batch_id, results)
